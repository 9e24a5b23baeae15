"""Check a user's own attention implementation: ``npattn check FILE.py:NAME``.

The user's attention is either a class (or an instance) with ``W_query``, ``W_key`` and
``W_value`` attributes and a ``forward``/``__call__`` taking x, like the book's
SelfAttention_v1 (NumPy arrays, npattn Parameters, torch Parameters or Linear layers), or a
function ``f(x, W_query, W_key, W_value)`` of NumPy arrays. It runs on the book's input with
the seed-123 weights of ``SelfAttention_v1(3, 2, rng=123)``; the report holds the shape
check, the single-token row check and the diagnosis.

A class is built with the book's call forms: ``NAME(d_in, d_out)``, else (a constructor that
needs them) ``NAME(d_in, d_out, context_length=6, dropout=0.0)``, like CausalAttention. An
attention built that way, or holding a ``mask`` (the book's causal buffer), is causal: it runs
on the book's batch (2, 6, 3) and is checked and diagnosed as causal attention.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import traceback
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from npattn.book import BOOK_TOKENS, book_batch, book_inputs
from npattn.debug.diagnose import Diagnosis, diagnose
from npattn.debug.formulas import WEIGHT_NAMES
from npattn.debug.predict import ShapeCheck, check_shapes, predict_shapes
from npattn.debug.rows import RowCheck, check_rows
from npattn.debug.weights import to_numpy, weights_of
from npattn.errors import ConfigError, NpattnError
from npattn.nn.attention import SelfAttention_v1

__all__ = ["CheckReport", "UserAttention", "book_weights", "check_attention", "load_attention", "run_check"]


def book_weights() -> dict[str, np.ndarray]:
    """The weights of ``SelfAttention_v1(3, 2, rng=123)``: the book's torch.manual_seed(123) draws."""
    return weights_of(SelfAttention_v1(3, 2, rng=123))


def _is_torch(obj: Any) -> bool:
    return any(cls.__module__.split(".")[0] == "torch" for cls in type(obj).__mro__)


def _assign(owner: Any, name: str, W: np.ndarray, label: str) -> None:
    """Put the (d_in, d_out) matrix W into ``owner.<name>``, whatever kind of holder it is."""
    current = getattr(owner, name)
    if hasattr(current, "weight") and not isinstance(current, np.ndarray):  # a Linear: weight is (d_out, d_in)
        _assign(current, "weight", W.T, f"{label}.weight")
        return
    shape = tuple(np.shape(to_numpy(current)))
    if shape != W.shape:
        d_in, d_out = W.shape if name != "weight" else W.shape[::-1]
        raise ConfigError(
            f"{label} has shape {shape}, expected {W.shape} for d_in={d_in}, d_out={d_out}"
            + ("" if shape[-1:] != (d_in,) or d_in == d_out else ": a projection used d_in where d_out was expected")
        )
    if hasattr(current, "copy_"):  # a torch tensor or Parameter
        import torch

        with torch.no_grad():
            current.copy_(torch.from_numpy(np.ascontiguousarray(W)))
    elif hasattr(current, "data") and not isinstance(current, np.ndarray):  # an npattn Parameter
        current.data = W.astype(current.dtype)
    else:
        setattr(owner, name, np.array(W, dtype=np.asarray(current).dtype))


# The book's causal attention is built with context_length and dropout too: check it with no dropout.
BOOK_CONTEXT_LENGTH = len(BOOK_TOKENS)


@dataclass
class UserAttention:
    """A user's attention, callable as ``run(x, weights) -> output`` whatever its kind.

    ``prepare(weights)`` builds it (a class) and loads the weights; it then knows whether the
    attention is ``causal`` and ``built_as`` (the constructor call used, "" if none).
    """

    name: str
    kind: str  # "class", "instance" or "function"
    target: Any
    causal: bool = False
    built_as: str = ""

    def _construct(self, d_in: int, d_out: int) -> Any:
        """The class built with the first of the book's call forms its constructor accepts."""
        forms: list[tuple[Any, ...]] = [(d_in, d_out), (d_in, d_out, BOOK_CONTEXT_LENGTH, 0.0)]
        args = next((form for form in forms if _accepts(self.target, len(form))), forms[0])
        self.built_as = f"{self.name}({', '.join(map(str, args))})"
        try:
            obj = self.target(*args)
        except Exception as exc:
            raise ConfigError(
                f"could not construct {self.built_as}: {exc} (npattn check builds a class as NAME(d_in, d_out) "
                "or, like the book's CausalAttention, NAME(d_in, d_out, context_length, dropout))"
            ) from exc
        self.causal = len(args) == len(forms[1])
        return obj

    def prepare(self, weights: Mapping[str, np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
        """Build the attention (a class), load the (d_in, d_out) ``weights``; returns x -> output."""
        W = {n: np.asarray(weights[n]) for n in WEIGHT_NAMES}
        if self.kind == "function":  # copies: code that edits its arguments cannot change the reference
            return lambda x: to_numpy(self.target(np.array(x), *(np.array(W[n]) for n in WEIGHT_NAMES)))
        obj = self.target
        if self.kind == "class":
            obj = self._construct(*W["W_query"].shape)
            _require_weights(obj, self.name)
        self.causal = self.causal or hasattr(obj, "mask")
        for n in WEIGHT_NAMES:
            _assign(obj, n, W[n], f"{self.name}.{n}")
        if _is_torch(obj):
            import torch

            return lambda x: to_numpy(obj(torch.from_numpy(np.array(x))))
        call = obj if callable(obj) else obj.forward  # a class with forward but no __call__
        return lambda x: to_numpy(call(np.array(x)))

    def run(self, x: np.ndarray, weights: Mapping[str, np.ndarray]) -> np.ndarray:
        """Run on x with the given (d_in, d_out) weights; returns the output as an ndarray."""
        return self.prepare(weights)(x)


def _require_weights(obj: Any, name: str) -> None:
    missing = [n for n in WEIGHT_NAMES if not hasattr(obj, n)]
    if missing:
        raise ConfigError(
            f"{name} has no {', '.join(missing)}: expected a class with W_query, W_key and W_value attributes "
            "and a forward/__call__, or a function of (x, W_query, W_key, W_value)"
        )


def _accepts(func: Callable[..., Any], n_args: int) -> bool:
    """Whether ``func`` (or a class's constructor) can be called with ``n_args`` positional arguments."""
    try:
        inspect.signature(func).bind(*[None] * n_args)
    except TypeError:
        return False
    except ValueError:  # no signature available (a builtin): let the call decide
        return True
    return True


def load_attention(spec: str) -> UserAttention:
    """Import ``NAME`` from ``FILE.py`` (spec ``"FILE.py:NAME"``).

    Raises:
        ConfigError: a spec without ``:NAME``, a missing file, an import that fails, a missing
            name, or an object of the wrong kind (the message says what was expected).
    """
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name:
        raise ConfigError(f"expected FILE.py:NAME (e.g. my_attention.py:SelfAttention), got {spec!r}")
    path = Path(path_text)
    if not path.is_file():
        raise ConfigError(f"no such file: {path_text}")
    module_name = f"_npattn_user_{path.stem}_{uuid.uuid4().hex[:8]}"
    spec_obj = importlib.util.spec_from_file_location(module_name, path)
    if spec_obj is None or spec_obj.loader is None:
        raise ConfigError(f"cannot import {path_text}: not a Python source file")
    module = importlib.util.module_from_spec(spec_obj)
    sys.path.insert(0, str(path.resolve().parent))  # the user's own helper modules next to the file
    try:
        spec_obj.loader.exec_module(module)
    except Exception as exc:
        raise ConfigError(f"importing {path_text} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(path.resolve().parent))
    if not hasattr(module, name):
        defined = sorted(
            k for k, v in vars(module).items() if not k.startswith("_") and callable(v) and v.__module__ == module_name
        )
        raise ConfigError(f"{path_text} defines no {name!r} (it defines: {', '.join(defined) or 'nothing callable'})")
    target = getattr(module, name)
    if inspect.isclass(target):
        return UserAttention(name, "class", target)
    if all(hasattr(target, n) for n in WEIGHT_NAMES) and callable(target):
        return UserAttention(name, "instance", target)
    if callable(target) and _accepts(target, 4):
        return UserAttention(name, "function", target)
    what = "a function that does not take 4 arguments" if callable(target) else f"of type {type(target).__name__}"
    raise ConfigError(
        f"{name} is {what}: "
        "expected a class with W_query, W_key and W_value attributes and a forward/__call__, "
        "or a function of (x, W_query, W_key, W_value)"
    )


@dataclass
class CheckReport:
    """The three checks of ``npattn check``; truthy when the output is correct."""

    name: str
    kind: str
    output: np.ndarray
    shape_check: ShapeCheck
    row_check: RowCheck | None
    row_check_skipped: str
    diagnosis: Diagnosis
    causal: bool = False
    built_as: str = ""

    @property
    def passed(self) -> bool:
        return self.diagnosis.correct

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        what = {"class": "a class", "instance": "an instance", "function": "a function of (x, W_query, W_key, W_value)"}
        if self.causal:
            built = f", built as {self.built_as}" if self.built_as else ""
            lines = [
                f"checking {self.name} ({what[self.kind]}{built}) as causal attention on the book's batch "
                f"(2, 6, 3) with the seed-123 weights (d_out=2)",
                "",
                "output" + (" (first sequence of the batch):" if self.output.ndim == 3 else ":"),
            ]
        else:
            lines = [
                f"checking {self.name} ({what[self.kind]}) on the book's input (6 tokens, d_in=3) "
                "with the seed-123 weights (d_out=2)",
                "",
                "output:",
            ]
        shown = self.output[0] if self.output.ndim == 3 else self.output
        rows = np.atleast_2d(shown) if shown.ndim else np.array([[shown]])
        for i, row in enumerate(rows):
            token = f"{BOOK_TOKENS[i]:<8} " if i < len(BOOK_TOKENS) and rows.shape[0] == len(BOOK_TOKENS) else ""
            lines.append("  " + token + "[" + ", ".join(f"{v: .4f}" for v in np.ravel(row)) + "]")
        lines += ["", "1. shapes: predicted vs actual", str(self.shape_check), ""]
        lines.append("2. " + (str(self.row_check) if self.row_check is not None else self.row_check_skipped))
        lines += ["", "3. " + str(self.diagnosis)]
        return "\n".join(lines)

    __repr__ = __str__


def check_attention(
    attention: UserAttention | str, *, x: np.ndarray | None = None, weights: Mapping[str, Any] | None = None
) -> CheckReport:
    """Run a user's attention (a UserAttention or a ``FILE.py:NAME`` spec) on x (default: the
    book's input) with ``weights`` (default: the seed-123 weights) and check its output.

    Raises:
        ConfigError: from ``load_attention``, or weights the user's object cannot hold.
        NpattnError: whatever the user's code raised, wrapped with its name and message.
    """
    if not isinstance(attention, (str, UserAttention)):
        got = type(attention).__name__
        raise ConfigError(f"check_attention expects a 'FILE.py:NAME' spec or a UserAttention, got {got}")
    user = load_attention(attention) if isinstance(attention, str) else attention
    W = book_weights() if weights is None else weights_of(weights)
    run = user.prepare(W)
    causal = user.causal
    if x is None:
        x = book_batch() if causal else book_inputs()  # the book runs its causal classes on the batch
    try:
        output = np.asarray(run(x))
    except NpattnError:
        raise
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" (at {frames[-1].filename}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""
        raise ConfigError(f"{user.name} raised {type(exc).__name__}: {exc}{where}") from exc
    n, d_in = x.shape[-2:]
    d_out = W["W_query"].shape[1]
    batch = x.shape[0] if x.ndim == 3 else None
    kind = "causal" if causal else "self"
    shape_check = check_shapes(predict_shapes(n, d_in, d_out, batch=batch, kind=kind), output)
    row_check: RowCheck | None = None
    skipped = ""
    if output.shape == (*x.shape[:-1], d_out):
        tokens = BOOK_TOKENS if n == len(BOOK_TOKENS) else None
        row_check = check_rows(x, W, output, causal=causal, tokens=tokens)
    else:
        skipped = f"single-token check: skipped (the output's shape {output.shape} has no row per token to compare)"
    diagnosis = diagnose(x, W, output, causal=causal)
    return CheckReport(user.name, user.kind, output, shape_check, row_check, skipped, diagnosis, causal, user.built_as)


def run_check(spec: str, *, out: TextIO | None = None) -> int:
    """``npattn check FILE.py:NAME``: print the report; returns 0 when correct, 1 when wrong.

    Raises:
        ConfigError: see ``load_attention`` and ``check_attention`` (the CLI prints it, exit 2).
    """
    report = check_attention(spec)
    print(report, file=out or sys.stdout)
    return 0 if report else 1
