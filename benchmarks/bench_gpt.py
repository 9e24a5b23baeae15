"""One training step of a small GPT: forward, backward and an AdamW step, npattn versus PyTorch eager.

The book's GPTModel with 4 layers, emb_dim 128, 4 heads, context 128, a batch of 8 sequences of
128 tokens (1024 tokens per step), float32, for a small vocabulary (512, a character or small BPE
tokenizer) and GPT-2's (50257, where the output head and the loss over the vocabulary dominate).
Both sides start from the same weights (npattn's state dict loaded into the book's PyTorch class,
tests/fixtures/make_gpt_fixtures.py), the same token ids and targets, the book's chapter-5 loss
(cross-entropy over the flattened logits) and AdamW(lr=0.0004, weight_decay=0.1). npattn:
model(idx), F.token_cross_entropy_forward/backward, model.backward(dlogits), opt.step(),
opt.zero_grad(). PyTorch: the same in eager mode with autograd, as many intra-op threads as NumPy's
BLAS uses. ``--drop-rate`` sets the config's drop_rate (default 0.0; the book trains with 0.1).

Time: medians of interleaved samples (npattn, torch, npattn, ...). Memory: each side runs alone in
a child process; "step MiB" is the peak resident set size over three steps minus the resident size
after building the model and optimizer (activations, gradients' temporaries, the optimizer state).

    python benchmarks/bench_gpt.py
    python benchmarks/bench_gpt.py --vocab 512 --repeats 9 --json out.json
    python benchmarks/bench_gpt.py --impl fused     # attention's fused path (auto picks the reference
                                                    # path at context 128)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from typing import Any

from _common import ROOT, import_torch, interleaved, np, ratio, start, table, write_json
from _common import parser as common_parser

import npattn
from npattn.nn import functional as F

LR, WEIGHT_DECAY = 0.0004, 0.1
BATCH = 8


def config(vocab: int, drop_rate: float) -> dict[str, Any]:
    return {
        "vocab_size": vocab,
        "context_length": 128,
        "emb_dim": 128,
        "n_heads": 4,
        "n_layers": 4,
        "drop_rate": drop_rate,
        "qkv_bias": False,
    }


def book_classes() -> Any:
    """The book's PyTorch GPTModel (tests/fixtures/make_gpt_fixtures.py)."""
    path = ROOT / "tests" / "fixtures" / "make_gpt_fixtures.py"
    spec = importlib.util.spec_from_file_location("make_gpt_fixtures", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def data(cfg: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    idx = rng.integers(0, cfg["vocab_size"], (BATCH, cfg["context_length"]))
    return idx, rng.integers(0, cfg["vocab_size"], idx.shape)


def npattn_step(cfg: dict[str, Any], impl: str = "auto") -> tuple[Any, npattn.GPTModel]:
    model = npattn.GPTModel(cfg, rng=123, impl=impl)
    model.train()
    opt = npattn.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    idx, targets = data(cfg)

    def step() -> float:
        logits = model(idx)
        loss, cache = F.token_cross_entropy_forward(logits, targets)
        (dlogits,) = F.token_cross_entropy_backward(np.float32(1.0), cache)
        model.backward(dlogits)
        opt.step()
        opt.zero_grad()
        return float(loss)

    return step, model


def torch_step(torch: Any, cfg: dict[str, Any], state: dict[str, np.ndarray]) -> Any:
    book = book_classes()
    model = book.GPTModel(cfg)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    idx, targets = (torch.from_numpy(a) for a in data(cfg))

    def step() -> float:
        logits = model(idx)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss.detach())

    return step


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Build one side, then run three steps; report the memory they added."""
    cfg = spec["cfg"]
    if spec["side"] == "torch":
        torch = import_torch()
        step = torch_step(torch, cfg, npattn.GPTModel(cfg, rng=123).state_dict())
    else:
        step, _ = npattn_step(cfg, spec["impl"])
    baseline = _status_mib("VmRSS")
    for _ in range(3):
        step()
    return {"step_mib": _status_mib("VmHWM") - baseline}


def spawn(spec: dict[str, Any]) -> float | None:
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"# {spec['side']}: child failed: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
        return None
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["step_mib"])


def main() -> None:
    parser = common_parser(__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--vocab", type=int, nargs="+", default=[512, 50257])
    parser.add_argument("--drop-rate", type=float, default=0.0)
    parser.add_argument("--impl", default="auto", help="how attention's stages 2-5 run (npattn.kernels)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-memory", action="store_true", help="skip the child processes that measure memory")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    torch, env = start(args)
    print(
        f"# 4 layers, emb 128, 4 heads, context 128, batch {BATCH}, float32, drop_rate {args.drop_rate}; "
        f"AdamW; npattn attention impl={args.impl!r}"
    )
    print("# ms per step: medians of interleaved samples of >= 0.5 s each; the machine is shared")
    rows = []
    for vocab in args.vocab:
        cfg = config(vocab, args.drop_rate)
        ours, model = npattn_step(cfg, args.impl)
        cases = {"npattn": ours}
        if torch is not None:
            cases["torch"] = torch_step(torch, cfg, model.state_dict())
        seconds = interleaved(cases, args.repeats, 0.5)
        tokens = BATCH * cfg["context_length"]
        row: dict[str, Any] = {"vocab": vocab, "params": sum(p.size for p in model.parameters())}
        for side, t in seconds.items():
            row[f"{side} ms"] = 1e3 * t
            row[f"{side} tok/s"] = tokens / t
            if not args.no_memory:
                row[f"{side} MiB"] = spawn({"side": side, "cfg": cfg, "impl": args.impl})
        row["npattn/torch"] = ratio(seconds["npattn"], seconds.get("torch"))
        rows.append(row)
        print(table([row], COLUMNS).splitlines()[-1] if len(rows) > 1 else table([row], COLUMNS), flush=True)
    write_json(args.json, env, rows)


COLUMNS = [
    ("vocab", "vocab", "d"),
    ("params", "parameters", ",d"),
    ("npattn ms", "npattn ms/step", ".1f"),
    ("torch ms", "torch ms/step", ".1f"),
    ("npattn/torch", "npattn / torch time", ".2f"),
    ("npattn tok/s", "npattn tokens/s", ",.0f"),
    ("torch tok/s", "torch tokens/s", ",.0f"),
    ("npattn MiB", "npattn step MiB", ".0f"),
    ("torch MiB", "torch step MiB", ".0f"),
]


if __name__ == "__main__":
    main()
