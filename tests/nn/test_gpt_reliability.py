"""The GPT side keeps the attention classes' guarantees: frozen parameters get no gradient, a bad
``.grad`` anywhere in the model changes no gradient, forward keeps private copies of what backward
reads, the chapter-4 stages refuse bool and complex data, and generation refuses what can never work."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import npattn
from npattn.nn import functional as F
from npattn.nn.gpt import GPTModel, TransformerBlock, generate_text_simple
from npattn.nn.layers import Linear
from npattn.nn.transformer import GELU, Embedding, FeedForward, LayerNorm
from npattn.train.generate import generate

CFG = {
    "vocab_size": 11,
    "context_length": 6,
    "emb_dim": 8,
    "n_heads": 2,
    "n_layers": 2,
    "drop_rate": 0.0,
    "qkv_bias": True,
}
IDS = np.array([[1, 4, 4, 9, 0], [3, 10, 2, 2, 7]])


def _model(seed: int = 0) -> GPTModel:
    return GPTModel(CFG, rng=seed, dtype=np.float64)


def _dlogits(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((*IDS.shape, CFG["vocab_size"]))


def _grads(model: GPTModel) -> dict[str, Any]:
    return {name: None if p.grad is None else p.grad.copy() for name, p in model.named_parameters()}


def _freeze_all_but_the_head(model: GPTModel) -> GPTModel:
    """The book's chapter-6 recipe: freeze everything, unfreeze out_head, the last block, final_norm."""
    model.requires_grad_(False)
    for module in (model.out_head, model.trf_blocks[-1], model.final_norm):
        module.requires_grad_(True)
    return model


def test_frozen_parameters_get_no_gradient_and_the_rest_the_full_models() -> None:
    full, frozen = _model(), _freeze_all_but_the_head(_model())
    for model in (full, frozen):
        model(IDS)
        model.backward(_dlogits())
    full_grads = _grads(full)
    trainable = 0
    for name, p in frozen.named_parameters():
        if name.startswith(("out_head.", "trf_blocks.1.", "final_norm.")):
            trainable += 1
            np.testing.assert_array_equal(p.grad, full_grads[name])
            assert np.any(p.grad != 0), name
        else:
            assert p.grad is None, name
    assert trainable == 1 + 2 + 16  # out_head (no bias), final_norm, block 1 (attention 8, ff 4, norms 4)
    # a frozen parameter whose .grad was set to an array is left alone, as in PyTorch
    frozen.tok_emb.weight.grad = before = np.zeros_like(frozen.tok_emb.weight.data)
    frozen(IDS)
    frozen.backward(_dlogits())
    assert frozen.tok_emb.weight.grad is before and not before.any()


def test_gradcheck_on_a_partly_frozen_model() -> None:
    model = _freeze_all_but_the_head(_model()).eval()
    report = npattn.gradcheck(model, IDS[:1, :3], check_input=False, fast_mode=True)
    assert report


def _read_only(p: npattn.Parameter) -> np.ndarray:
    grad = np.zeros_like(p.data)
    grad.flags.writeable = False
    return grad


BAD_GRADS = {
    "read-only": _read_only,
    "int64": lambda p: np.zeros(p.shape, np.int64),
    "wrong shape": lambda p: np.zeros((3, 3)),
    "a list": lambda p: np.zeros(p.shape).tolist(),
}


@pytest.mark.parametrize("bad", BAD_GRADS)
@pytest.mark.parametrize("name", ["pos_emb.weight", "tok_emb.weight", "trf_blocks.0.norm1.scale", "final_norm.shift"])
def test_a_bad_grad_anywhere_changes_no_gradient(name: str, bad: str) -> None:
    """pos_emb is accumulated last, out_head first: the whole model is checked before any .grad changes."""
    model = _model()
    model(IDS)
    model.backward(_dlogits())
    params = dict(model.named_parameters())
    params[name].grad = BAD_GRADS[bad](params[name])
    before = _grads(model) if bad != "a list" else None
    with pytest.raises(npattn.BackwardError, match=f"GPTModel.backward\\(\\): {name}.grad .* no gradient was changed"):
        model.backward(_dlogits(2))
    for other, p in params.items():
        if before is not None:
            np.testing.assert_array_equal(p.grad, before[other])
        elif other != name:
            assert p.grad.dtype == np.float64
    model.zero_grad()
    model.backward(_dlogits(2))  # works again once the .grad is replaced


def test_grad_of_none_starts_from_zeros() -> None:
    model, reference = _model(), _model()
    for m in (model, reference):
        m(IDS)
    model.tok_emb.weight.grad = None
    model.final_norm.scale.grad = None
    model.backward(_dlogits())
    reference.backward(_dlogits())
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        np.testing.assert_array_equal(p.grad, q.grad, err_msg=name)


def _edit_every_parameter(model: GPTModel, ids: np.ndarray, logits: np.ndarray) -> None:
    for p in model.parameters():
        p.data *= 3.0
        p.data += 1.0


def _edit_logits(model: GPTModel, ids: np.ndarray, logits: np.ndarray) -> None:
    logits[...] = 7.0


def _edit_ids(model: GPTModel, ids: np.ndarray, logits: np.ndarray) -> None:
    ids[...] = (ids + 5) % CFG["vocab_size"]


@pytest.mark.parametrize("edit", [_edit_every_parameter, _edit_logits, _edit_ids], ids=lambda f: f.__name__[1:])
def test_editing_after_forward_does_not_change_the_gradients(edit: Any) -> None:
    """backward differentiates the forward that ran: every parameter (LayerNorm scale and shift,
    embeddings, the feed-forward and output Linears, attention), the logits and the ids."""
    reference, model = _model(), _model()
    reference(IDS)
    reference.backward(_dlogits())
    ids = IDS.copy()
    logits = model(ids)
    edit(model, ids, logits)
    model.backward(_dlogits())
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        np.testing.assert_array_equal(p.grad, q.grad, err_msg=name)


MODULES = {
    "Embedding": (lambda: Embedding(11, 8, rng=0, dtype=np.float64), lambda: IDS.copy()),
    "LayerNorm": (lambda: LayerNorm(8, dtype=np.float64), None),
    "GELU": (GELU, None),
    "FeedForward": (lambda: FeedForward(CFG, rng=0, dtype=np.float64), None),
    "TransformerBlock": (lambda: TransformerBlock(CFG, rng=0, dtype=np.float64), None),
    "out_head": (lambda: Linear(8, 11, bias=False, rng=0, dtype=np.float64), None),
}


@pytest.mark.parametrize("name", MODULES)
def test_every_gpt_module_differentiates_the_forward_that_ran(name: str) -> None:
    """Each module alone: editing its parameters, its output and its input after forward changes
    neither dx nor any .grad (LayerNorm's scale used to be read live)."""
    build, make_x = MODULES[name]
    results = []
    for edit in (False, True):
        module = build()  # the same weights both times
        for i, p in enumerate(module.parameters()):
            p.data[...] = np.random.default_rng(i).standard_normal(p.shape)  # LayerNorm's too
        x = make_x() if make_x else np.random.default_rng(2).standard_normal((2, 5, 8))
        out = module(x)
        g = np.random.default_rng(3).standard_normal(out.shape)
        if edit:
            for p in module.parameters():
                p.data *= 3.0
            out[...] = 5.0
            x[...] = x[::-1] if make_x else 7.0
        dx = module.backward(g)
        results.append((None if dx is None else dx.copy(), [p.grad.copy() for p in module.parameters()]))
    (dx0, grads0), (dx1, grads1) = results
    np.testing.assert_array_equal(dx1, dx0)
    for a, b in zip(grads1, grads0):
        np.testing.assert_array_equal(a, b)


X = np.ones((2, 3))
BOOL, COMPLEX = np.ones((2, 3), bool), np.ones((2, 3), complex)


def _ln_cache() -> tuple:
    return F.layer_norm_forward(X, np.ones(3), np.zeros(3))[1]


REFUSED = {
    "add_forward bool": lambda: F.add_forward(BOOL, BOOL),
    "add_forward complex": lambda: F.add_forward(X, COMPLEX),
    "add_backward bool": lambda: F.add_backward(BOOL, F.add_forward(X, X)[1]),
    "layer_norm_forward bool x": lambda: F.layer_norm_forward(BOOL, np.ones(3), np.zeros(3)),
    "layer_norm_forward complex x": lambda: F.layer_norm_forward(COMPLEX, np.ones(3), np.zeros(3)),
    "layer_norm_forward bool scale": lambda: F.layer_norm_forward(X, np.ones(3, bool), np.zeros(3)),
    "layer_norm_backward bool": lambda: F.layer_norm_backward(BOOL, _ln_cache()),
    "gelu_forward bool": lambda: F.gelu_forward(BOOL),
    "gelu_forward complex": lambda: F.gelu_forward(COMPLEX),
    "gelu_backward bool": lambda: F.gelu_backward(BOOL, F.gelu_forward(X)[1]),
    "embedding_forward bool weight": lambda: F.embedding_forward(BOOL, [0, 1]),
    "embedding_backward bool": lambda: F.embedding_backward(BOOL, F.embedding_forward(X, [0, 1])[1]),
    "token_cross_entropy_forward bool": lambda: F.token_cross_entropy_forward(BOOL, [0, 1]),
    "token_cross_entropy_forward complex": lambda: F.token_cross_entropy_forward(COMPLEX, [0, 1]),
}


@pytest.mark.parametrize("call", REFUSED.values(), ids=list(REFUSED))
def test_stages_refuse_bool_and_complex(call: Any) -> None:
    pattern = r"must hold real numbers \(float or int\), got dtype (bool|complex128)"
    with pytest.raises(npattn.DTypeError, match=pattern):
        call()


@pytest.mark.parametrize("eps", [-1.0, 0.0, float("nan"), float("inf")])
def test_layer_norm_refuses_eps_that_is_not_positive(eps: float) -> None:
    with pytest.raises(npattn.ConfigError, match="eps must be a finite number > 0"):
        F.layer_norm_forward(X, np.ones(3), np.zeros(3), eps)


def test_integer_data_is_computed_in_float64() -> None:
    ints = np.array([[0, 1, 3], [2, 2, 2]])
    out, _ = F.gelu_forward(ints)
    np.testing.assert_array_equal(out, F.gelu_forward(ints.astype(np.float64))[0])
    out, cache = F.layer_norm_forward(ints, np.ones(3), np.zeros(3))
    np.testing.assert_array_equal(out, F.layer_norm_forward(ints.astype(np.float64), np.ones(3), np.zeros(3))[0])
    assert np.all(np.isfinite(out))  # a constant row: eps keeps the division finite (int(1e-5) would be 0)
    _, _, dshift = F.layer_norm_backward(np.ones((2, 3), np.int64), cache)
    assert dshift.dtype == np.float64
    loss, _ = F.token_cross_entropy_forward(ints, [2, 0])
    assert loss == F.token_cross_entropy_forward(ints.astype(np.float64), [2, 0])[0]


class _Fixed:
    """A model whose logits always favour token 3 of a vocabulary of 5."""

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        logits = np.zeros((*idx.shape, 5))
        logits[..., 3] = 1.0
        return logits


@pytest.mark.parametrize("eos_id", [5, 99, -1])
def test_generate_refuses_an_eos_id_outside_the_vocabulary(eos_id: int) -> None:
    with pytest.raises(npattn.ConfigError, match=f"eos_id must .*got {eos_id}"):
        generate(_Fixed(), [[1]], 2, 4, eos_id=eos_id)
    assert generate(_Fixed(), [[1]], 2, 4, eos_id=4).tolist() == [[1, 3, 3]]  # in range: accepted


def test_an_empty_prompt_is_refused_unless_nothing_is_generated() -> None:
    empty = np.zeros((1, 0), np.int64)
    model = _model().eval()
    for run in (lambda n: generate(model, empty, n, 6), lambda n: generate_text_simple(model, empty, n, 6)):
        with pytest.raises(npattn.ConfigError, match=r"an empty prompt \(shape \(1, 0\)\)"):
            run(2)
        assert run(0).shape == (1, 0)
