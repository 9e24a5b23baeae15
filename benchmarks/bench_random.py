"""Drawing PyTorch's random streams without torch: TorchGenerator versus torch's CPU generator.

randn (normal_) in float32 and float64 at GPT-2's token-embedding size (50257 x 768, 38.6M
values) and at the whole 124M model's 163,009,536 initial values (float32; --quick skips it),
plus rand and bernoulli_ at 10M. Each case draws from a freshly seeded generator; npattn and
torch (one intra-op thread, as torch's generator is sequential) alternate, medians of 3.

    python benchmarks/bench_random.py [--quick] [--json out.json]
"""

from __future__ import annotations

from typing import Any

from _common import interleaved, np, ratio, start, table, write_json
from _common import parser as common_parser

import npattn

CASES = [  # (name, npattn draw, torch draw as (function name, args, kwargs))
    ("rand 10M float32", lambda g: g.rand(10_000_000), ("rand", (10_000_000,), {})),
    ("bernoulli_(0.5) 10M", lambda g: g.bernoulli((10_000_000,), 0.5), ("bernoulli", (10_000_000,), {})),
    ("randn 50257x768 float32", lambda g: g.randn(50257, 768), ("randn", (50257, 768), {})),
    ("randn 50257x768 float64", lambda g: g.randn(50257, 768, dtype=np.float64), ("randn64", (50257, 768), {})),
    ("randn 163,009,536 float32", lambda g: g.randn(163_009_536), ("randn", (163_009_536,), {})),
]


def torch_draw(torch: Any, kind: str, args: tuple) -> Any:
    torch.manual_seed(123)
    if kind == "rand":
        return torch.rand(*args)
    if kind == "bernoulli":
        return torch.empty(*args).bernoulli_(0.5)
    if kind == "randn64":
        return torch.randn(*args, dtype=torch.float64)
    return torch.randn(*args)


def main() -> None:
    p = common_parser(__doc__)
    p.add_argument("--quick", action="store_true", help="skip the 163M-value case")
    args = p.parse_args()
    torch, env = start(args)
    if torch is not None:
        torch.set_num_threads(1)
    rows = []
    for name, ours, (kind, shape, _) in CASES:
        if args.quick and "163" in name:
            continue
        cases = {"npattn": lambda ours=ours: ours(npattn.TorchGenerator(123))}
        if torch is not None:
            cases["torch"] = lambda kind=kind, shape=shape: torch_draw(torch, kind, shape)
        medians = interleaved(cases, repeats=3, target=0.0)
        rows.append({"case": name, "npattn_s": medians["npattn"], "torch_s": medians.get("torch"),
                     "ratio": ratio(medians["npattn"], medians.get("torch"))})  # fmt: skip
    print(table(rows, [("case", "draw", "s"), ("npattn_s", "npattn (s)", ".2f"), ("torch_s", "torch (s)", ".2f"),
                       ("ratio", "npattn / torch", ".1f")]))  # fmt: skip
    write_json(args.json, env, rows)


if __name__ == "__main__":
    main()
