"""``on_step(monkeypatch, call, action)``: run ``action()`` just before the ``call``-th optimizer
step (1-based) of a test's run: after the saves of the steps before it, before the next one."""

from npattn.optim import Optimizer


def on_step(monkeypatch, call, action):
    original, calls = Optimizer.step, []

    def step(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            action()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Optimizer, "step", step)
