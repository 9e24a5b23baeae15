"""Optimizers with PyTorch's names, signatures and update rules: SGD, Adam, AdamW.

Each ``step()`` reads every Parameter's ``.grad`` and updates ``.data`` in place, exactly as
``torch.optim`` documents it (the algorithm boxes are quoted above each update). ``zero_grad()``
sets the grads to zero; a ``.grad`` of None (a frozen parameter, ``requires_grad=False``) stays
None and ``step()`` skips it, like PyTorch. ``state_dict()`` holds the hyper-parameters and the
per-parameter state (step count, momentum/moment buffers) in PyTorch's
layout, ``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``, and
``load_state_dict`` restores it, so training resumes exactly.

Every way a setting enters (the constructor, a per-group dict, ``add_param_group``,
``load_state_dict``, an edit of ``param_groups`` before ``step()``) goes through one check,
``_check_settings``, with the constructor's messages. ``step()`` checks every group, parameter,
gradient and buffer, and computes every new value, before it stores any: a failed step leaves
the weights, grads and optimizer state exactly as they were.
"""

from npattn.optim.adam import Adam, AdamW
from npattn.optim.optimizer import Optimizer
from npattn.optim.sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]
