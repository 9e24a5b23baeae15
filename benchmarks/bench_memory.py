"""Peak resident memory and time of attention forward + backward versus sequence length.

Stages 2-5 on projected queries, keys, values of shape (n, d) (d = 64, float32), forward then
backward from a random upstream gradient, each case in its own child process (so that its peak
resident set size, Linux's VmHWM, belongs to that case alone). Paths: npattn's fused and tiled
(causal and not), and PyTorch eager attention (q @ k.T, softmax, @ v, autograd) when installed.
The fused path and PyTorch keep n x n matrices, so they run only up to --max-quadratic (default
16384: one float32 n x n matrix is 1 GiB there, 4 GiB at 32768); the tiled path runs to the end.

    python benchmarks/bench_memory.py                # n = 1024 ... 65536 (a few minutes)
    python benchmarks/bench_memory.py --quick        # n = 1024 ... 4096
    python benchmarks/bench_memory.py --json out.json

Columns: peak RSS of the child (MiB), baseline RSS before the computation (interpreter, libraries,
inputs), their difference (what the computation itself added), and the median time of one
forward + backward after one warm-up call (interleaved repetitions; from n = 32768 on, one cold
call and one repetition: a call takes many seconds there).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from _common import import_torch, np, ratio, start, table, write_json
from _common import parser as common_parser

from npattn import kernels


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one case in this process and report its time and memory."""
    n, d, impl, causal = spec["n"], spec["d"], spec["impl"], spec["causal"]
    torch = import_torch(impl == "torch")
    rng = np.random.default_rng(0)
    q, k, v, G = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(4))
    baseline = _status_kib("VmRSS")
    if impl == "torch":
        tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
        tG = torch.from_numpy(G)
        mask = torch.ones(n, n, dtype=torch.bool).triu(1) if causal else None
        scale = 1.0 / np.sqrt(d)

        def run() -> None:
            scores = (tq @ tk.T) * scale
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            (torch.softmax(scores, dim=-1) @ tv).backward(tG)

    else:

        def run() -> None:
            _, cache = kernels.attention(q, k, v, causal=causal, impl=impl)
            kernels.attention_backward(G, cache)

    if n <= 16384:
        run()  # warm-up: thread pools, BLAS buffers, first-touch page faults
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_mib": _status_kib("VmHWM") / 1024, "baseline_mib": baseline / 1024}


def spawn(spec: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        print(f"# {spec}: child failed: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = common_parser(__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="n = 1024, 2048, 4096 only")
    parser.add_argument("--max-n", type=int, default=65536)
    parser.add_argument("--max-quadratic", type=int, default=16384, help="largest n for fused and torch")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions per case up to n = 16384")
    parser.add_argument("--d", type=int, default=64)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    torch, env = start(args)
    max_n = 4096 if args.quick else args.max_n
    sizes = [n for n in (1024, 2048, 4096, 8192, 16384, 32768, 65536) if n <= max_n]
    impls = [("fused", False), ("fused", True), ("tiled", False), ("tiled", True)]
    if torch is not None:
        impls += [("torch", False), ("torch", True)]
    print(f"# d = {args.d}, float32; one child process per sample; medians; the machine is shared")
    print(table([], COLUMNS))
    rows = []
    for n in sizes:
        specs = [
            {"n": n, "d": args.d, "impl": impl, "causal": causal}
            for impl, causal in impls
            if impl == "tiled" or n <= args.max_quadratic
        ]
        repeats = args.repeats if n <= 16384 else 1
        samples: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(specs))}
        for _ in range(repeats):  # interleaved: every case once, then again
            for i, spec in enumerate(specs):
                result = spawn(spec, timeout=1800)
                if result is not None:
                    samples[i].append(result)
        by_name = {}
        for i, spec in enumerate(specs):
            if not samples[i]:
                continue
            name = f"{spec['impl']}{' causal' if spec['causal'] else ''}"
            row = {
                "n": n,
                "path": name,
                "seconds": statistics.median(s["seconds"] for s in samples[i]),
                "peak_mib": max(s["peak_mib"] for s in samples[i]),
                "baseline_mib": statistics.median(s["baseline_mib"] for s in samples[i]),
                "samples": len(samples[i]),
            }
            row["added_mib"] = row["peak_mib"] - row["baseline_mib"]
            by_name[name] = row
        for name, row in by_name.items():
            plain = name.replace(" causal", "")
            row["vs fused"] = ratio(row["seconds"], by_name.get("fused" + name[len(plain) :], {}).get("seconds"))
            full = by_name.get(plain, {}).get("seconds") if "causal" in name else None
            row["causal/full"] = ratio(row["seconds"], full)
            rows.append(row)
            print(table([row], COLUMNS).splitlines()[-1], flush=True)
    write_json(args.json, env, rows)


COLUMNS = [
    ("n", "n", "d"),
    ("path", "path", "s"),
    ("peak_mib", "peak RSS MiB", ".0f"),
    ("baseline_mib", "baseline MiB", ".0f"),
    ("added_mib", "added MiB", ".0f"),
    ("seconds", "fwd+bwd s", ".3f"),
    ("vs fused", "time / fused", ".2f"),
    ("causal/full", "causal / full", ".2f"),
    ("samples", "samples", "d"),
]


if __name__ == "__main__":
    main()
