"""MultiHeadAttention (causal) forward and forward + backward: npattn against PyTorch's fused
scaled_dot_product_attention, the book's PyTorch module and the GEMM floor, in one run.

For each shape (batch, n, d_in = d_out, num_heads) and dtype it times, interleaved:

- npattn auto / fused / tiled / reference: ``npattn.MultiHeadAttention(d, d, context_length=n,
  dropout=0.0, num_heads=h, impl=...)``, forward, then backward from a fixed upstream gradient
  (the reference path is left out when one (b, h, n, n) buffer would pass --reference-mib);
- torch manual: the book's ``MultiHeadAttention`` (listing 3.5) in PyTorch, autograd: three
  ``nn.Linear`` projections, ``q @ k^T``, ``masked_fill_`` with the causal mask, softmax,
  ``@ v``, the head merge and ``out_proj``;
- torch SDPA: the same module with stages 2-5 replaced by
  ``torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)``;
- floor: every matrix product of the module alone, in NumPy, as 2-D GEMMs (forward: the
  (d_in, 3 d_out) projection, per head q k^T and P v over the causal blocks the tiled path
  computes at its block sizes, out_proj; backward: out_proj's two, five per block, the
  projection's two), heads split over the cores as the tiled path does: what any NumPy code
  doing these products needs at least;
- torch floor: the same products with torch.matmul at torch's thread count (the same as
  NumPy's BLAS): when it is below the floor, PyTorch's BLAS is faster than NumPy's on the same
  products, which no NumPy code can make up for.

All models share one set of weights (npattn's ``rng=0`` init, copied into PyTorch) and one input.
The PyTorch forward runs with autograd on (the forward of a training step, like npattn's, which
keeps what backward needs); ``--torch-no-grad`` times it under ``torch.no_grad()`` instead.
Ratios: each npattn column over torch SDPA and over both floors. Medians of interleaved repetitions.

    python benchmarks/bench_mha.py                        # (8, 1024, 768, 12) and (2, 4096, 768, 12), float32
    python benchmarks/bench_mha.py --shapes 2,256,64,4 --dtype both   # any shape: BATCH,N,D,HEADS
    python benchmarks/bench_mha.py --json mha.json        # also write every number
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _common import interleaved, np, ratio, start, table, write_json
from _common import parser as common_parser

import npattn
from npattn import kernels
from npattn.kernels import tiled
from npattn.kernels.blocks import run_slabs

SHAPES = [(8, 1024, 768, 12), (2, 4096, 768, 12)]
NPATTN_IMPLS = ("auto", "fused", "tiled", "reference")

Case = tuple[Callable[[], Any], Callable[[], Any]]  # (forward, forward + backward)


def npattn_case(model: npattn.MultiHeadAttention, x: np.ndarray, G: np.ndarray) -> Case:
    def forward() -> None:
        model(x)

    def forward_backward() -> None:
        model(x)
        model.backward(G)

    return forward, forward_backward


def torch_module(torch: Any, model: npattn.MultiHeadAttention, sdpa: bool) -> Any:
    """The book's MultiHeadAttention in PyTorch (or with SDPA), holding ``model``'s weights."""
    nn = torch.nn

    class MultiHeadAttention(nn.Module):  # the book's listing 3.5, dropout 0
        def __init__(self, d_in: int, d_out: int, context_length: int, num_heads: int) -> None:
            super().__init__()
            self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
            self.W_query = nn.Linear(d_in, d_out, bias=False)
            self.W_key = nn.Linear(d_in, d_out, bias=False)
            self.W_value = nn.Linear(d_in, d_out, bias=False)
            self.out_proj = nn.Linear(d_out, d_out)
            self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

        def forward(self, x: Any) -> Any:
            b, num_tokens, _ = x.shape
            split = (b, num_tokens, self.num_heads, self.head_dim)
            keys = self.W_key(x).view(split).transpose(1, 2)
            queries = self.W_query(x).view(split).transpose(1, 2)
            values = self.W_value(x).view(split).transpose(1, 2)
            if sdpa:
                context_vec = nn.functional.scaled_dot_product_attention(queries, keys, values, is_causal=True)
            else:
                attn_scores = queries @ keys.transpose(2, 3)
                attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
                attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
                context_vec = attn_weights @ values
            context_vec = context_vec.transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
            return self.out_proj(context_vec)

    dtype = {np.float32: torch.float32, np.float64: torch.float64}[model.out_proj.weight.dtype.type]
    module = MultiHeadAttention(model.d_in, model.d_out, model.context_length, model.num_heads).to(dtype)
    state = model.state_dict()
    state["mask"] = state["mask"].astype(state["out_proj.weight"].dtype)  # the book's float 0/1 mask
    module.load_state_dict({key: torch.from_numpy(value) for key, value in state.items()})
    return module


def torch_case(torch: Any, module: Any, x: np.ndarray, G: np.ndarray, no_grad: bool) -> Case:
    tx, tG = torch.from_numpy(x), torch.from_numpy(G)

    def forward() -> None:
        if no_grad:
            with torch.no_grad():
                module(tx)
        else:
            module(tx)

    def forward_backward() -> None:
        module(tx).backward(tG)

    return forward, forward_backward


def causal_blocks(n: int, block_q: int, block_k: int) -> list[tuple[int, int, int, int]]:
    """(r, e, k0, k1) for every block of scores the tiled path computes under the causal mask: query
    rows r:e against keys k0:k1 (keys after a block's last query, and rows before a key block's
    first key, are skipped, as in ``npattn.kernels.tiled``)."""
    out = []
    for a in range(0, n, block_q):
        e = min(a + block_q, n)
        for k0 in range(0, e, block_k):
            out.append((max(a, k0), e, k0, min(k0 + block_k, e)))
    return out


def floor_operands(model: npattn.MultiHeadAttention, x: np.ndarray, G: np.ndarray) -> dict[str, np.ndarray]:
    """The operands of every product of the module, laid out for 2-D GEMMs: x and G as (b n, d)
    rows, the three projection weights side by side, and contiguous (b h, n, head_dim) heads."""
    b, n, d = x.shape
    h, hd, d_out = model.num_heads, model.head_dim, model.d_out
    layers = (model.W_query, model.W_key, model.W_value)
    rng = np.random.default_rng(1)

    def draw(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(x.dtype)

    return {
        "x": x.reshape(b * n, d),
        "G": G.reshape(b * n, d_out),
        "W_qkv": np.concatenate([layer.weight.data.T for layer in layers], axis=1),  # (d_in, 3 d_out)
        "W_out": model.out_proj.weight.data,  # (d_out, d_out)
        "merged": draw(b * n, d_out),
        "d_qkv": draw(b * n, 3 * d_out),
        **{name: draw(b * h, n, hd) for name in ("q", "k", "v", "g")},
    }


def floor_case(model: npattn.MultiHeadAttention, x: np.ndarray, G: np.ndarray) -> Case:
    """Every matrix product of the module alone, in NumPy, the fastest way found: 2-D GEMMs.

    Forward: x @ W_qkv (one (d_in, 3 d_out) GEMM), per head and causal block q k^T and P v,
    merged @ out_proj^T. Backward: out_proj's dW and dx, per block P = q k^T (recomputed),
    P^T G, G v^T, dS k, dS^T q, then the projections' dx and dW. The blocks are the tiled path's
    (``causal_blocks`` at its default block sizes); the heads are split over the cores with
    one BLAS thread each (``blocks.run_slabs``), which beat one loop with two BLAS threads and
    NumPy's batched matmul on this machine; the large GEMMs use every BLAS thread.
    """
    o = floor_operands(model, x, G)
    q, k, v, g = o["q"], o["k"], o["v"], o["g"]
    tiles = causal_blocks(x.shape[1], tiled.DEFAULT_BLOCK_Q, tiled.DEFAULT_BLOCK_K)
    slabs = [(i,) for i in range(q.shape[0])]

    def attention_forward(s: tuple, rows: Any) -> None:
        for r, e, k0, k1 in tiles:
            (q[s][r:e] @ k[s][k0:k1].T) @ v[s][k0:k1]  # scores, then weights @ values

    def attention_backward(s: tuple, rows: Any) -> None:
        for r, e, k0, k1 in tiles:
            P = q[s][r:e] @ k[s][k0:k1].T  # weights, recomputed
            P.T @ g[s][r:e]  # d_values
            dS = g[s][r:e] @ v[s][k0:k1].T  # d_attn_weights
            dS @ k[s][k0:k1], dS.T @ q[s][r:e]  # d_queries, d_keys

    def forward() -> None:
        o["x"] @ o["W_qkv"]  # queries, keys, values
        run_slabs(attention_forward, slabs, q.shape[1] ** 2)
        o["merged"] @ o["W_out"].T  # out_proj

    def forward_backward() -> None:
        forward()
        o["G"].T @ o["merged"], o["G"] @ o["W_out"]  # out_proj: d_weight, d_merged
        run_slabs(attention_backward, slabs, q.shape[1] ** 2)
        o["d_qkv"] @ o["W_qkv"].T, o["x"].T @ o["d_qkv"]  # projections: dx, d_W

    return forward, forward_backward


def torch_floor_case(torch: Any, model: npattn.MultiHeadAttention, x: np.ndarray, G: np.ndarray) -> Case:
    """The same products as ``floor_case`` with torch.matmul (PyTorch's BLAS, its intra-op
    threads), each block's products batched over all heads: one call per block and product."""
    o = {name: torch.from_numpy(a) for name, a in floor_operands(model, x, G).items()}
    q, k, v, g = o["q"], o["k"], o["v"], o["g"]
    tiles = causal_blocks(x.shape[1], tiled.DEFAULT_BLOCK_Q, tiled.DEFAULT_BLOCK_K)
    mm = torch.matmul

    def forward() -> None:
        with torch.no_grad():
            mm(o["x"], o["W_qkv"])
            for r, e, k0, k1 in tiles:
                mm(mm(q[:, r:e], k[:, k0:k1].mT), v[:, k0:k1])
            mm(o["merged"], o["W_out"].T)

    def forward_backward() -> None:
        forward()
        with torch.no_grad():
            mm(o["G"].T, o["merged"]), mm(o["G"], o["W_out"])
            for r, e, k0, k1 in tiles:
                P = mm(q[:, r:e], k[:, k0:k1].mT)
                mm(P.mT, g[:, r:e])
                dS = mm(g[:, r:e], v[:, k0:k1].mT)
                mm(dS, k[:, k0:k1]), mm(dS.mT, q[:, r:e])
            mm(o["d_qkv"], o["W_qkv"].T), mm(o["x"].T, o["d_qkv"])

    return forward, forward_backward


def run_shape(
    shape: tuple[int, int, int, int], dtype: Any, args: Any, torch: Any
) -> list[dict[str, Any]]:
    b, n, d, h = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, n, d)).astype(dtype)
    G = rng.standard_normal((b, n, d)).astype(dtype)
    slab_mib = b * h * n * n * np.dtype(dtype).itemsize / 2**20
    impls = [i for i in args.impls if i != "reference" or slab_mib <= args.reference_mib]
    cases: dict[str, Case] = {}
    model = None
    for impl in impls:
        model = npattn.MultiHeadAttention(d, d, n, 0.0, h, rng=0, dtype=dtype, impl=impl)
        cases[impl] = npattn_case(model, x, G)
    assert model is not None
    if torch is not None:
        cases["torch manual"] = torch_case(torch, torch_module(torch, model, sdpa=False), x, G, args.torch_no_grad)
        cases["torch SDPA"] = torch_case(torch, torch_module(torch, model, sdpa=True), x, G, args.torch_no_grad)
    cases["floor"] = floor_case(model, x, G)
    if torch is not None:
        cases["torch floor"] = torch_floor_case(torch, model, x, G)
    head = np.empty((b, h, n, d // h), dtype=dtype)
    auto = kernels.choose_impl("auto", head, head, head)
    rows = []
    for phase, index in (("fwd", 0), ("fwd+bwd", 1)):
        if phase not in args.phases:
            continue
        med = interleaved({name: fns[index] for name, fns in cases.items()}, args.repeats, args.target, args.pause)
        ms = {name: 1e3 * t for name, t in med.items()}
        row: dict[str, Any] = {
            "shape": f"({b}, {n}, {d}, {h})",
            "dtype": np.dtype(dtype).name,
            "phase": phase,
            "auto": auto,
            **{f"{name} ms": t for name, t in ms.items()},
        }
        for impl in impls:
            row[f"{impl}/sdpa"] = ratio(ms[impl], ms.get("torch SDPA"))
            row[f"{impl}/floor"] = ratio(ms[impl], ms["floor"])
            row[f"{impl}/tfloor"] = ratio(ms[impl], ms.get("torch floor"))
        row["tfloor/floor"] = ratio(ms.get("torch floor"), ms["floor"])
        row["manual/sdpa"] = ratio(ms.get("torch manual"), ms.get("torch SDPA"))
        row["sdpa/floor"] = ratio(ms.get("torch SDPA"), ms["floor"])
        rows.append(row)
        print(table(rows[-1:], columns(args.impls)).splitlines()[-1], flush=True)
    return rows


def columns(impls: list[str]) -> list[tuple[str, str, str]]:
    cols = [("shape", "(b, n, d, heads)", "s"), ("dtype", "dtype", "s"), ("phase", "phase", "s")]
    cols += [(f"{impl} ms", f"npattn {impl} ms", ".1f") for impl in impls]
    cols += [("torch manual ms", "torch manual ms", ".1f"), ("torch SDPA ms", "torch SDPA ms", ".1f")]
    cols += [("floor ms", "floor ms", ".1f"), ("torch floor ms", "torch floor ms", ".1f")]
    cols += [(f"{impl}/sdpa", f"{impl} / SDPA", ".2f") for impl in impls]
    cols += [(f"{impl}/floor", f"{impl} / floor", ".2f") for impl in impls]
    cols += [(f"{impl}/tfloor", f"{impl} / torch floor", ".2f") for impl in impls]
    cols += [("tfloor/floor", "torch floor / floor", ".2f")]
    cols += [("manual/sdpa", "manual / SDPA", ".2f"), ("sdpa/floor", "SDPA / floor", ".2f")]
    cols += [("auto", "auto picks", "s")]
    return cols


def main() -> None:
    parser = common_parser(__doc__)
    parser.add_argument("--shapes", nargs="+", metavar="B,N,D,H", help="shapes (batch, n, d_in = d_out, heads)")
    parser.add_argument("--dtype", choices=["float32", "float64", "both"], default="float32")
    parser.add_argument("--impls", nargs="+", choices=NPATTN_IMPLS, default=list(NPATTN_IMPLS))
    parser.add_argument("--phases", nargs="+", choices=["fwd", "fwd+bwd"], default=["fwd", "fwd+bwd"])
    parser.add_argument("--repeats", type=int, default=7, help="interleaved repetitions (default 7)")
    parser.add_argument("--target", type=float, default=0.02, help="seconds of calls per sample (default 0.02)")
    parser.add_argument(
        "--reference-mib",
        type=float,
        default=128.0,
        help="time the reference path only when one (b, h, n, n) buffer is at most this many MiB (default 128)",
    )
    parser.add_argument("--pause", type=float, default=0.2, help="untimed sleep before each sample, s (default 0.2)")
    parser.add_argument("--torch-no-grad", action="store_true", help="time PyTorch's forward under torch.no_grad()")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes] if args.shapes else SHAPES
    dtypes = [np.float32, np.float64] if args.dtype == "both" else [np.dtype(args.dtype).type]
    torch, env = start(args)
    print(f"# medians of {args.repeats} interleaved repetitions; each sample >= {args.target * 1e3:.0f} ms of calls")
    print(f"# causal; PyTorch forward {'under no_grad' if args.torch_no_grad else 'with autograd on'}")
    print(table([], columns(args.impls)))
    rows = []
    for shape in shapes:
        if len(shape) != 4 or shape[2] % shape[3]:
            parser.error(f"shape {shape}: expected BATCH,N,D,HEADS with HEADS dividing D")
        for dtype in dtypes:
            rows += run_shape(shape, dtype, args, torch)  # type: ignore[arg-type]
    write_json(args.json, env, rows)


if __name__ == "__main__":
    main()
