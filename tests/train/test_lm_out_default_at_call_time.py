"""train_lm, generate_and_print_sample and run_lm print by default to the sys.stdout of the call
(contextlib.redirect_stdout is honoured), not the one bound at import; out=None stays silent."""

import contextlib
import io

import npattn
from npattn.optim import AdamW
from npattn.train import split_train_val

TEXT = npattn.default_corpus()[:3000]
TOK = npattn.CharTokenizer.train(TEXT)


def gpt():
    cfg = {"vocab_size": TOK.vocab_size, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
           "drop_rate": 0.0, "qkv_bias": False}
    return npattn.GPTModel(cfg, rng=1)


def loader(text, shuffle):
    return npattn.create_dataloader_v1(text, batch_size=2, max_length=8, stride=8, shuffle=shuffle,
                                       drop_last=shuffle, tokenizer=TOK, seed=123)


def test_generate_and_print_sample_prints_to_the_redirected_stdout():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        text = npattn.generate_and_print_sample(gpt(), TOK, "the", max_new_tokens=3)
    assert buf.getvalue() == text + "\n"
    silent = io.StringIO()
    with contextlib.redirect_stdout(silent):
        npattn.generate_and_print_sample(gpt(), TOK, "the", max_new_tokens=3, out=None)
    assert silent.getvalue() == ""


def test_train_lm_prints_to_the_redirected_stdout():
    model = gpt()
    train, val = split_train_val(TEXT, 0.9)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        npattn.train_lm(model, loader(train, True), loader(val, False), AdamW(model.parameters(), lr=0.004), 1, 2, 1,
                        "the", TOK, max_steps=2, sample_tokens=2)
    assert buf.getvalue().startswith("Ep 1 (Step 000000): Train loss")


def test_the_default_shows_as_sys_stdout_in_the_signature():
    import inspect

    assert "out: 'TextIO | None' = sys.stdout" in str(inspect.signature(npattn.train_lm)).replace('"', "'")
