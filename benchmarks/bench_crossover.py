"""Where impl="auto" switches: stages 2-5 forward + backward for each path, small n to large.

``npattn.kernels.attention`` on (n, d) queries, keys, values (float32), interleaved, medians:
the reference path wins while Python overhead dominates; the fused path once arithmetic and
memory traffic do. The fastest path per n is printed next to what "auto" picks.

    python benchmarks/bench_crossover.py
"""

from __future__ import annotations

from _common import interleaved, np, start, table
from _common import parser as common_parser

from npattn import kernels

SIZES = (8, 16, 32, 64, 96, 128, 192, 256, 512, 1024)


def case(impl: str, q: np.ndarray, k: np.ndarray, v: np.ndarray, G: np.ndarray):
    def run() -> None:
        _, cache = kernels.attention(q, k, v, impl=impl)
        kernels.attention_backward(G, cache)

    return run


def main() -> None:
    parser = common_parser(__doc__)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    args.no_torch = True
    start(args)
    rows = []
    for n in SIZES:
        rng = np.random.default_rng(0)
        q, k, v, G = (rng.standard_normal((n, args.d), dtype=np.float32) for _ in range(4))

        cases = {impl: case(impl, q, k, v, G) for impl in ("reference", "fused", "tiled")}
        med = interleaved(cases, args.repeats, 0.02)
        row = {"n": n, **{f"{impl} us": 1e6 * t for impl, t in med.items()}}
        row["fastest"] = min(med, key=med.__getitem__)
        row["auto"] = kernels.choose_impl("auto", q, k, v)
        rows.append(row)
    print(f"# stages 2-5 forward + backward, d = {args.d}, float32; medians of interleaved samples")
    print(
        table(
            rows,
            [
                ("n", "n", "d"),
                ("reference us", "reference us", ".1f"),
                ("fused us", "fused us", ".1f"),
                ("tiled us", "tiled us", ".1f"),
                ("fastest", "fastest", "s"),
                ("auto", "auto picks", "s"),
            ],
        )
    )


if __name__ == "__main__":
    main()
