"""Gradient checks of the whole pipeline: every stage pair of ``npattn.functional`` on its own,
then every parameter of SelfAttention_v1 (what ``npattn gradcheck`` prints)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from npattn._checks import check_positive_int
from npattn.gradcheck import GradcheckReport, gradcheck, gradcheck_stage
from npattn.nn import functional as F
from npattn.nn.attention import SelfAttention_v1

__all__ = ["PipelineGradcheck", "gradcheck_pipeline", "run_gradcheck"]


@dataclass
class PipelineGradcheck:
    """One GradcheckReport per stage pair, and the module's per-parameter report."""

    stages: list[tuple[str, GradcheckReport]]
    module: GradcheckReport
    module_name: str

    @property
    def passed(self) -> bool:
        return self.module.passed and all(report.passed for _, report in self.stages)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        header = f"{'stage pair':<22} {'inputs':<34} {'max abs err':>12} {'min margin':>11}  result"
        lines = ["per stage (npattn.functional, float64, central differences, random upstream gradient):", header]
        lines.append("-" * len(header))
        for name, report in self.stages:
            inputs = ", ".join(f"{c.name} {'x'.join(map(str, c.shape))}" for c in report.checks)
            err = max(c.max_abs_error for c in report.checks)
            margin = min(c.margin for c in report.checks)
            margin_text = "inf" if margin == float("inf") else f"{margin:.3g}x"
            lines.append(f"{name:<22} {inputs:<34} {err:>12.3e} {margin_text:>11}  {'ok' if report.passed else 'FAIL'}")
        lines += ["", f"per parameter ({self.module_name}):", str(self.module), ""]
        failed = [name for name, report in self.stages if not report.passed]
        if not self.module.passed:
            failed.append(self.module_name)
        lines.append("gradcheck: PASSED" if self.passed else f"gradcheck: FAILED ({', '.join(failed)})")
        return "\n".join(lines)

    __repr__ = __str__


def _masked_softmax_forward(attn_scores: np.ndarray, mask: np.ndarray, scale: float) -> tuple[np.ndarray, tuple]:
    """The mask checked through the softmax that follows it (-inf itself has no finite difference)."""
    masked, c_mask = F.mask_forward(attn_scores, mask)
    attn_weights, c_softmax = F.softmax_forward(masked, scale)
    return attn_weights, (c_mask, c_softmax)


def _masked_softmax_backward(d_attn_weights: np.ndarray, cache: tuple) -> tuple[np.ndarray]:
    c_mask, c_softmax = cache
    (d_masked,) = F.softmax_backward(d_attn_weights, c_softmax)
    return F.mask_backward(d_masked, c_mask)


def _concat_forward(*arrays: np.ndarray) -> tuple[np.ndarray, tuple]:
    return F.concat_forward(arrays)


def gradcheck_pipeline(n_tokens: int = 6, d_in: int = 3, d_out: int = 2, *, seed: int = 0) -> PipelineGradcheck:
    """Check every stage pair with inputs of the sizes a (n_tokens, d_in) -> d_out attention uses,
    then ``npattn.gradcheck(SelfAttention_v1(d_in, d_out, rng=seed), x)``. Never raises on a
    failed check: the result is falsy and its table says which tensor failed.

    Raises:
        ConfigError: a size that is not a positive integer.
    """
    n = check_positive_int(n_tokens, "n_tokens")
    d_in = check_positive_int(d_in, "d_in")
    d_out = check_positive_int(d_out, "d_out")
    rng = np.random.default_rng(seed)

    def r(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape)

    heads = 2 if d_out % 2 == 0 else 1
    mask = F.causal_mask(n)
    keep = rng.random((n, n)) >= 0.5
    scale = 1.0 / math.sqrt(d_out)
    # (name, forward, backward, inputs, input names, kwargs), looked up now so a patched pair is checked
    pairs: Sequence[tuple[str, Callable[..., Any], Callable[..., Any], list[np.ndarray], list[str], dict]] = [
        ("project", F.project_forward, F.project_backward, [r(n, d_in), r(d_in, d_out)], ["x", "W"], {}),
        ("bias", F.bias_forward, F.bias_backward, [r(n, d_out), r(d_out)], ["y", "bias"], {}),
        ("scores", F.scores_forward, F.scores_backward, [r(n, d_out), r(n, d_out)], ["queries", "keys"], {}),
        ("softmax", F.softmax_forward, F.softmax_backward, [r(n, n)], ["attn_scores"], {"scale": scale}),
        (
            "mask (+ softmax)",
            _masked_softmax_forward,
            _masked_softmax_backward,
            [r(n, n)],
            ["attn_scores"],
            {"mask": mask, "scale": scale},
        ),
        ("dropout", F.dropout_forward, F.dropout_backward, [r(n, n)], ["attn_weights"], {"keep": keep, "p": 0.5}),
        ("context", F.context_forward, F.context_backward, [r(n, n), r(n, d_out)], ["attn_weights", "values"], {}),
        ("split_heads", F.split_heads_forward, F.split_heads_backward, [r(2, n, d_out)], ["x"], {"num_heads": heads}),
        ("merge_heads", F.merge_heads_forward, F.merge_heads_backward, [r(2, heads, n, d_out // heads)], ["x"], {}),
        ("concat", _concat_forward, F.concat_backward, [r(n, d_out), r(n, d_out)], ["head0", "head1"], {}),
        (
            "attention (stages 2-5)",
            F.attention_forward,
            F.attention_backward,
            [r(n, d_out), r(n, d_out), r(n, d_out)],
            ["queries", "keys", "values"],
            {"mask": mask, "dropout_keep": keep, "dropout_p": 0.5},
        ),
    ]
    stages = [
        (name, gradcheck_stage(fwd, bwd, inputs, kwargs=kw, names=names, seed=seed, raise_exception=False))
        for name, fwd, bwd, inputs, names, kw in pairs
    ]
    model = SelfAttention_v1(d_in, d_out, rng=seed)
    x = rng.standard_normal((n, d_in))
    module = gradcheck(model, x, seed=seed, raise_exception=False)
    return PipelineGradcheck(stages, module, f"SelfAttention_v1({d_in}, {d_out}, rng={seed})")


def run_gradcheck(n_tokens: int = 6, d_in: int = 3, d_out: int = 2, *, seed: int = 0, out: TextIO | None = None) -> int:
    """``npattn gradcheck``: print ``gradcheck_pipeline``'s tables; returns 0 when all pass, else 1."""
    result = gradcheck_pipeline(n_tokens, d_in, d_out, seed=seed)
    print(f"gradient check for n_tokens={n_tokens}, d_in={d_in}, d_out={d_out}, seed={seed}\n", file=out or sys.stdout)
    print(result, file=out or sys.stdout)
    return 0 if result else 1
