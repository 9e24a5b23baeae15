"""The chapter-5 loop on a stand-in model (a bigram table: logits of a position = the row of its
token), so that the loop's bookkeeping is checked on its own: the loss, the evaluation cadence,
tokens seen, samples, resuming, and stopping on non-finite values."""

import io

import numpy as np
import pytest
from npattn.module import Module, Parameter

from npattn.errors import ConfigError, TrainingError
from npattn.optim import AdamW
from npattn.train.lm import LMHistory, calc_loss_batch, calc_loss_loader, evaluate_model, train_lm
from npattn.train.text import DataLoader, GPTDatasetV1, create_dataloader_v1
from npattn.train.tokenizers import CharTokenizer

TEXT = "the cat sat on the mat. the dog sat on the log. " * 12


class _Positions:
    def __init__(self, context_length: int) -> None:
        self.weight = np.zeros((context_length, 1))


class Bigram(Module):
    def __init__(self, vocab_size: int, context_length: int = 16, seed: int = 0) -> None:
        super().__init__()
        self.table = Parameter(np.random.default_rng(seed).normal(0, 0.1, (vocab_size, vocab_size)))
        self.pos_emb = _Positions(context_length)

    def forward(self, idx: np.ndarray) -> np.ndarray:
        self.idx = np.asarray(idx)
        return self.table.data[self.idx]

    def backward(self, dlogits: np.ndarray) -> None:
        np.add.at(self.table.grad, self.idx, dlogits)


@pytest.fixture
def data():
    tok = CharTokenizer.train(TEXT)
    train = create_dataloader_v1(TEXT[:125], batch_size=4, max_length=8, stride=8, tokenizer=tok, seed=1)
    val = create_dataloader_v1(
        TEXT[500:], batch_size=4, max_length=8, stride=8, shuffle=False, drop_last=False, tokenizer=tok
    )
    return tok, train, val


def test_calc_loss_batch_is_the_mean_token_cross_entropy(data) -> None:
    tok, train, _ = data
    model = Bigram(tok.vocab_size)
    x, y = next(iter(train))
    loss = calc_loss_batch(x, y, model)
    logits = model.table.data[x]
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -np.take_along_axis(log_probs, y[..., None], -1).mean()
    assert abs(loss.item() - expected) < 1e-12 and float(loss) == loss.item()
    loss.backward()
    probs = np.exp(log_probs)
    dlogits = (probs - np.eye(tok.vocab_size)[y]) / y.size
    grad = np.zeros_like(model.table.data)
    np.add.at(grad, x, dlogits)
    assert np.allclose(model.table.grad, grad, atol=1e-15)


def test_calc_loss_loader(data) -> None:
    tok, train, val = data
    model = Bigram(tok.vocab_size)
    per_batch = [calc_loss_batch(x, y, model).item() for x, y in train]
    assert calc_loss_loader(train, model) == pytest.approx(np.mean(per_batch), abs=1e-12)
    assert calc_loss_loader(train, model, num_batches=2) == pytest.approx(np.mean(per_batch[:2]), abs=1e-12)
    assert calc_loss_loader(train, model, num_batches=999) == pytest.approx(np.mean(per_batch), abs=1e-12)
    empty = DataLoader(GPTDatasetV1(None, None, 8, 8, token_ids=range(5)), 4)
    assert np.isnan(calc_loss_loader(empty, model))
    train_loss, val_loss = evaluate_model(model, train, val, 3)
    assert model.training and train_loss == pytest.approx(np.mean(per_batch[:3]), abs=1e-12) and val_loss > 0


def _run(data, **kwargs):
    tok, train, val = data
    model = Bigram(tok.vocab_size)
    optimizer = AdamW(model.parameters(), lr=0.05, weight_decay=0.1)
    out = io.StringIO()
    history = train_lm(model, train, val, optimizer, 3, 4, 2, "the ", tok, out=out, sample_tokens=10, **kwargs)
    return model, optimizer, history, out.getvalue()


def test_train_lm_follows_the_book(data) -> None:
    _tok, train, _ = data
    _model, _, history, printed = _run(data)
    steps = 3 * len(train)  # 15 windows of 8 tokens in batches of 4: 3 steps per epoch
    assert len(train) == 3 and history.global_step == steps - 1
    assert history.eval_steps == [0, 4, 8]  # the book: global_step % eval_freq == 0
    assert history.track_tokens_seen == [32, 160, 288] and history.tokens_seen == steps * 32
    assert [step for step, _ in history.samples] == [2, 5, 8] and all(s.startswith("the ") for _, s in history.samples)
    assert history.train_losses[-1] < history.train_losses[0] - 0.5
    lines = printed.splitlines()
    assert lines[0].startswith("Ep 1 (Step 000000): Train loss ") and "tokens seen 32" in lines[0]
    assert sum(line.startswith("Ep ") for line in lines) == 3 and len(lines) == 6  # 3 evaluations, 3 samples


def test_an_optimizer_of_another_model_is_refused(data) -> None:
    tok, train, val = data
    model, other = Bigram(tok.vocab_size), Bigram(tok.vocab_size)
    before = model.table.data.copy()
    with pytest.raises(ConfigError, match=r"train_lm: 1 of the optimizer's 1 parameters are not parameters"):
        train_lm(model, train, val, AdamW(other.parameters(), lr=0.05), 1, 4, 2, "the ", tok, out=None)
    np.testing.assert_array_equal(model.table.data, before)


def test_max_steps_and_eval_before(data) -> None:
    _, _, history, printed = _run(data, max_steps=5, eval_before=True)
    assert history.global_step == 4 and history.epoch == 1 and history.batch == 2
    assert history.eval_steps == [-1, 0, 4] and history.track_tokens_seen[0] == 0
    assert [step for step, _ in history.samples] == [-1, 2, 4]
    assert printed.splitlines()[0].startswith("Ep 1 (before training): Train loss")


def test_resume_continues_exactly(data) -> None:
    tok, train, val = data
    straight, _, full, _ = _run(data)
    model, optimizer, part, _ = _run(data, max_steps=4)
    state = (model.state_dict(), optimizer.state_dict(), part.state_dict())
    again = Bigram(tok.vocab_size, seed=5)
    again.load_state_dict(state[0])
    opt = AdamW(again.parameters(), lr=0.05, weight_decay=0.1)
    opt.load_state_dict(state[1])
    history = train_lm(
        again,
        train,
        val,
        opt,
        3,
        4,
        2,
        "the ",
        tok,
        out=None,
        sample_tokens=10,
        history=LMHistory.from_state_dict(state[2]),
    )
    assert np.array_equal(again.table.data, straight.table.data)
    # the cut run ended with an evaluation of its own (after step 3); the others are the straight run's
    assert history.eval_steps == [0, 3, 4, 8]
    assert [history.train_losses[i] for i in (0, 2, 3)] == full.train_losses
    assert [history.val_losses[i] for i in (0, 2, 3)] == full.val_losses
    assert history.samples[-1] == full.samples[-1]


def test_stops_before_a_non_finite_step(data) -> None:
    tok, train, val = data
    model = Bigram(tok.vocab_size)  # a weight NaN before step 0 is refused up front; here it turns NaN after step 0
    saved = []

    def plant(history) -> None:
        model.table.data[0, 0] = np.nan
        saved.append(model.table.data.copy())

    with pytest.raises(TrainingError, match="training stopped at step 1"):
        train_lm(model, train, val, AdamW(model.parameters()), 1, 100, 1, "the ", tok, out=None, on_step=plant)
    assert len(saved) == 1 and np.array_equal(model.table.data, saved[0], equal_nan=True)


def test_bad_arguments(data) -> None:
    tok, train, val = data
    model = Bigram(tok.vocab_size)
    opt = AdamW(model.parameters())
    with pytest.raises(ConfigError, match="eval_freq must be a positive integer"):
        train_lm(model, train, val, opt, 1, 0, 1, "the ", tok, out=None)
    empty = DataLoader(GPTDatasetV1(None, None, 8, 8, token_ids=range(20)), 4, drop_last=True)
    with pytest.raises(ConfigError, match="the training data gives no batch: 2 windows of 8 tokens for batches of 4"):
        train_lm(model, empty, val, opt, 1, 1, 1, "the ", tok, out=None)
