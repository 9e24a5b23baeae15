"""The book's chapter-4 classes: names, state_dict keys, shapes, errors, and the whole small GPT
gradient-checked in float64 (every parameter, dropout off and with fixed masks), with planted bugs
in the composition (a lost shortcut, a lost position gradient) that the check must reject."""

import numpy as np
import pytest

import npattn
from npattn.nn import gpt as gpt_module
from npattn.nn.gpt import GPT_CONFIG_124M, GPTModel, TransformerBlock, generate_text_simple
from npattn.nn.transformer import GELU, Embedding, FeedForward, LayerNorm

TINY = {
    "vocab_size": 7,
    "context_length": 5,
    "emb_dim": 4,
    "n_heads": 2,
    "n_layers": 1,
    "drop_rate": 0.0,
    "qkv_bias": True,
}
SMALL = {**TINY, "vocab_size": 11, "context_length": 6, "emb_dim": 6, "n_heads": 3, "n_layers": 2, "qkv_bias": False}


def book_keys(cfg):
    """The state_dict keys of the book's GPTModel(cfg), in PyTorch's order."""
    keys = ["tok_emb.weight", "pos_emb.weight"]
    for i in range(cfg["n_layers"]):
        block = f"trf_blocks.{i}."
        keys.append(block + "att.mask")
        for proj in ("W_query", "W_key", "W_value"):
            keys.append(f"{block}att.{proj}.weight")
            if cfg["qkv_bias"]:
                keys.append(f"{block}att.{proj}.bias")
        keys += [block + "att.out_proj.weight", block + "att.out_proj.bias"]
        keys += [block + f"ff.layers.{j}.{p}" for j in (0, 2) for p in ("weight", "bias")]
        keys += [block + f"{norm}.{p}" for norm in ("norm1", "norm2") for p in ("scale", "shift")]
    return [*keys, "final_norm.scale", "final_norm.shift", "out_head.weight"]


@pytest.mark.parametrize("cfg", [TINY, SMALL, GPT_CONFIG_124M], ids=["tiny", "small", "124M"])
def test_state_dict_keys_are_the_books(cfg):
    if cfg is GPT_CONFIG_124M:  # the keys only: a 2-layer model with the 124M widths' structure
        cfg = {**SMALL, "qkv_bias": False}
    model = GPTModel(cfg, rng=0)
    assert list(model.state_dict()) == book_keys(cfg)
    assert model.out_head.bias is None
    assert model.trf_blocks[0].att.mask.shape == (cfg["context_length"],) * 2


def test_parameter_count_formula_gives_the_books_163009536():
    """The count of GPTModel(GPT_CONFIG_124M), from a small model's per-tensor shapes scaled up
    (the model itself is built in tests/test_gpt_parity.py)."""
    cfg = GPT_CONFIG_124M
    V, C, d, L = cfg["vocab_size"], cfg["context_length"], cfg["emb_dim"], cfg["n_layers"]
    per_block = 3 * d * d + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) + 4 * d
    assert V * d + C * d + L * per_block + 2 * d + V * d == 163_009_536
    small = GPTModel(SMALL, rng=0)
    V, C, d, L = SMALL["vocab_size"], SMALL["context_length"], SMALL["emb_dim"], SMALL["n_layers"]
    per_block = 3 * d * d + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) + 4 * d
    assert sum(p.size for p in small.parameters()) == V * d + C * d + L * per_block + 2 * d + V * d


def test_forward_shapes_and_dtypes():
    model = GPTModel(SMALL, rng=1)
    idx = np.array([[1, 2, 3], [4, 5, 6]])
    logits = model(idx)
    assert logits.shape == (2, 3, 11) and logits.dtype == np.float32
    model64 = GPTModel(SMALL, rng=1, dtype=np.float64)
    np.testing.assert_allclose(model64(idx), logits, atol=1e-5)
    assert model.backward(np.ones_like(logits)) is None
    assert all(np.any(p.grad != 0) for name, p in model.named_parameters() if name != "pos_emb.weight")
    assert not model.pos_emb.weight.grad[3:].any()  # positions 3..5 unused by a 3-token input


def test_causal_logits_do_not_depend_on_later_tokens():
    model = GPTModel(SMALL, rng=2, dtype=np.float64).eval()
    a = model(np.array([[1, 2, 3, 4]]))
    b = model(np.array([[1, 2, 9, 0]]))
    np.testing.assert_array_equal(a[:, :2], b[:, :2])
    assert not np.allclose(a[:, 2:], b[:, 2:])


def test_same_seed_same_model_and_draw_order():
    a, b = GPTModel(SMALL, rng=5), GPTModel(SMALL, rng=5)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and np.array_equal(va, vb)
    # Embedding, then blocks (att before ff), then out_head, from one stream: the first block's
    # W_query equals a Linear drawn right after two Embeddings from the same generator.
    g = npattn.TorchGenerator(5)
    Embedding(SMALL["vocab_size"], 6, rng=g)
    Embedding(SMALL["context_length"], 6, rng=g)
    W_query = npattn.Linear(6, 6, bias=False, rng=g)
    np.testing.assert_array_equal(a.trf_blocks[0].att.W_query.weight.data, W_query.weight.data)


def test_layers_alone():
    ln = LayerNorm(4)
    assert list(ln.state_dict()) == ["scale", "shift"] and ln.eps == 1e-5
    out = ln(np.array([[1.0, 2.0, 3.0, 6.0]]))
    np.testing.assert_allclose(out, [[-2, -1, 0, 3]] / np.sqrt(3.5 + 1e-5), rtol=1e-6)
    ff = FeedForward({"emb_dim": 3}, rng=0)
    assert list(ff.state_dict()) == ["layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias"]
    assert ff(np.zeros((2, 5, 3))).shape == (2, 5, 3)
    gelu = GELU()
    assert list(gelu.state_dict()) == []
    np.testing.assert_allclose(gelu(np.array([-30.0, 0.0, 30.0])), [0, 0, 30], atol=1e-12)
    emb = Embedding(10, 3, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(emb([[1, 1]])[0, 0], emb.weight.data[1])


@pytest.mark.parametrize("module", ["block", "ff", "norm"])
def test_layer_gradchecks(module):
    block = TransformerBlock(TINY, rng=3, dtype=np.float64)
    target = {"block": block, "ff": block.ff, "norm": block.norm1}[module]
    for p in target.parameters():  # move scale/shift off ones and zeros
        p.data = p.data + 0.3 * np.random.default_rng(0).standard_normal(p.shape)
    x = np.random.default_rng(1).standard_normal((2, 4, 4))
    assert npattn.gradcheck(target, x)


def test_whole_gpt_gradcheck_eval():
    model = GPTModel(TINY, rng=4, dtype=np.float64)
    report = npattn.gradcheck(model, np.array([[1, 6, 1, 0], [2, 3, 5, 5]]), check_input=False)
    assert report and len(report.checks) == len(list(model.parameters()))


def test_whole_gpt_gradcheck_with_fixed_dropout_masks():
    cfg = {**SMALL, "drop_rate": 0.25}
    model = GPTModel(cfg, rng=6, dtype=np.float64)
    rng = np.random.default_rng(2)
    b, n, d, h = 2, 5, cfg["emb_dim"], cfg["n_heads"]
    model.drop_emb.fixed_keep = rng.random((b, n, d)) >= 0.25
    for block in model.trf_blocks:
        block.att.dropout.fixed_keep = rng.random((b, h, n, n)) >= 0.25
        block.drop_shortcut.fixed_keep = rng.random((b, n, d)) >= 0.25
    idx = rng.integers(0, cfg["vocab_size"], (b, n))
    assert npattn.gradcheck(model, idx, check_input=False, fast_mode=True, n_directions=3)


ADD_BACKWARD = gpt_module.F.add_backward


def _lost_shortcut(d_out, cache):
    d_x, d_y = ADD_BACKWARD(d_out, cache)
    return d_x, np.zeros_like(d_y)


def _position_gradient_not_summed(d_out, cache):
    d_x, d_y = ADD_BACKWARD(d_out, cache)
    return d_x, d_out[0] if d_y.shape != d_x.shape else d_y


@pytest.mark.parametrize("broken", [_lost_shortcut, _position_gradient_not_summed])
def test_whole_gpt_gradcheck_rejects_planted_bugs(monkeypatch, broken):
    monkeypatch.setattr(gpt_module.F, "add_backward", broken)
    model = GPTModel(TINY, rng=4, dtype=np.float64)
    report = npattn.gradcheck(model, np.array([[1, 6, 1, 0], [2, 3, 5, 5]]), check_input=False, raise_exception=False)
    assert not report.passed


def test_generate_text_simple_greedy_and_cropping():
    model = GPTModel(SMALL, rng=7).eval()
    out = generate_text_simple(model, [[1, 2]], max_new_tokens=6, context_size=3)
    assert out.shape == (1, 8) and out.dtype == np.int64
    np.testing.assert_array_equal(out[0, :2], [1, 2])
    for t in range(2, 8):  # each new token is the argmax given at most the last 3 tokens
        logits = model(out[:, max(0, t - 3) : t])
        assert out[0, t] == np.argmax(logits[0, -1])
    assert generate_text_simple(model, [[1, 2]], 0, 3).tolist() == [[1, 2]]


@pytest.mark.parametrize(
    "call,error,fragment",
    [
        (lambda: GPTModel({**TINY, "n_heads": 3}), npattn.ConfigError, "divisible by cfg['n_heads']"),
        (lambda: GPTModel({"vocab_size": 5}), npattn.ConfigError, "missing 'context_length'"),
        (lambda: GPTModel([1, 2]), npattn.ConfigError, "must be a dict"),
        (lambda: GPTModel({**TINY, "drop_rate": 1.5}), npattn.ConfigError, "[0, 1)"),
        (lambda: GPTModel({**TINY, "emb_dim": 0}), npattn.ConfigError, "cfg['emb_dim']"),
        (lambda: GPTModel(TINY, rng=0)(np.zeros((1, 6), int)), npattn.ShapeError, "exceeds context_length=5"),
        (lambda: GPTModel(TINY, rng=0)(np.zeros(3, int)), npattn.ShapeError, "(batch, n)"),
        (lambda: GPTModel(TINY, rng=0)(np.zeros((1, 3))), npattn.DTypeError, "float64"),
        (lambda: GPTModel(TINY, rng=0)([[1, 7]]), npattn.ConfigError, "[0, 7)"),
        (lambda: GPTModel(TINY, rng=0).backward(np.zeros((1, 2, 7))), npattn.BackwardError, "before forward"),
        (lambda: generate_text_simple(GPTModel(TINY, rng=0), [1, 2], 1, 5), npattn.ShapeError, "(batch, n)"),
        (lambda: generate_text_simple(GPTModel(TINY, rng=0), [[1]], -1, 5), npattn.ConfigError, "max_new_tokens"),
        (lambda: LayerNorm(4)(np.zeros((2, 3))), npattn.ShapeError, "emb_dim=4"),
    ],
)
def test_bad_input(call, error, fragment):
    with pytest.raises(error) as info:
        call()
    assert fragment in str(info.value)


def test_backward_checks_the_gradient_shape():
    model = GPTModel(TINY, rng=0)
    model(np.array([[1, 2]]))
    with pytest.raises(npattn.ShapeError, match=r"\(1, 2, 7\)"):
        model.backward(np.zeros((1, 3, 7)))


@pytest.mark.parametrize("impl", ["fused", "tiled"])
def test_every_attention_impl_gives_the_same_model(impl):
    idx = np.array([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]])
    reference = GPTModel(SMALL, rng=8, dtype=np.float64, impl="reference")
    other = GPTModel(SMALL, rng=8, dtype=np.float64, impl=impl)
    np.testing.assert_allclose(other(idx), reference(idx), rtol=0, atol=1e-12)
    G = np.random.default_rng(0).standard_normal((2, 5, SMALL["vocab_size"]))
    reference.backward(G)
    other.backward(G)
    for (name, p), q in zip(reference.named_parameters(), other.parameters()):
        np.testing.assert_allclose(q.grad, p.grad, rtol=0, atol=1e-11, err_msg=name)


def test_the_block_uses_the_books_name_drop_shortcut():
    cfg = dict(vocab_size=5, context_length=4, emb_dim=4, n_heads=2, n_layers=1, drop_rate=0.1, qkv_bias=False)
    block = npattn.GPTModel(cfg, rng=0).trf_blocks[0]
    assert isinstance(block.drop_shortcut, npattn.nn.Dropout) and block.drop_resid is block.drop_shortcut
    assert [name for name, _ in block.named_children()] == ["att", "ff", "norm1", "norm2", "drop_shortcut"]
