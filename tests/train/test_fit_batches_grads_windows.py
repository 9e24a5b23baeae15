"""Small refusals a hand-written loop meets: fit's batches must give (x, target); a bool .grad is
no gradient; a dataset index past either end names the count; fit's history= is checked like a
resumed one (its distances, npattn's losses >= 0); start_step > 0 needs the history it continues."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError, DTypeError
from npattn.optim import SGD, Adam
from npattn.train import fit
from npattn.train.history import History
from npattn.train.tasks import make_task
from npattn.train.text import GPTDatasetV1


def test_fit_refuses_batches_that_are_not_pairs():
    task = make_task("teacher-student")
    model = task.make_model()
    with pytest.raises(ConfigError, match=r"fit: batches\(0\) must return \(x, target\), got ndarray"):
        fit(model, Adam(model.parameters()), task.criterion, lambda step: task.batch(step)[0], 2)


def test_a_bool_grad_is_refused_and_nothing_moves():
    p = npattn.Parameter(np.ones(3))
    p.grad = np.array([True, False, True])
    with pytest.raises(DTypeError, match=r"\.grad has dtype bool"):
        SGD([p], lr=0.1).step()
    np.testing.assert_array_equal(p.data, np.ones(3))


def test_dataset_indices_name_the_count():
    ds = GPTDatasetV1(None, None, 4, 4, token_ids=range(21))
    assert len(ds) == 5 and np.array_equal(ds[-1][0], ds[4][0])
    with pytest.raises(IndexError, match=r"GPTDatasetV1 index 5 is out of range: it holds 5 windows"):
        ds[5]
    assert len(list(ds)) == 5  # iteration still ends at the IndexError


def _run(steps=3):
    task = make_task("teacher-student")
    model = task.make_model()
    opt = Adam(model.parameters(), lr=0.05)
    return task, model, opt, fit(model, opt, task.criterion, task.batch, steps, log_every=1)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s["loss"].__setitem__(1, -0.5), r"history.loss\[1\] is -0.5, but MSELoss is >= 0"),
        (lambda s: s["moved_from_start"]["W_query"].__setitem__(-1, 2.0), r"moved_from_start\['W_query'\]\[-1\]"),
        (lambda s: s["start"]["W_key"].__setitem__((0, 0), 9.0), r"moved_from_start\['W_key'\]\[-1\]"),
    ],
)
def test_fit_checks_a_given_history_like_a_resume(edit, message):
    task, model, opt, history = _run()
    state = history.state_dict()
    state = {k: ({kk: np.array(vv, copy=True) for kk, vv in v.items()} if isinstance(v, dict) else list(v))
             for k, v in state.items()}  # fmt: skip
    edit(state)
    with pytest.raises(ConfigError, match=message):
        fit(model, opt, task.criterion, task.batch, 5, start_step=3, history=History.from_state_dict(state))


def test_fit_continues_its_own_history():
    task, model, opt, history = _run()
    again = fit(model, opt, task.criterion, task.batch, 5, start_step=3, history=history)
    assert len(again.loss) == 5
