"""One training step at the book's size: forward, backward and an SGD step, npattn versus PyTorch
and versus the same math as bare NumPy expressions.

SelfAttention_v1(3, 2) on the book's six tokens (6 x 3 -> 6 x 2), and on the book's batch
(2 x 6 x 3). Loss: mean squared error against a fixed target; SGD with lr = 0.1.
npattn: model(x), the loss gradient 2 (z - t) / z.size by hand, model.backward(G), then
p.data -= lr * p.grad and zero_grad() for every parameter. PyTorch: the same model as three
nn.Parameter matrices, F.mse_loss, loss.backward(), torch.optim.SGD.step() and zero_grad().
"bare NumPy": the same forward, loss gradient, backward and SGD update written as plain NumPy
expressions on three arrays, with no checks, modules or caches: the floor for any NumPy code.
At this size Python overhead, not arithmetic, is the cost. PyTorch runs with as many intra-op
threads as npattn uses cores ("torch") and, interleaved with it, with one thread ("torch 1T"),
which is faster at this size on a busy machine.

    python benchmarks/bench_train_step.py
    python benchmarks/bench_train_step.py --json out.json
"""

from __future__ import annotations

from typing import Any

from _common import interleaved, np, ratio, start, table, write_json
from _common import parser as common_parser

import npattn

LR = 0.1


def npattn_step(x: np.ndarray, target: np.ndarray, impl: str) -> Any:
    model = npattn.SelfAttention_v1(3, 2, rng=123, impl=impl)
    params = list(model.parameters())

    def step() -> None:
        z = model(x)
        grad = (z - target) * np.float32(2.0 / z.size)
        model.backward(grad)
        for p in params:
            p.data -= LR * p.grad
        model.zero_grad()

    return step


def bare_step(x: np.ndarray, target: np.ndarray) -> Any:
    """The same step as bare NumPy expressions (no checks, no modules, no caches)."""
    W = [p.data.copy() for p in npattn.SelfAttention_v1(3, 2, rng=123).parameters()]
    scale, grad_scale, lr = np.float32(1.0 / np.sqrt(2)), np.float32(2.0 / target.size), np.float32(LR)
    x_rows = x.reshape(-1, 3)

    def step() -> None:
        q, k, v = x @ W[0], x @ W[1], x @ W[2]
        s = (q @ np.swapaxes(k, -1, -2)) * scale
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        a = e / e.sum(axis=-1, keepdims=True)
        z = a @ v
        g = (z - target) * grad_scale
        d_a = g @ np.swapaxes(v, -1, -2)
        d_v = np.swapaxes(a, -1, -2) @ g
        d_s = a * (d_a - (d_a * a).sum(axis=-1, keepdims=True)) * scale
        d_q, d_k = d_s @ k, np.swapaxes(d_s, -1, -2) @ q
        for Wi, d in zip(W, (d_q, d_k, d_v)):
            Wi -= lr * (x_rows.T @ d.reshape(-1, 2))

    return step


def torch_step(torch: Any, x: np.ndarray, target: np.ndarray) -> Any:
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    W = [torch.nn.Parameter(torch.from_numpy(p.data.copy())) for p in model.parameters()]
    tx, tt = torch.from_numpy(x), torch.from_numpy(target)
    opt = torch.optim.SGD(W, lr=LR)
    scale = 1.0 / np.sqrt(2)

    def step() -> None:
        q, k, v = tx @ W[0], tx @ W[1], tx @ W[2]
        z = torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v
        loss = torch.nn.functional.mse_loss(z, tt)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def one_thread(torch: Any, step: Any) -> Any:
    """``step`` with PyTorch's intra-op threads set to 1 for its duration (its best at this size)."""
    threads = torch.get_num_threads()

    def run() -> None:
        torch.set_num_threads(1)
        try:
            step()
        finally:
            torch.set_num_threads(threads)

    return run


def main() -> None:
    parser = common_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch, env = start(args)
    print("# microseconds per step, medians of interleaved samples of >= 50 ms each; the machine is shared")
    rows = []
    for name, x in (("(6, 3) -> (6, 2)", npattn.book_inputs()), ("(2, 6, 3) -> (2, 6, 2)", npattn.book_batch())):
        x = np.asarray(x, dtype=np.float32)
        target = np.random.default_rng(0).random((*x.shape[:-1], 2), dtype=np.float32)
        cases = {impl: npattn_step(x, target, impl) for impl in ("auto", "fused", "tiled")}
        cases["bare"] = bare_step(x, target)
        if torch is not None:
            cases["torch"] = torch_step(torch, x, target)
            cases["torch 1T"] = one_thread(torch, torch_step(torch, x, target))
        us = {k: 1e6 * t for k, t in interleaved(cases, args.repeats, 0.05).items()}
        row = {"shape": name, **{f"{k} us": v for k, v in us.items()}}
        row["npattn/bare"] = ratio(us["auto"], us["bare"])
        row["torch/npattn"] = ratio(us.get("torch"), us["auto"])
        row["torch 1T/npattn"] = ratio(us.get("torch 1T"), us["auto"])
        rows.append(row)
    print(table(rows, COLUMNS))
    write_json(args.json, env, rows)


COLUMNS = [
    ("shape", "x -> context_vec", "s"),
    ("auto us", "npattn (auto = reference) us", ".1f"),
    ("fused us", "npattn fused us", ".1f"),
    ("tiled us", "npattn tiled us", ".1f"),
    ("bare us", "bare NumPy us", ".1f"),
    ("npattn/bare", "npattn / bare", ".2f"),
    ("torch us", "torch us", ".1f"),
    ("torch 1T us", "torch 1 thread us", ".1f"),
    ("torch/npattn", "torch / npattn", ".2f"),
    ("torch 1T/npattn", "torch 1T / npattn", ".2f"),
]


if __name__ == "__main__":
    main()
