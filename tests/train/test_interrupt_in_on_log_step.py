"""A Ctrl-C raised inside ``train_task``'s ``on_log`` at step 4 was reported as "interrupted at step
3" (the step the last save had set); the step the callback was given is the step reached."""

import pytest

from npattn.train.command import train_task
from npattn.train.loop import Interrupted


def test_the_step_reported_is_the_logged_one(tmp_path):
    def on_log(step, loss, history):
        if step == 4:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted, match=r"interrupted at step 4; the last checkpoint .* holds step 3"):
        train_task(steps=10, log_every=2, save=tmp_path / "r.npz", save_every=3, on_log=on_log)
