"""``npattn.kernels``: stages 2-5 of attention (scores, mask, softmax, context) computed three ways.

    dispatch.py     attention / attention_backward: picks the path (impl = reference | fused |
                    tiled | auto) and runs it; the reference path is nn.functional's stage pairs
    fused.py        one n x m buffer, one elementwise pass each way
    tiled.py        FlashAttention: blocks, an online softmax, O(n) memory
    blocks.py       what fused and tiled share: shape checks, row blocks, the causal fill
"""

from npattn.kernels import fused, tiled
from npattn.kernels.dispatch import (
    AUTO_SMALL,
    AUTO_TILED_BYTES,
    FAST_SCORE_LIMIT,
    IMPLS,
    attention,
    attention_backward,
    check_impl,
    choose_impl,
    compute_dtype,
)

__all__ = [
    "AUTO_SMALL",
    "AUTO_TILED_BYTES",
    "FAST_SCORE_LIMIT",
    "IMPLS",
    "attention",
    "attention_backward",
    "check_impl",
    "choose_impl",
    "compute_dtype",
    "fused",
    "tiled",
]
