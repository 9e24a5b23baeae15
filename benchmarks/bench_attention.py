"""SelfAttention_v1 forward and forward + backward: npattn's paths side by side with PyTorch and
the GEMM floor, in one run.

For each shape (n, d_in, d_out) and dtype it times, interleaved:

- reference, fused, tiled: ``SelfAttention_v1(d_in, d_out, impl=...)`` forward, then backward
  (same weights, same x, same upstream gradient);
- fused 1T: the fused path with its elementwise pass kept in the calling thread (no pool), to
  show what the second core brings;
- torch: the same math in PyTorch CPU autograd (x @ W, q @ k.T, softmax(scale * s), a @ v;
  backward from the same gradient), with as many intra-op threads as npattn uses cores;
- floor: the same matrix products alone (15 GEMMs: 5 forward, 10 backward), in NumPy.

Ratios: fused/torch, fused/floor (the targets), tiled/fused, reference/torch. Medians of
interleaved repetitions.

    python benchmarks/bench_attention.py                  # full grid, float32 and float64
    python benchmarks/bench_attention.py --quick          # smoke run (three small shapes)
    python benchmarks/bench_attention.py --json out.json  # also write every number as JSON
"""

from __future__ import annotations

import math
from typing import Any

from _common import interleaved, np, ratio, start, table, write_json
from _common import parser as common_parser

import npattn
from npattn import kernels
from npattn.kernels import blocks

GRID = [(6, 3, 2), (256, 64, 64), (1024, 256, 64), (2048, 512, 128), (4096, 768, 64)]
QUICK = [(6, 3, 2), (256, 64, 64), (1024, 256, 64)]
IMPLS = ("reference", "fused", "tiled")


def make_model(d_in: int, d_out: int, dtype: Any, impl: str, weights: str) -> npattn.SelfAttention_v1:
    """SelfAttention_v1 with the book's U[0, 1) init, or (weights="scaled") that init divided by
    sqrt(d_in), which keeps the softmax away from saturation at large d_in."""
    model = npattn.SelfAttention_v1(d_in, d_out, rng=0, dtype=dtype, impl=impl)
    if weights == "scaled":
        for p in model.parameters():
            p.data /= np.sqrt(d_in)
    return model


def npattn_cases(x: np.ndarray, G: np.ndarray, d_in: int, d_out: int, dtype: Any, weights: str) -> dict[str, Any]:
    cases = {}
    for impl in IMPLS:
        model = make_model(d_in, d_out, dtype, impl, weights)

        def fwd(model=model):
            model(x)

        def fwd_bwd(model=model):
            model(x)
            model.backward(G)

        cases[impl] = (fwd, fwd_bwd)
    return cases


def single_thread(fn):
    """Run ``fn`` with the elementwise pool switched off (every pass in the calling thread)."""

    def run():
        saved = blocks.MIN_PARALLEL_ELEMENTS
        blocks.MIN_PARALLEL_ELEMENTS = 1 << 62
        try:
            fn()
        finally:
            blocks.MIN_PARALLEL_ELEMENTS = saved

    return run


def torch_cases(torch: Any, x: np.ndarray, G: np.ndarray, weights: list[np.ndarray]) -> tuple[Any, Any]:
    tx, tG = torch.from_numpy(x), torch.from_numpy(G)
    W = [torch.from_numpy(w.copy()).requires_grad_() for w in weights]
    scale = 1.0 / math.sqrt(weights[0].shape[1])

    def forward():
        q, k, v = tx @ W[0], tx @ W[1], tx @ W[2]
        attn_weights = torch.softmax((q @ k.T) * scale, dim=-1)
        return attn_weights @ v

    def fwd_bwd():
        forward().backward(tG)

    return forward, fwd_bwd


def floor_cases(x: np.ndarray, G: np.ndarray, weights: list[np.ndarray]) -> tuple[Any, Any]:
    Wq, Wk, Wv = weights

    def forward():
        q, k, v = x @ Wq, x @ Wk, x @ Wv
        a = q @ k.T
        return q, k, v, a, a @ v

    def fwd_bwd():
        q, k, v, a, _ = forward()
        d_a = G @ v.T
        d_v = a.T @ G
        d_q, d_k = d_a @ k, d_a.T @ q
        for d, W in ((d_q, Wq), (d_k, Wk), (d_v, Wv)):
            x.T @ d
            d @ W.T

    return forward, fwd_bwd


def run(
    shapes: list[tuple[int, int, int]], dtypes: list[Any], repeats: int, target: float, torch: Any, weights: str
) -> list[dict]:
    rows = []
    for n, d_in, d_out in shapes:
        for dtype in dtypes:
            rng = np.random.default_rng(0)
            x = rng.standard_normal((n, d_in)).astype(dtype)
            G = rng.standard_normal((n, d_out)).astype(dtype)
            cases = npattn_cases(x, G, d_in, d_out, dtype, weights)
            arrays = [p.data for p in make_model(d_in, d_out, dtype, "reference", weights).parameters()]
            cases["fused 1T"] = tuple(single_thread(f) for f in cases["fused"])
            cases["floor"] = floor_cases(x, G, arrays)
            if torch is not None:
                cases["torch"] = torch_cases(torch, x, G, arrays)
            qkv = np.empty((n, d_out), dtype=dtype)
            auto = kernels.choose_impl("auto", qkv, qkv, qkv)
            for phase, index in (("fwd", 0), ("fwd+bwd", 1)):
                med = interleaved({name: fns[index] for name, fns in cases.items()}, repeats, target)
                ms = {name: 1e3 * t for name, t in med.items()}
                rows.append(
                    {
                        "shape": f"({n}, {d_in}, {d_out})",
                        "dtype": np.dtype(dtype).name,
                        "phase": phase,
                        "auto": auto,
                        **{f"{name} ms": t for name, t in ms.items()},
                        "fused/torch": ratio(ms["fused"], ms.get("torch")),
                        "fused/floor": ratio(ms["fused"], ms["floor"]),
                        "tiled/fused": ratio(ms["tiled"], ms["fused"]),
                        "reference/torch": ratio(ms["reference"], ms.get("torch")),
                        "fused 1T/fused": ratio(ms["fused 1T"], ms["fused"]),
                    }
                )
                print(table(rows[-1:], COLUMNS).splitlines()[-1], flush=True)
    return rows


COLUMNS = [
    ("shape", "(n, d_in, d_out)", "s"),
    ("dtype", "dtype", "s"),
    ("phase", "phase", "s"),
    ("reference ms", "reference ms", ".3f"),
    ("fused ms", "fused ms", ".3f"),
    ("fused 1T ms", "fused 1T ms", ".3f"),
    ("tiled ms", "tiled ms", ".3f"),
    ("torch ms", "torch ms", ".3f"),
    ("floor ms", "floor ms", ".3f"),
    ("fused/torch", "fused/torch", ".2f"),
    ("fused/floor", "fused/floor", ".2f"),
    ("tiled/fused", "tiled/fused", ".2f"),
    ("reference/torch", "ref/torch", ".2f"),
    ("auto", "auto picks", "s"),
]


def main() -> None:
    parser = common_parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="three small shapes, float32, 3 repetitions")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repetitions (default 7; quick 3)")
    parser.add_argument("--dtype", choices=["float32", "float64", "both"], default=None)
    parser.add_argument(
        "--weights",
        choices=["book", "scaled"],
        default="book",
        help="book: U[0, 1) like torch.rand (the softmax saturates at large d_in); scaled: U[0, 1) / sqrt(d_in)",
    )
    parser.add_argument("--shapes", nargs="+", metavar="N,D_IN,D_OUT", help="shapes to run instead of the grid")
    args = parser.parse_args()
    shapes = QUICK if args.quick else GRID
    if args.shapes:
        shapes = [tuple(int(v) for v in spec.split(",")) for spec in args.shapes]  # type: ignore[misc]
    dtype_arg = args.dtype or ("float32" if args.quick else "both")
    dtypes = [np.float32, np.float64] if dtype_arg == "both" else [np.dtype(dtype_arg).type]
    repeats = args.repeats or (3 if args.quick else 7)
    torch, env = start(args)
    print("# medians of interleaved repetitions; each sample >= 20 ms of calls; the machine is shared")
    print(f"# weights: {args.weights}")
    print(table([], COLUMNS))
    rows = run(shapes, dtypes, repeats, 0.02, torch, args.weights)
    write_json(args.json, env, rows)


if __name__ == "__main__":
    main()
