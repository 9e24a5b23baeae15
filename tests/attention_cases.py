"""The attention classes every reliability test runs on, in one place.

To put a new attention class under the error, numerics and property tests, append one
``AttentionCase`` to ``ATTENTION_CASES``: a name and a ``build(d_in, d_out, rng, dtype)`` that
returns the module in eval mode (dropout off), the flags that say what the class accepts, and
(optional) ``reference(model, x)``: the class's output computed independently in float64 with a
log-sum-exp softmax, for the extreme-value tests.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import logsumexp

import npattn


@dataclass(frozen=True)
class AttentionCase:
    name: str
    build: Callable[[int, int, Any, Any], npattn.Module]
    causal: bool = False  # token i sees only tokens <= i: the permutation property does not apply
    accepts_2d: bool = True  # takes (n, d_in) as well as (batch, n, d_in)
    max_tokens: int | None = None  # context_length, when the class has one
    reference: Callable[[npattn.Module, np.ndarray], np.ndarray] | None = None

    def __str__(self) -> str:
        return self.name


def softmax_reference(z: np.ndarray) -> np.ndarray:
    """float64 softmax over the last axis as exp(z - logsumexp(z)): no overflow at any magnitude.

    z is shifted by its row maximum first (the same function; the shift is exact in float64 for
    float32 scores), so that rounding logsumexp(z) does not cost eps * |z| in every exponent.
    """
    z = np.asarray(z, dtype=np.float64)
    z = z - np.max(z, axis=-1, keepdims=True)
    return np.exp(z - logsumexp(z, axis=-1, keepdims=True))


def self_attention_v1_reference(model: npattn.Module, x: np.ndarray) -> np.ndarray:
    """The book's section 3.4.2 in float64: softmax(Q K^T / sqrt(d_out)) V."""
    W_query, W_key, W_value = (np.asarray(p.data, dtype=np.float64) for p in model.parameters())
    x = np.asarray(x, dtype=np.float64)
    queries, keys, values = x @ W_query, x @ W_key, x @ W_value
    scaled = queries @ np.swapaxes(keys, -1, -2) / np.sqrt(keys.shape[-1])
    return softmax_reference(scaled) @ values


def _heads(d_out: Any) -> int:
    """Two heads when d_out is a positive even int, else one (bad d_out values reach the class as they are)."""
    return 2 if type(d_out) is int and d_out > 0 and d_out % 2 == 0 else 1


ATTENTION_CASES = [
    AttentionCase(
        "SelfAttention_v1",
        lambda d_in, d_out, rng, dtype: npattn.SelfAttention_v1(d_in, d_out, rng=rng, dtype=dtype),
        reference=self_attention_v1_reference,
    ),
]
CONTEXT_LENGTH = 128  # for the causal classes: the longest sequence the tests feed them


def _causal(name: str, build: Callable[..., npattn.Module]) -> AttentionCase:
    """A causal chapter-3 class: dropout 0, batched input only, at most CONTEXT_LENGTH tokens.
    ``build(d_in, d_out, heads, rng, dtype)``; heads is 2 for even d_out, else 1."""
    return AttentionCase(
        name,
        lambda d_in, d_out, rng, dtype: build(d_in, d_out, _heads(d_out), rng, dtype),
        causal=True,
        accepts_2d=False,
        max_tokens=CONTEXT_LENGTH,
    )


if hasattr(npattn, "MultiHeadAttention"):  # the chapter-3 classes, once they are in npattn
    T = CONTEXT_LENGTH
    ATTENTION_CASES += [
        AttentionCase(
            "SelfAttention_v2",
            lambda d_in, d_out, rng, dtype: npattn.SelfAttention_v2(d_in, d_out, rng=rng, dtype=dtype),
        ),
        _causal("CausalAttention", lambda i, o, h, rng, dt: npattn.CausalAttention(i, o, T, 0.0, rng=rng, dtype=dt)),
        _causal(
            "MultiHeadAttentionWrapper",  # h heads of o // h columns: d_out columns in all
            lambda i, o, h, rng, dt: npattn.MultiHeadAttentionWrapper(
                i, o if h == 1 else o // h, T, 0.0, h, rng=rng, dtype=dt
            ),
        ),
        _causal(
            "MultiHeadAttention", lambda i, o, h, rng, dt: npattn.MultiHeadAttention(i, o, T, 0.0, h, rng=rng, dtype=dt)
        ),
    ]


def record_stages(model: npattn.Module) -> dict[str, list[np.ndarray]]:
    """Install a recorder on ``model`` and its sub-modules; returns stage name -> arrays recorded,
    in order ("heads.0.values" and "values" both count as "values")."""
    seen: dict[str, list[np.ndarray]] = defaultdict(list)

    def record(name: str, array: np.ndarray) -> None:
        seen[name.rsplit(".", 1)[-1]].append(np.array(array))

    for module in model.modules():
        object.__setattr__(module, "_recorder", record)
    return seen


def largest_scaled_score(model: npattn.Module, seen: dict[str, list[np.ndarray]]) -> float:
    """S, the largest |scaled score| of the last forward: max|attn_scores| / sqrt(head_dim)."""
    head_dim = getattr(model, "head_dim", None)
    return max(
        float(np.max(np.abs(scores), initial=0)) / np.sqrt(head_dim or keys.shape[-1])
        for scores, keys in zip(seen["attn_scores"], seen["keys"])
    )
