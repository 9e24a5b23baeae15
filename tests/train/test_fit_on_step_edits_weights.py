"""``fit(on_step=)`` that changes the weights (clipping, a max-norm, the hook "after every update"):
the step's log was written before ``on_step`` ran, so the History described weights the step did not
end with, and continuing the run from that History was refused. The log now records the weights
as ``on_step`` leaves them (``on_log``, called before ``on_step``, saw the log before them)."""

import numpy as np

import npattn
from npattn.optim import Adam
from npattn.train.tasks import TeacherStudent


def run(steps_parts, log_every=2):
    task = TeacherStudent(seed=2)
    model = task.make_model()
    opt = Adam(model.parameters(), lr=0.05)
    seen = []

    def clip(step, history):
        for p in model.parameters():
            np.clip(p.data, -0.5, 0.5, out=p.data)

    def on_log(step, loss, history):
        seen.append({k: v[-1] for k, v in history.moved_from_start.items()})

    history, start = None, 0
    for steps in steps_parts:
        history = npattn.fit(model, opt, task.criterion, task.batch, steps, start_step=start, history=history,
                             log_every=log_every, on_step=clip, on_log=on_log)  # fmt: skip
        start = steps
    return model, history, seen


def test_the_log_records_the_weights_on_step_leaves():
    model, history, _ = run([4])
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(history.last_log[name], p.data)
        moved = float(np.linalg.norm(p.data - history.start[name]))
        assert history.moved_from_start[name][-1] == moved
        assert np.abs(p.data).max() <= 0.5


def test_the_run_continues_from_its_own_history_as_if_uninterrupted():
    model_a, history_a, _ = run([4, 6])
    model_b, history_b, _ = run([6])
    for name, p in model_a.named_parameters():
        np.testing.assert_array_equal(p.data, dict(model_b.named_parameters())[name].data)
    assert history_a.loss == history_b.loss and history_a.log_steps == history_b.log_steps == [2, 4, 6]
    assert history_a.moved_from_start == history_b.moved_from_start
    assert history_a.moved_since_log == history_b.moved_since_log
