"""A callback that writes NaN into a weight between steps: the next step's non-finite loss was blamed
on the learning rate ("try a smaller learning rate", even at lr=0). Every update is checked to leave
finite weights, so NaN weights before a forward came from outside the steps, and the message now says
so, naming the parameter; ``npattn train --task lm --steps 0`` printed "nan tokens/s"."""

import numpy as np
import pytest

import npattn
from npattn.cli.main import main
from npattn.errors import TrainingError
from npattn.optim import SGD, AdamW
from npattn.train.tasks import TeacherStudent


def test_fit_names_the_weight_a_callback_made_nan():
    task = TeacherStudent(seed=4)
    model = task.make_model()
    opt = SGD(model.parameters(), lr=0.0)

    def on_step(step, history):
        if step == 2:
            model.W_query.data[0, 0] = np.nan

    with pytest.raises(TrainingError) as info:
        npattn.fit(model, opt, task.criterion, task.batch, 6, on_step=on_step)
    message = str(info.value)
    assert "training stopped at step 2: the loss is nan, because 1 entry of W_query were already NaN or inf" in message
    assert "by a callback such as on_step" in message and "smaller learning rate" not in message


def test_train_lm_names_the_weight_a_callback_made_nan():
    text = npattn.default_corpus()[:2000]
    tok = npattn.CharTokenizer.train(text)
    loader = npattn.create_dataloader_v1(text, batch_size=2, max_length=8, stride=8, tokenizer=tok)
    cfg = {"vocab_size": tok.vocab_size, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
           "drop_rate": 0.0, "qkv_bias": False}
    model = npattn.GPTModel(cfg, rng=1)

    def on_step(history):
        if history.global_step == 1:
            model.tok_emb.weight.data[:] = np.nan

    with pytest.raises(TrainingError, match=r"of tok_emb\.weight were already NaN or inf before this step"):
        npattn.train_lm(model, loader, loader, AdamW(model.parameters(), lr=0.0), num_epochs=1, eval_freq=100,
                        eval_iter=1, start_context="a", tokenizer=tok, out=None, on_step=on_step)  # fmt: skip


def test_no_step_prints_no_nan_rate(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.txt").write_text(npattn.default_corpus()[:3000], encoding="utf-8")
    args = ["train", "--task", "lm", "--text", "t.txt", "--tokenizer", "char", "--context-length", "8",
            "--emb-dim", "8", "--n-heads", "2", "--n-layers", "1", "--steps", "0", "--save", "lm0.npz"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "(no step timed)" in out and "nan" not in out
