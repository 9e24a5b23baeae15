"""A frozen Parameter's .grad is None, so optimizers skip it; a .grad set on it by hand is used,
as torch.optim uses it (it steps every parameter whose .grad is not None)."""

import numpy as np
import pytest

import npattn
from npattn.optim import SGD, Adam, AdamW


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
def test_a_hand_set_grad_of_a_frozen_parameter_is_used_like_torch(cls):
    torch = pytest.importorskip("torch")
    p = npattn.Parameter(np.ones(3), requires_grad=False)
    p.grad = np.full(3, 0.5)
    cls([p], lr=0.1).step()
    t = torch.nn.Parameter(torch.ones(3, dtype=torch.float64), requires_grad=False)
    t.grad = torch.full((3,), 0.5, dtype=torch.float64)
    getattr(torch.optim, cls.__name__)([t], lr=0.1).step()
    np.testing.assert_allclose(p.data, t.detach().numpy(), rtol=0, atol=1e-15)
    assert not np.array_equal(p.data, np.ones(3))


def test_a_frozen_parameter_without_a_grad_is_skipped():
    p = npattn.Parameter(np.ones(3), requires_grad=False)
    assert p.grad is None
    AdamW([p], lr=0.1, weight_decay=0.5).step()
    np.testing.assert_array_equal(p.data, np.ones(3))


def test_fit_stops_at_the_update_that_made_a_weight_non_finite():
    from npattn.train.tasks import TeacherStudent

    task = TeacherStudent(seed=123)
    model = task.make_model()
    opt = Adam(model.parameters(), lr=0.05, eps=0.0)

    def batches(step):
        x, target = task.batch(step)
        x = x.copy()
        x[..., 0] = 0  # a row of W_query's gradient is exactly 0: Adam's eps=0 divides 0 by 0
        return x, target

    message = "training stopped at step 0: its update made 4 entries of W_query non-finite"
    with np.errstate(invalid="ignore"), pytest.raises(npattn.TrainingError, match=message):
        npattn.fit(model, opt, task.criterion, batches, 3)


def test_a_nan_batch_is_named_as_the_cause_not_the_learning_rate():
    from npattn.train.tasks import TeacherStudent

    task = TeacherStudent(seed=123)
    model = task.make_model()
    x, target = task.batch(0)
    with pytest.raises(npattn.TrainingError, match="the batch's x holds NaN or inf"):
        npattn.fit(model, Adam(model.parameters()), task.criterion, lambda s: (np.full(x.shape, np.nan), target), 2)
