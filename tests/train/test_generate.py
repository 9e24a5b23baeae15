"""The book's generate: greedy, temperature, top-k, eos, cropping to the context."""

import itertools

import numpy as np
import pytest

from npattn.errors import ConfigError, DTypeError, ShapeError
from npattn.train.generate import generate, sample_next


class Bigram:
    """A stand-in model: the logits of each position depend only on its token (a table)."""

    def __init__(self, table: np.ndarray, context_size: int = 1000) -> None:
        self.table = table
        self.context_size = context_size
        self.seen: list[tuple[int, ...]] = []

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        assert idx.shape[1] <= self.context_size
        self.seen.append(idx.shape)
        return self.table[idx]


def _successor_table(vocab: int) -> np.ndarray:
    table = np.zeros((vocab, vocab))
    table[np.arange(vocab), (np.arange(vocab) + 1) % vocab] = 5.0
    return table


def test_greedy_follows_the_argmax_and_crops_the_context() -> None:
    model = Bigram(_successor_table(7), context_size=3)
    out = generate(model, [[0, 1, 2, 3], [5, 5, 5, 5]], max_new_tokens=5, context_size=3)
    assert out.tolist() == [[0, 1, 2, 3, 4, 5, 6, 0, 1], [5, 5, 5, 5, 6, 0, 1, 2, 3]]
    assert out.dtype == np.int64
    assert all(shape[1] == 3 for shape in model.seen)
    assert generate(model, [[2]], 0, 3).tolist() == [[2]]


def test_eos_stops_before_appending() -> None:
    model = Bigram(_successor_table(7))
    assert generate(model, [[1]], 10, 8, eos_id=4).tolist() == [[1, 2, 3]]
    # a batch stops once every row picks eos: a row that picked it earlier keeps going
    assert generate(model, [[1], [3]], 3, 8, eos_id=4).tolist() == [[1, 2, 3, 4], [3, 4, 5, 6]]
    assert generate(model, [[3], [3]], 3, 8, eos_id=4).tolist() == [[3], [3]]


def test_top_k_and_temperature_sample_the_softmax() -> None:
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]]))
    rows = np.repeat(logits, 20_000, axis=0)
    rng = np.random.default_rng(0)
    picks = sample_next(rows, 1.0, None, rng)
    assert np.allclose(np.bincount(picks, minlength=4) / len(picks), [0.5, 0.3, 0.15, 0.05], atol=0.01)
    picks = sample_next(rows, 1.0, 2, rng)  # top-2: renormalised 0.5 : 0.3
    assert set(np.unique(picks)) == {0, 1}
    assert abs(np.mean(picks == 0) - 0.625) < 0.01
    picks = sample_next(rows, 0.5, None, rng)  # temperature 0.5 squares the probabilities
    p = np.array([0.5, 0.3, 0.15, 0.05]) ** 2
    assert np.allclose(np.bincount(picks, minlength=4) / len(picks), p / p.sum(), atol=0.01)
    assert np.array_equal(sample_next(rows[:5], 3.0, 1, rng), np.zeros(5))  # top_k=1 is greedy
    assert np.array_equal(sample_next(rows[:5], 0.0, None, rng), np.zeros(5))


def test_sampling_is_seeded() -> None:
    table = np.random.default_rng(3).normal(size=(11, 11))
    model = Bigram(table)
    a = generate(model, [[0], [1]], 30, 8, temperature=1.0, top_k=5, rng=123)
    b = generate(model, [[0], [1]], 30, 8, temperature=1.0, top_k=5, rng=123)
    c = generate(model, [[0], [1]], 30, 8, temperature=1.0, top_k=5, rng=124)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    allowed = np.argsort(-table, axis=1)[:, :5]
    for row in a:
        assert all(nxt in allowed[prev] for prev, nxt in itertools.pairwise(row))
    gen = np.random.default_rng(5)
    assert generate(model, [[0]], 5, 8, temperature=0.7, rng=gen).shape == (1, 6)


def test_bad_arguments() -> None:
    model = Bigram(_successor_table(5))
    with pytest.raises(ShapeError, match=r"expected token ids of shape \(batch, n_tokens\), got shape \(3,\)"):
        generate(model, [1, 2, 3], 2, 4)
    with pytest.raises(DTypeError, match="expected integer token ids, got dtype float64"):
        generate(model, [[1.0, 2.0]], 2, 4)
    with pytest.raises(ConfigError, match="max_new_tokens must be an integer >= 0"):
        generate(model, [[1]], -1, 4)
    with pytest.raises(ConfigError, match="context_size must be a positive integer"):
        generate(model, [[1]], 1, 0)
    with pytest.raises(ConfigError, match="temperature must be >= 0"):
        generate(model, [[1]], 1, 4, temperature=-1.0)
    with pytest.raises(ConfigError, match="temperature must be a finite number"):
        generate(model, [[1]], 1, 4, temperature=float("nan"))
    with pytest.raises(ConfigError, match=r"top_k must lie in \[1, vocab=5\], got 6"):
        generate(model, [[1]], 1, 4, top_k=6)
    with pytest.raises(ConfigError, match="top_k must be a positive integer"):
        generate(model, [[1]], 1, 4, top_k=0)
    with pytest.raises(ConfigError, match="eos_id must be None or a token id"):
        generate(model, [[1]], 1, 4, eos_id="x")  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match=r"model\(idx\) must return logits of shape"):
        generate(lambda idx: np.zeros((1, 5)), [[1]], 1, 4)
