"""``kernels.attention`` with leading (batch, head) axes that differ: the reference path's refusal
named an inner stage (``scores_forward``) and the fast paths' said the reference path broadcasts them,
which it does not. Every path now gives one message, from ``attention``."""

import numpy as np
import pytest

from npattn import kernels
from npattn.errors import ShapeError


@pytest.mark.parametrize("impl", ["reference", "fused", "tiled", "auto"])
@pytest.mark.parametrize(
    "shapes",
    [((2, 3, 5, 4), (2, 1, 5, 4), (2, 1, 5, 4)), ((2, 5, 4), (5, 4), (5, 4)), ((2, 5, 4), (2, 5, 4), (3, 5, 4))],
    ids=["one key head", "unbatched keys", "values of another batch"],
)
def test_differing_leading_axes_are_one_message_on_every_path(impl, shapes):
    q, k, v = (np.ones(s) for s in shapes)
    with pytest.raises(ShapeError, match=r"^attention: queries, keys and values need equal leading \(batch, head\)"):
        kernels.attention(q, k, v, impl=impl)
