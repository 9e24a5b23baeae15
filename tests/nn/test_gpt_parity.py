"""GPTModel against the book's PyTorch GPTModel: logits, loss and every parameter gradient to 1e-10
in float64, and the book's 124M model (float32 logits within 1e-5, generate_text_simple's tokens).

Always: against tests/fixtures/torch_gpt.npz (written by tests/fixtures/make_gpt_fixtures.py from
torch autograd). With torch installed (marker ``torch``): against torch live, with state dicts
moving both ways under strict loading.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import npattn
from npattn.nn.functional import transformer as T
from npattn.nn.gpt import GPT_CONFIG_124M, GPTModel, generate_text_simple

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DATA = np.load(FIXTURES / "torch_gpt.npz", allow_pickle=False)
CASES = sorted({key.split("|")[0] for key in DATA.files if key.endswith("|config")})
TOL = 1e-10
BOOK_BATCH = [[6109, 3626, 6100, 345], [6109, 1110, 6622, 257]]  # "Every effort moves you", "Every day holds a"
HELLO = [[15496, 11, 314, 716]]  # "Hello, I am"
BOOK_GENERATED = [15496, 11, 314, 716, 27018, 24086, 47843, 30961, 42348, 7267]


def case_arrays(case: str, kind: str) -> dict[str, np.ndarray]:
    prefix = f"{case}|{kind}|"
    return {key[len(prefix) :]: DATA[key] for key in DATA.files if key.startswith(prefix)}


def run_npattn(config: dict, state: dict, idx: np.ndarray, targets: np.ndarray, keeps: dict) -> dict:
    """Logits, the book's loss and every parameter gradient from npattn, float64."""
    model = GPTModel(config["cfg"], rng=0, dtype=np.float64)
    model.load_state_dict(state, strict=True)
    modules = dict(model.named_modules())
    for name, keep in keeps.items():  # fixtures made before the book's name keep "drop_resid"
        modules[name.replace("drop_resid", "drop_shortcut")].fixed_keep = keep
    model.train(config["train"])
    logits = model(idx)
    loss, cache = T.token_cross_entropy_forward(logits, targets)
    (dlogits,) = T.token_cross_entropy_backward(np.float64(1.0), cache)
    model.backward(dlogits)
    out = {"logits": logits, "loss": loss}
    out.update({f"grad|{name}": p.grad for name, p in model.named_parameters()})
    return out


def assert_same(ours: dict, theirs: dict) -> float:
    """Every array of ``theirs`` within TOL of ours, relative to its largest entry (at least 1e-3:
    the key bias's true gradient is zero, since the softmax ignores a shift shared by a whole row,
    so both sides hold only rounding there); returns the worst."""
    assert set(ours) == set(theirs)
    worst = 0.0
    for key, want in theirs.items():
        scale = max(float(np.max(np.abs(want))), 1e-3)
        err = float(np.max(np.abs(np.asarray(ours[key]) - want))) / scale
        assert err <= TOL, f"{key}: relative error {err:.3e}"
        worst = max(worst, err)
    return worst


def test_fixture_is_small_and_complete():
    assert (FIXTURES / "torch_gpt.npz").stat().st_size < 200_000
    configs = [json.loads(str(DATA[f"{case}|config"])) for case in CASES]
    assert any(c["train"] for c in configs) and any(not c["train"] for c in configs)
    assert {c["cfg"]["qkv_bias"] for c in configs} == {True, False}


@pytest.mark.parametrize("case", CASES)
def test_matches_torch_fixture(case):
    config = json.loads(str(DATA[f"{case}|config"]))
    want = {k: DATA[f"{case}|{k}"] for k in ("logits", "loss")}
    want.update({f"grad|{k}": v for k, v in case_arrays(case, "grad").items()})
    ours = run_npattn(
        config, case_arrays(case, "state"), DATA[f"{case}|idx"], DATA[f"{case}|targets"], case_arrays(case, "keep")
    )
    assert_same(ours, want)


# ------------------------------------------------------------------ live, with torch installed


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES)
def test_live_torch_to_npattn(book, case):
    """Fresh random weights, ids, targets and masks: the torch state dict loads into npattn (strict)."""
    config = json.loads(str(DATA[f"{case}|config"]))
    arrays = book.make_case(config, np.random.default_rng(99))
    state = {k[len("state|") :]: v for k, v in arrays.items() if k.startswith("state|")}
    keeps = {k[len("keep|") :]: v for k, v in arrays.items() if k.startswith("keep|")}
    ours = run_npattn(config, state, arrays["idx"], arrays["targets"], keeps)
    theirs = {k: v for k, v in arrays.items() if k in ("logits", "loss") or k.startswith("grad|")}
    assert_same(ours, theirs)


@pytest.mark.torch
def test_live_npattn_to_torch(book):
    """npattn's state dict (bool masks) loads into the book's torch GPTModel (strict), same logits."""
    import torch

    config = json.loads(str(DATA[f"{CASES[0]}|config"]))
    model = GPTModel(config["cfg"], rng=3, dtype=np.float64).eval()
    theirs = book.build_torch(config).eval()
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in model.state_dict().items()}, strict=True)
    idx = np.random.default_rng(4).integers(0, config["cfg"]["vocab_size"], (2, 5))
    with torch.no_grad():
        want = theirs(torch.from_numpy(idx)).numpy()
    np.testing.assert_allclose(model(idx), want, rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def book_124m():
    """``npattn.manual_seed(123); GPTModel(GPT_CONFIG_124M)``, the book's construction (float32), and
    the default generator's state right after it (where the notebook's training-mode forward draws)."""
    npattn.manual_seed(123)
    model = GPTModel(GPT_CONFIG_124M)
    return model, npattn.default_generator.get_state()


@pytest.mark.slow
def test_124m_after_the_books_seed_generates_the_books_tokens(book_124m):
    """No torch needed: 163,009,536 parameters, and greedy decoding of "Hello, I am" in eval mode
    gives the book's six tokens ("Featureiman Byeswickattribute argue")."""
    model, _ = book_124m
    assert sum(p.size for p in model.parameters()) == 163_009_536
    model.eval()
    out = generate_text_simple(model, HELLO, max_new_tokens=6, context_size=GPT_CONFIG_124M["context_length"])
    assert out.tolist() == [BOOK_GENERATED]


@pytest.mark.torch
@pytest.mark.slow
def test_124m_weights_and_float32_logits_match_torch(book, book_124m):
    """Every tensor of torch.manual_seed(123); GPTModel(GPT_CONFIG_124M) bit for bit, and the logits
    of the book's batch within 1e-5 in float32: in training mode right after construction (the
    notebook's ``out = model(batch)``, dropout drawn from the same stream) and in eval mode."""
    import torch

    model, state_after_build = book_124m
    torch.manual_seed(123)
    theirs = book.GPTModel(GPT_CONFIG_124M)
    with torch.no_grad():
        want_train = theirs(torch.tensor(BOOK_BATCH)).numpy()
        want_eval = theirs.eval()(torch.tensor(BOOK_BATCH)).numpy()
    ours = model.state_dict()
    for key, value in theirs.state_dict().items():
        want = value.numpy().astype(bool) if key.endswith(".mask") else value.numpy()
        assert np.array_equal(ours[key], want), key
    npattn.default_generator.set_state(state_after_build)
    logits = model.train()(np.array(BOOK_BATCH))
    assert logits.shape == (2, 4, 50257) and logits.dtype == np.float32
    assert float(np.max(np.abs(logits - want_train))) <= 1e-5
    logits = model.eval()(np.array(BOOK_BATCH))
    assert float(np.max(np.abs(logits - want_eval))) <= 1e-5


@pytest.mark.torch
def test_training_mode_logits_follow_torchs_dropout_stream(book):
    """manual_seed, construction, then a training-mode forward: dropout (drop_emb, the attention
    weights, drop_shortcut twice per block) draws torch's masks in torch's order; float32 within 1e-5."""
    import torch

    cfg = {**json.loads(str(DATA[f"{CASES[1]}|config"]))["cfg"], "drop_rate": 0.3}
    idx = np.random.default_rng(5).integers(0, cfg["vocab_size"], (3, cfg["context_length"]))
    torch.manual_seed(123)
    want = book.GPTModel(cfg)(torch.from_numpy(idx)).detach().numpy()
    npattn.manual_seed(123)
    logits = GPTModel(cfg)(idx)
    assert float(np.max(np.abs(logits - want))) <= 1e-5
    npattn.manual_seed(124)
    assert float(np.max(np.abs(GPTModel(cfg)(idx) - want))) > 1e-2  # another stream: other masks
