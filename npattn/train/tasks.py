"""Two training tasks for SelfAttention_v1, with data generated in code from a seed.

Batch ``step`` of a task is drawn from ``numpy.random.default_rng([seed, 0, step])``: the data
stream is a function of (seed, step) alone, so a run resumed at step t sees exactly the batches an
uninterrupted run would (the step number *is* the data position). Evaluation data comes from the
separate stream ``[seed, 1, 0]``. Models start like the book's: ``SelfAttention_v1(..., rng=seed)``
draws W_query, W_key, W_value uniform on [0, 1) from ``torch.manual_seed(seed)``'s stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npattn._checks import check_nonnegative_int, check_positive_int, check_seed
from npattn.errors import ConfigError, NpattnError, ShapeError
from npattn.nn.attention import SelfAttention_v1
from npattn.nn.losses import CrossEntropyLoss, Loss, MSELoss
from npattn.nn.module import Module

__all__ = ["TASKS", "SelectiveCopy", "SequenceCrossEntropyLoss", "TeacherStudent", "attention_weights", "make_task"]


def attention_weights(model: Module, x: np.ndarray) -> np.ndarray:
    """The attention-weight matrix of ``model``'s forward on x: (n, n) or (b, n, n), rows sum to 1."""
    seen: list[np.ndarray] = []
    previous = model._recorder  # put back whatever was recording (e.g. npattn.trace), not None

    def record(name: str, arr: np.ndarray) -> None:
        if name == "attn_weights":
            seen.append(arr)
        if previous is not None:
            previous(name, arr)

    model._recorder = record
    try:
        model(x)
    finally:
        model._recorder = previous
    return seen[-1]


class SequenceCrossEntropyLoss(CrossEntropyLoss):
    """Cross-entropy with the classes on the *last* axis: logits (b, n, C), targets (b, n) -> mean
    over all b * n tokens (``CrossEntropyLoss`` on the logits reshaped to (b * n, C))."""

    def forward(self, input: Any, target: Any) -> Any:
        logits = np.asarray(input)
        self._shape = logits.shape
        return super().forward(logits.reshape(-1, logits.shape[-1]), np.asarray(target).reshape(-1))

    def backward(self, grad_output: Any = 1.0) -> np.ndarray:
        return super().backward(grad_output).reshape(self._shape)


class _Task:
    """What every task offers: sizes, a criterion, batches by step, a model, an evaluation."""

    name = ""
    d_in = 0
    d_out = 0
    criterion: Loss

    def __init__(self, seed: int, n_tokens: int, batch_size: int) -> None:
        self.seed = check_seed(seed)
        self.n_tokens = check_positive_int(n_tokens, "n_tokens")
        self.batch_size = check_positive_int(batch_size, "batch_size")

    def config(self) -> dict[str, Any]:
        """The constructor arguments (what a checkpoint stores to rebuild the task)."""
        return {"seed": self.seed, "n_tokens": self.n_tokens, "batch_size": self.batch_size}

    def batch(self, step: int, size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Training batch number ``step``: (x (b, n, d_in), target); ``size`` sequences (None: batch_size).

        Raises:
            ConfigError: ``step`` not an integer >= 0 (a bool, a float), ``size`` not a positive
                integer, or too many sequences for memory.
        """
        step = check_nonnegative_int(step, f"{type(self).__name__}.batch: step")
        size = self.batch_size if size is None else check_positive_int(size, f"{type(self).__name__}.batch: size")
        return self._sized(np.random.default_rng([self.seed, 0, step]), size, "batch")

    def eval_rng(self) -> np.random.Generator:
        """The held-out stream ``[seed, 1, 0]``, which the training batches never use."""
        return np.random.default_rng([self.seed, 1, 0])

    def eval_batch(self, size: int = 1000) -> tuple[np.ndarray, np.ndarray]:
        """Held-out data: (x, target) from ``eval_rng()``. Raises ConfigError: ``size`` not a positive
        integer, or too many sequences for memory."""
        size = check_positive_int(size, f"{type(self).__name__}.eval_batch: size")
        return self._sized(self.eval_rng(), size, "eval_batch")

    def _sized(self, rng: np.random.Generator, size: int, method: str) -> tuple[np.ndarray, np.ndarray]:
        try:
            return self._sample(rng, size)
        except NpattnError:
            raise
        except (MemoryError, ValueError) as err:  # NumPy: "Unable to allocate ..." / "Maximum allowed dimension"
            raise ConfigError(
                f"{type(self).__name__}.{method}: size={size} sequences of {self.n_tokens} tokens do not fit in "
                f"memory ({err})"
            ) from None

    def _sample(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def make_model(self) -> SelfAttention_v1:
        """The student: SelfAttention_v1(d_in, d_out) in float64, weights from TorchGenerator(seed)."""
        return SelfAttention_v1(self.d_in, self.d_out, rng=self.seed, dtype=np.float64)

    def evaluate(self, model: Module) -> dict[str, float]:
        """Scores on the held-out data.

        Raises:
            ShapeError: a model that does not take (b, n, d_in) to (b, n, d_out) of the task.
        """
        x, target = self.eval_batch()
        return {"loss": float(self.criterion(self._outputs(model, x), target))}

    def _outputs(self, model: Module, x: np.ndarray) -> Any:
        """``model(x)``, its sizes checked against the task's: a model of other sizes was blamed on
        ``x`` or on the task's own targets."""
        name = f"{type(self).__name__}.evaluate"
        try:
            out = model(x)
        except ShapeError as exc:
            raise ShapeError(
                f"{name}: the model does not take the task's inputs (d_in={self.d_in}, x of shape {x.shape}); "
                f"task.make_model() builds one that does ({exc})"
            ) from None
        expected = (*x.shape[:-1], self.d_out)
        if np.shape(out) != expected:
            raise ShapeError(
                f"{name}: the model's output has shape {np.shape(out)}, the task scores shape {expected} "
                f"(d_out={self.d_out}); task.make_model() builds a model of the task's sizes"
            )
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v}' for k, v in self.config().items())})"


class TeacherStudent(_Task):
    """Regression onto a fixed teacher: targets = teacher(x), x ~ N(0, 1) of shape (b, n, d_in).

    The teacher is a SelfAttention_v1(d_in, d_out) drawn from TorchGenerator(seed + 1); the
    student starts from TorchGenerator(seed), so they differ. The student has the teacher's form,
    so the loss (MSELoss) can fall towards zero.
    """

    name = "teacher-student"

    def __init__(self, seed: int = 123, d_in: int = 4, d_out: int = 4, n_tokens: int = 6, batch_size: int = 32) -> None:
        super().__init__(seed, n_tokens, batch_size)
        self.d_in = check_positive_int(d_in, "d_in")
        self.d_out = check_positive_int(d_out, "d_out")
        self.teacher = SelfAttention_v1(self.d_in, self.d_out, rng=(self.seed + 1) % 2**32, dtype=np.float64)
        self.criterion = MSELoss()

    def config(self) -> dict[str, Any]:
        return {**super().config(), "d_in": self.d_in, "d_out": self.d_out}

    def _sample(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal((size, self.n_tokens, self.d_in))
        return x, self.teacher(x)


class SelectiveCopy(_Task):
    """Every position must output the class of the one marked token of its sequence.

    A sequence has n tokens; token j carries a class c_j in [0, n_classes) and exactly one token is
    marked. Input features (d_in = n_classes + 2), one row per token::

        [one_hot(c_j) (n_classes) | marker_j (1 if marked, else 0) | 1 (constant)]

    The target at every position i is c_marked; the model's output (d_out = n_classes) is read as
    logits (SequenceCrossEntropyLoss). Why these features: SelfAttention_v1 has no bias, so a
    query cannot be "the same for every token" unless some input feature is the same for every
    token. With the constant feature, W_query's last row gives every query a shared direction u;
    with the marker feature, W_key's marker row gives the marked key a direction v. The score
    q_i . k_j then holds u . v * marker_j for every i: one learnable term that lifts the marked
    token above the rest, whatever the query. W_value's one-hot rows then carry the marked token's
    class into the context vector as logits. The task cannot be solved without mixing tokens:
    position i's own features say nothing about the marked token's class.
    """

    name = "selective-copy"

    def __init__(self, seed: int = 123, n_classes: int = 4, n_tokens: int = 6, batch_size: int = 32) -> None:
        super().__init__(seed, n_tokens, batch_size)
        self.n_classes = check_positive_int(n_classes, "n_classes")
        self.d_in = self.n_classes + 2
        self.d_out = self.n_classes
        self.criterion = SequenceCrossEntropyLoss()

    def config(self) -> dict[str, Any]:
        return {**super().config(), "n_classes": self.n_classes}

    def sample_with_marks(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """x (b, n, n_classes + 2), target (b, n) int, marked (b,) the index of each marked token."""
        b, n, k = size, self.n_tokens, self.n_classes
        classes = rng.integers(0, k, size=(b, n))
        marked = rng.integers(0, n, size=b)
        x = np.zeros((b, n, k + 2))
        x[np.arange(b)[:, None], np.arange(n)[None, :], classes] = 1.0
        x[np.arange(b), marked, k] = 1.0
        x[:, :, k + 1] = 1.0
        target = np.repeat(classes[np.arange(b), marked][:, None], n, axis=1)
        return x, target, marked

    def _sample(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        x, target, _ = self.sample_with_marks(rng, size)
        return x, target

    def evaluate(self, model: Module) -> dict[str, float]:
        """loss, accuracy (argmax == target over every position) and the mean attention weight
        on the marked token (1.0 = every query attends only to it), on 1000 held-out sequences."""
        x, target, marked = self.sample_with_marks(self.eval_rng(), 1000)
        logits = self._outputs(model, x)
        weights = attention_weights(model, x)
        return {
            "loss": float(self.criterion(logits, target)),
            "accuracy": float(np.mean(np.argmax(logits, axis=-1) == target)),
            "attention_on_marked": float(np.mean(weights[np.arange(len(marked)), :, marked])),
        }


TASKS: dict[str, type[_Task]] = {TeacherStudent.name: TeacherStudent, SelectiveCopy.name: SelectiveCopy}


def make_task(name: str, **config: Any) -> _Task:
    """``make_task("selective-copy", seed=123)``; the names are the keys of ``TASKS``.

    Raises:
        ConfigError: an unknown task name.
    """
    if name not in TASKS:
        raise ConfigError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return TASKS[name](**config)
