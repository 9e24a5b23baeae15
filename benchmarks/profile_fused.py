"""Where the time of one fused forward + backward of SelfAttention_v1 goes, step by step.

Replays the steps of ``SelfAttention_v1(impl="fused")`` (stage 1 from ``npattn.nn.functional``,
stages 2-5 as in ``npattn.kernels.fused``) on the same inputs and times each one, interleaved: the matrix
products (what the GEMM floor counts) against everything else (elementwise passes, copies).

    python benchmarks/profile_fused.py --shape 4096 768 64
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from _common import np, start, table
from _common import parser as common_parser

import npattn
from npattn.kernels import blocks, fused
from npattn.kernels.blocks import T, augment, flat, row_dot


def steps(n: int, d_in: int, d_out: int, dtype: Any) -> list[tuple[str, str, Callable[[], Any]]]:
    """(name, kind, call) for every step, in order; kind is "gemm" or "other"."""
    rng = np.random.default_rng(0)
    model = npattn.SelfAttention_v1(d_in, d_out, rng=0, dtype=dtype)
    x = rng.standard_normal((n, d_in)).astype(dtype)
    G = rng.standard_normal((n, d_out)).astype(dtype)
    W = [p.data for p in model.parameters()]
    s: dict[str, Any] = {}
    scale = 1.0 / math.sqrt(d_out)

    def put(key: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            s[key] = fn()

        return run

    def exp_pass() -> None:
        blocks.run_rows(lambda r0, r1: fused._exp_rows(s["E"][0], r0, r1, 0, False), n, n)

    def multiply_pass() -> None:
        blocks.run_rows(lambda r0, r1: fused._multiply_rows(s["dS"][0], s["E"][0], r0, r1), n, n)

    def project() -> None:
        s["q"], s["k"], s["v"] = (flat(x @ w) for w in W)

    def prepare() -> None:
        s["q"] = s["q"] * dtype(scale)
        s["v1"] = augment(s["v"], 1.0)

    def grads_of_qk() -> None:
        s["dQ"], s["dK"] = np.matmul(s["dS"], s["k"]), np.matmul(T(s["dS"]), s["q"])

    def project_backward() -> None:
        s["dx"] = [(x.T @ d[0], d[0] @ w.T) for d, w in zip((s["dQ"], s["dK"], s["dV"]), W)]

    return [
        ("x @ W_query, W_key, W_value", "gemm", project),
        ("scale q, [v, 1]", "other", prepare),
        ("E = q k^T", "gemm", put("E", lambda: np.matmul(s["q"], T(s["k"])))),
        ("E = exp(E - rowmax)", "other", exp_pass),
        ("[Z, l] = E [v, 1]", "gemm", put("Zl", lambda: np.matmul(s["E"], s["v1"]))),
        ("context_vec = Z / l", "other", put("out", lambda: s["Zl"][..., :d_out] / s["Zl"][..., d_out:])),
        ("G / l, D / l, [G/l, -D/l]", "other", put("GD", lambda: _g_terms(G, s["Zl"], s["out"], d_out))),
        ("dV = E^T (G / l)", "gemm", put("dV", lambda: np.matmul(T(s["E"]), s["GD"][0]))),
        ("dS = [G/l, -D/l] [v, 1]^T", "gemm", put("dS", lambda: np.matmul(s["GD"][1], T(s["v1"])))),
        ("dS *= E", "other", multiply_pass),
        ("dQ = dS k, dK = dS^T q", "gemm", grads_of_qk),
        ("dQ *= scale", "other", lambda: s["dQ"].__imul__(dtype(scale))),
        ("dW = x^T dQKV, dx = dQKV W^T", "gemm", project_backward),
        ("dx = sum of three paths", "other", lambda: s["dx"][0][1] + s["dx"][1][1] + s["dx"][2][1]),
    ]


def _g_terms(G: np.ndarray, Zl: np.ndarray, out: np.ndarray, kv: int) -> tuple[np.ndarray, np.ndarray]:
    G_l = flat(G) * np.reciprocal(Zl[..., kv:])
    return G_l, augment(G_l, -row_dot(G_l, out))


def main() -> None:
    parser = common_parser(__doc__)
    parser.add_argument("--shape", type=int, nargs=3, default=[4096, 768, 64], metavar=("N", "D_IN", "D_OUT"))
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    start(args)
    dtype = np.dtype(args.dtype).type
    plan = steps(*args.shape, dtype)
    samples: dict[str, list[float]] = {name: [] for name, _, _ in plan}
    for _ in range(args.repeats):
        for name, _, call in plan:  # in order: each step needs the previous ones
            t0 = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - t0)
    rows = [{"step": name, "kind": kind, "ms": 1e3 * statistics.median(samples[name])} for name, kind, _ in plan]
    total = sum(r["ms"] for r in rows)
    for r in rows:
        r["share"] = r["ms"] / total
    gemm = sum(r["ms"] for r in rows if r["kind"] == "gemm")
    print(f"# shape (n, d_in, d_out) = {tuple(args.shape)}, {args.dtype}; medians of {args.repeats} runs")
    print(table(rows, [("step", "step", "s"), ("kind", "kind", "s"), ("ms", "ms", ".2f"), ("share", "share", ".1%")]))
    print(f"total {total:.1f} ms: matrix products {gemm:.1f} ms, everything else {total - gemm:.1f} ms")


if __name__ == "__main__":
    main()
