"""Every stage pair keeps private copies of what its backward reads: editing an input (or a
returned output) between forward and backward never changes the gradients, at the stage level as
at the module level."""

import numpy as np
import pytest

from npattn.nn import functional as F

rng = np.random.default_rng(0)


def _inputs():
    return {
        "project": (F.project_forward, F.project_backward, [rng.standard_normal((4, 3)), rng.standard_normal((3, 2))]),
        "scores": (F.scores_forward, F.scores_backward, [rng.standard_normal((4, 3)), rng.standard_normal((5, 3))]),
        "context": (F.context_forward, F.context_backward, [rng.random((4, 5)), rng.standard_normal((5, 2))]),
        "mask": (F.mask_forward, F.mask_backward, [rng.standard_normal((4, 4)), np.triu(np.ones((4, 4), bool), 1)]),
        "gelu": (F.gelu_forward, F.gelu_backward, [rng.standard_normal((4, 3))]),
        "softmax": (lambda s: F.softmax_forward(s, 0.5), F.softmax_backward, [rng.standard_normal((4, 5))]),
        "attention": (
            F.attention_forward,
            F.attention_backward,
            [rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal((5, 2))],
        ),
    }


@pytest.mark.parametrize("stage", sorted(_inputs()))
def test_editing_inputs_and_output_after_forward_changes_no_gradient(stage):
    forward, backward, args = _inputs()[stage]
    out, cache = forward(*[a.copy() for a in args])
    G = np.random.default_rng(1).standard_normal(out.shape)
    want = [g.copy() for g in backward(G, cache)]
    edited = [a.copy() for a in args]
    out, cache = forward(*edited)
    for a in edited:
        a[...] = ~a if a.dtype == bool else a * 3 + 1
    out[...] = 7
    got = backward(G, cache)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(w, g)
