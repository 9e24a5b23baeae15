"""The book's chapter-5 calls with ``device`` work (npattn runs on the CPU): the device is checked
and dropped, another device is a ConfigError, and npattn's own calls keep their meaning (an int
where the book has the device is never read as one)."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.optim import AdamW
from npattn.train.lm import calc_loss_batch, calc_loss_loader, evaluate_model, generate_and_print_sample
from npattn.train.text import create_dataloader_v1, default_corpus
from npattn.train.tokenizers import CharTokenizer

TEXT = default_corpus()[:3000]
TOK = CharTokenizer(sorted(set(TEXT)))
CFG = {"vocab_size": TOK.vocab_size, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
       "drop_rate": 0.0, "qkv_bias": False}  # fmt: skip


def _setup():
    train = create_dataloader_v1(TEXT[:2500], batch_size=2, max_length=8, stride=8, tokenizer=TOK)
    val = create_dataloader_v1(TEXT[2500:], batch_size=2, max_length=8, stride=8, tokenizer=TOK, shuffle=False)
    return npattn.GPTModel(CFG, rng=1), train, val


def test_book_calls_equal_npattn_calls():
    model, train, val = _setup()
    x, y = next(iter(train))
    assert calc_loss_batch(x, y, model, "cpu").item() == calc_loss_batch(x, y, model).item()
    assert calc_loss_loader(train, model, "cpu", num_batches=2) == calc_loss_loader(train, model, 2)
    assert calc_loss_loader(train, model, "cpu", 2) == calc_loss_loader(train, model, num_batches=2)
    assert evaluate_model(model, train, val, "cpu", 2) == evaluate_model(model, train, val, 2)
    book = generate_and_print_sample(model, TOK, "cpu", "The", max_new_tokens=3, out=None)
    assert book == generate_and_print_sample(model, TOK, "The", max_new_tokens=3, out=None)
    # npattn's own call: a start_context that reads "cpu" is the text to continue
    assert generate_and_print_sample(model, TOK, "cpu", max_new_tokens=2, out=None).startswith("cpu")


def test_train_model_simple_order():
    runs = []
    for device in (("cpu",), ()):
        model, train, val = _setup()
        opt = AdamW(model.parameters(), lr=1e-3)
        h = npattn.train_lm(model, train, val, opt, *device, num_epochs=1, eval_freq=2, eval_iter=1,
                            start_context="The", tokenizer=TOK, max_steps=2, out=None)  # fmt: skip
        runs.append((h.train_losses, model.state_dict()["out_head.weight"].copy()))
    assert runs[0][0] == runs[1][0] and np.array_equal(runs[0][1], runs[1][1])


def test_other_devices_refused():
    model, train, val = _setup()
    x, y = next(iter(train))
    with pytest.raises(ConfigError, match=r"calc_loss_batch: npattn runs on the CPU only; .* got 'cuda'"):
        calc_loss_batch(x, y, model, "cuda")
    with pytest.raises(ConfigError, match=r"evaluate_model: npattn runs on the CPU only"):
        evaluate_model(model, train, val, "cuda:0", 2)
    with pytest.raises(ConfigError, match=r"train_lm: npattn runs on the CPU only"):
        npattn.train_lm(model, train, val, AdamW(model.parameters()), "mps", num_epochs=1, eval_freq=1,
                        eval_iter=1, start_context="The", tokenizer=TOK, out=None)  # fmt: skip


def test_torch_devices():
    torch = pytest.importorskip("torch")
    model, train, _ = _setup()
    x, y = next(iter(train))
    assert calc_loss_batch(x, y, model, torch.device("cpu")).item() == calc_loss_batch(x, y, model).item()
    assert calc_loss_loader(train, model, device=torch.device("cpu")) == calc_loss_loader(train, model)
    with pytest.raises(ConfigError, match=r"npattn runs on the CPU only; .* got device\(type='meta'\)"):
        calc_loss_batch(x, y, model, torch.device("meta"))
