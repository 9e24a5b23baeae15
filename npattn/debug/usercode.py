"""Check a user's own attention implementation: ``npattn check FILE.py:NAME``.

The user's attention is either a class (or an instance) with ``W_query``, ``W_key`` and
``W_value`` attributes and a ``forward``/``__call__`` taking x, like the book's
SelfAttention_v1 (NumPy arrays, npattn Parameters, torch Parameters or Linear layers), or a
function ``f(x, W_query, W_key, W_value)`` of NumPy arrays. It runs on the book's input with
the seed-123 weights of ``SelfAttention_v1(3, 2, rng=123)``; the report holds the shape
check, the single-token row check and the diagnosis.

A class is built with the book's call forms: ``NAME(d_in, d_out)``, else (a constructor that
needs them) ``NAME(d_in, d_out, context_length=6, dropout=0.0)``, like CausalAttention, or, when
the constructor has a ``num_heads`` parameter, ``NAME(d_in, d_out, context_length=6, dropout=0.0,
num_heads=2)`` like MultiHeadAttention (without an output projection; d_out=4, the weights of
``MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=123)``). An attention built that way, or
holding a ``mask`` (the book's causal buffer), is causal: it runs on the book's batch (2, 6, 3)
and is checked and diagnosed as causal attention.

With a backward (a function pair ``NAME_forward``/``NAME_backward``, or a class with
``backward(d_out)``), the report adds the backward check (``npattn.debug.backcheck``): every
gradient against finite differences of the user's own forward and against npattn's, and the
catalogued backward mistake; a causal class is also checked with dropout=0.2.
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
from types import ModuleType
from typing import Any, TextIO

import numpy as np

from npattn._checks import accepts_positional, as_array
from npattn.book import BOOK_TOKENS, book_batch, book_inputs
from npattn.debug.backcheck import check_backward
from npattn.debug.backward import attention_reference
from npattn.debug.checkreport import CheckReport, second_input_problem
from npattn.debug.diagnose import Diagnosis, Symptom, diagnose
from npattn.debug.formulas import WEIGHT_NAMES
from npattn.debug.kept_inputs import call_keeping_inputs
from npattn.debug.predict import ShapeCheck, check_shapes, predict_shapes
from npattn.debug.rows import RowCheck, check_rows
from npattn.debug.tolerance import matches
from npattn.debug.userbackward import (
    DROPOUT_P,
    dropout_check,
    forward_of,
    kept_random_state,
    object_callables,
    pair_callables,
    pair_hint,
    seeded,
)
from npattn.debug.weights import check_weights, describe_value, returned_array, to_numpy, weights_of
from npattn.errors import ConfigError, DTypeError, NpattnError, ShapeError
from npattn.nn.attention import MultiHeadAttention, SelfAttention_v1

__all__ = [
    "CheckReport",
    "UserAttention",
    "attention_from_module",
    "book_weights",
    "check_attention",
    "load_attention",
    "multihead_weights",
    "run_check",
    "second_shape_inputs",
]


def book_weights() -> dict[str, np.ndarray]:
    """The weights of ``SelfAttention_v1(3, 2, rng=123)``: the book's torch.manual_seed(123) draws."""
    return weights_of(SelfAttention_v1(3, 2, rng=123))


def multihead_weights() -> dict[str, np.ndarray]:
    """The weights of ``MultiHeadAttention(3, 4, 6, 0.0, num_heads=2, rng=123)``: d_out=4, head_dim=2."""
    return weights_of(MultiHeadAttention(3, 4, BOOK_CONTEXT_LENGTH, 0.0, num_heads=NUM_HEADS, rng=123))


SECOND_SHAPE = {"n_tokens": 5, "d_in": 4, "d_out": 3}
"""The second shape every learner's attention is checked at (with ``npattn check``'s defaults):
code right only at the book's sizes (sqrt(2) for d_out=2, six tokens, three inputs) fails there."""
SECOND_SEED = 7


def second_shape_inputs(causal: bool, num_heads: int | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """x and weights of the second shape: n=5, d_in=4, d_out=3 (multi-head: d_out=6, head_dim=3),
    x uniform on [0, 1) in float32 like the book's embeddings, a batch of 2 for causal attention, weights
    as npattn's class draws them (seed ``SECOND_SEED``)."""
    n, d_in, d_out = SECOND_SHAPE["n_tokens"], SECOND_SHAPE["d_in"], SECOND_SHAPE["d_out"]
    rng = np.random.default_rng(SECOND_SEED)
    if num_heads:
        W = weights_of(MultiHeadAttention(d_in, d_out * num_heads, BOOK_CONTEXT_LENGTH, 0.0, num_heads=num_heads,
                                          rng=SECOND_SEED))
        return rng.uniform(0.0, 1.0, (2, n, d_in)).astype(np.float32), W
    x = rng.uniform(0.0, 1.0, (2, n, d_in) if causal else (n, d_in)).astype(np.float32)  # float32, as the book's
    return x, weights_of(SelfAttention_v1(d_in, d_out, rng=SECOND_SEED))


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
NUM_HEADS = 2


@dataclass
class UserAttention:
    """A user's attention, callable as ``run(x, weights) -> output`` whatever its kind.

    ``prepare(weights)`` builds it (a class) and loads the weights; it then knows whether the
    attention is ``causal`` and ``built_as`` (the constructor call used, "" if none).
    """

    name: str
    kind: str  # "class", "instance", "function" or "pair" (NAME_forward and NAME_backward)
    target: Any
    causal: bool = False
    built_as: str = ""
    backward_target: Any = None  # NAME_backward of a pair
    num_heads: int | None = None  # a multi-head class
    obj: Any = None  # the object prepare built or loaded
    note: str = ""  # what was chosen when the file offers more than one thing to check
    pair: str = ""  # a function with a sibling backward: what to check instead (``pair_hint``)

    def _construct(self, d_in: int, d_out: int, dropout: float = 0.0) -> Any:
        """The class built with the first of the book's call forms its constructor accepts."""
        forms: list[tuple[Any, ...]] = [(d_in, d_out), (d_in, d_out, BOOK_CONTEXT_LENGTH, dropout)]
        if self.num_heads:
            forms = [(d_in, d_out, BOOK_CONTEXT_LENGTH, dropout, self.num_heads)]
        args = next((form for form in forms if accepts_positional(self.target, len(form)) is not False), forms[0])
        built_as = f"{self.name}({', '.join(map(str, args))})"
        try:
            obj = self.target(*args)
        except Exception as exc:
            raise ConfigError(
                f"could not construct {built_as}: {exc} (npattn check builds a class as NAME(d_in, d_out) "
                "or, like the book's CausalAttention, NAME(d_in, d_out, context_length, dropout), "
                "or NAME(d_in, d_out, context_length, dropout, num_heads))"
            ) from exc
        if dropout == 0.0:
            self.built_as = built_as
            self.causal = len(args) >= len(forms[-1]) >= 4
        return obj

    @property
    def has_backward(self) -> bool:
        """A function pair, or an object with a ``backward`` of its own (not a torch module)."""
        if self.kind == "pair":
            return True
        return self.obj is not None and callable(getattr(self.obj, "backward", None)) and not _is_torch(self.obj)

    def backward_callables(self) -> tuple[Callable[..., np.ndarray], Callable[..., dict[str, Any]]]:
        """(forward(x, W) -> out, backward(x, W, G) -> grads) for ``check_backward`` (after prepare)."""
        if self.kind == "pair":
            forward, backward = pair_callables(self.target, self.backward_target, self.name)
        else:
            forward, backward = object_callables(self.obj, self.name)
        return seeded(forward), seeded(backward)

    def prepare(self, weights: Mapping[str, np.ndarray]) -> Callable[[np.ndarray], Any]:
        """Build the attention (a class), load the (d_in, d_out) ``weights``; returns x -> what it returns."""
        W = {n: np.asarray(weights[n]) for n in WEIGHT_NAMES}
        if self.kind == "function":
            return lambda x: call_keeping_inputs(self.name, self.target, x, {n: W[n] for n in WEIGHT_NAMES})
        if self.kind == "pair":
            forward = seeded(pair_callables(self.target, self.backward_target, self.name)[0])
            return lambda x: forward(x, {n: w.copy() for n, w in W.items()})
        obj = self.target
        if self.kind == "class":
            obj = self._construct(*W["W_query"].shape)
            _require_weights(obj, self.name)
        self.causal = self.causal or hasattr(obj, "mask")
        self.obj = obj
        for n in WEIGHT_NAMES:
            _assign(obj, n, W[n], f"{self.name}.{n}")
        if getattr(obj, "out_proj", None) is not None:
            self.note = _identity_out_proj(obj, W["W_query"].shape[1], self.name)
        if _is_torch(obj):
            import torch

            return lambda x: obj(torch.from_numpy(np.ascontiguousarray(x)))
        return seeded(forward_of(obj, self.name))

    def run(self, x: np.ndarray, weights: Mapping[str, np.ndarray]) -> np.ndarray:
        """Run on x with the given (d_in, d_out) weights; returns the output as an ndarray."""
        return returned_array(self.prepare(weights)(x), self.name)


def _identity_out_proj(obj: Any, d_out: int, name: str) -> str:
    """Set the object's ``out_proj`` (a Linear or a (d_out, d_out) array) to the identity, bias 0, so
    the heads' merged output is what is compared; returns the note that says so (or that it could not)."""
    out_proj = obj.out_proj
    weight = getattr(out_proj, "weight", None if callable(out_proj) else out_proj)
    try:
        shape = np.shape(to_numpy(weight)) if weight is not None else None
    except Exception:
        shape = None
    if shape != (d_out, d_out):
        return (
            f"note: {name} has an out_proj npattn check cannot set to the identity: npattn check compares "
            "attention without an output projection, so with it the forward cannot match"
        )
    _assign(obj, "out_proj", np.eye(d_out), f"{name}.out_proj")
    bias = getattr(out_proj, "bias", None) if hasattr(out_proj, "weight") else None
    if bias is not None and np.shape(to_numpy(bias)) == (d_out,):
        _assign(out_proj, "bias", np.zeros(d_out), f"{name}.out_proj.bias")
    return (
        f"note: {name} has an out_proj: it was set to the identity (weight I, bias 0), because npattn check "
        "compares attention without an output projection; its own gradient is not checked"
    )


def _require_weights(obj: Any, name: str) -> None:
    missing = [n for n in WEIGHT_NAMES if not hasattr(obj, n)]
    if missing:
        raise ConfigError(
            f"{name} has no {', '.join(missing)}: expected a class with W_query, W_key and W_value attributes "
            "and a forward/__call__, or a function of (x, W_query, W_key, W_value)"
        )


def _has_parameter(func: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(func).parameters
    except ValueError:
        return False


def load_attention(spec: str) -> UserAttention:
    """Import ``NAME`` from ``FILE.py`` (spec ``"FILE.py:NAME"``).

    Raises:
        ConfigError: a spec without ``:NAME``, a missing file, an import that fails, a missing
            name, or an object of the wrong kind (the message says what was expected).
    """
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name:
        raise ConfigError(f"expected FILE.py:NAME (e.g. my_attention.py:SelfAttention), got {spec!r}")
    if ":" in path_text and not Path(path_text).exists():  # "mine.py:good:x": one colon too many
        raise ConfigError(
            f"expected FILE.py:NAME, one function or class after the file's one colon, got {spec!r} "
            f"(no file {path_text!r}; the file is {path_text.partition(':')[0]!r}?)"
        )
    return attention_from_module(_import_file(path_text), name, path_text)


def _import_file(path_text: str) -> ModuleType:
    path = Path(path_text)
    if path.is_dir():
        raise ConfigError(f"{path_text} is a directory, expected a Python file (FILE.py:NAME)")
    if not path.is_file():
        what = "no such file" if not path.exists() else "not a regular file (a device, a FIFO or a socket)"
        raise ConfigError(f"{what}: {path_text}, expected a Python file (FILE.py:NAME)")
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
    return module


def attention_from_module(module: ModuleType, name: str, path_text: str = "") -> UserAttention:
    """``NAME`` of an imported module as a UserAttention (see ``load_attention``).

    Raises:
        ConfigError: a missing name, or an object of the wrong kind.
    """
    path_text = path_text or str(getattr(module, "__file__", module.__name__))
    pair = [getattr(module, f"{name}_{part}", None) for part in ("forward", "backward")]
    if all(callable(f) for f in pair):
        note = (
            f"note: {path_text} defines {name} as well as {name}_forward and {name}_backward; the pair is "
            f"checked (it has the backward), {name} itself is not: give one of them another name to check the other"
            if hasattr(module, name)
            else ""
        )
        return UserAttention(name, "pair", pair[0], backward_target=pair[1], note=note)
    if not hasattr(module, name):
        defined = sorted(
            k
            for k, v in vars(module).items()
            if not k.startswith("_") and callable(v) and getattr(v, "__module__", None) == module.__name__
        )
        raise ConfigError(f"{path_text} defines no {name!r} (it defines: {', '.join(defined) or 'nothing callable'})")
    target = getattr(module, name)
    if inspect.isclass(target):
        multihead = _has_parameter(target, "num_heads")
        return UserAttention(name, "class", target, num_heads=NUM_HEADS if multihead else None)
    runs = callable(target) or callable(getattr(target, "forward", None))
    if all(hasattr(target, n) for n in WEIGHT_NAMES) and runs:
        return UserAttention(name, "instance", target)
    if callable(target) and accepts_positional(target, 4) is not False:
        return UserAttention(name, "function", target, pair=pair_hint(module, name, path_text))
    what = "a function that does not take 4 arguments" if callable(target) else f"of type {type(target).__name__}"
    raise ConfigError(
        f"{name} is {what}: "
        "expected a class with W_query, W_key and W_value attributes and a forward/__call__, "
        "or a function of (x, W_query, W_key, W_value)"
    )


def check_attention(
    attention: UserAttention | str, *, x: np.ndarray | None = None, weights: Mapping[str, Any] | None = None
) -> CheckReport:
    """Run a user's attention (a UserAttention or a ``FILE.py:NAME`` spec) on x (default: the
    book's input) with ``weights`` (default: the seed-123 weights) and check its output.

    Raises:
        ConfigError: ``attention`` of another kind; from ``load_attention``; weights the user's object
            cannot hold; x or the weights holding NaN or inf.
        ShapeError, DTypeError: x that does not fit the weights (checked before the user's code runs);
            an output that is not real numbers (complex, strings, objects).
        NpattnError: whatever the user's code raised, wrapped with its name and message.
    """
    if not isinstance(attention, (UserAttention, str)):
        raise ConfigError(
            "check_attention: expected a 'FILE.py:NAME' spec or a UserAttention "
            f"(npattn.debug.usercode.attention_from_module(module, NAME)), got {type(attention).__name__}"
        )
    user = load_attention(attention) if isinstance(attention, str) else attention
    # The second shape's inputs are made before the user's code runs (it may patch NumPy).
    second = {causal: second_shape_inputs(causal, user.num_heads) for causal in (False, True)}
    with kept_random_state():
        report = _check(user, x, weights)
    if x is None and weights is None and user.kind != "instance":  # an instance has its sizes fixed
        x2, W2 = second[report.causal]
        report.second_shape = "n={}, d_in={}, d_out={}".format(x2.shape[-2], *W2["W_query"].shape)
        try:
            with kept_random_state():
                report.second = _check(user, x2, W2, with_dropout=False)
        except NpattnError as exc:
            report.second_error = str(exc)
        except Exception as exc:  # npattn's own code, after the user's code changed what it calls
            report.second_error = f"{user.name} left npattn unable to run ({type(exc).__name__}: {exc})"
    return report


def _check(
    user: UserAttention, x: np.ndarray | None, weights: Mapping[str, Any] | None, *, with_dropout: bool = True
) -> CheckReport:
    if weights is not None:
        W = weights_of(weights)
    else:
        W = multihead_weights() if user.num_heads else book_weights()
    # x and the weights are checked before any of the user's code runs (without x: the weights alone)
    check_weights(x if x is not None else np.zeros((1, np.shape(W["W_query"])[0])), W)
    run = user.prepare(W)
    causal = user.causal
    if x is None:
        x = book_batch() if causal else book_inputs()  # the book runs its causal classes on the batch
    x = as_array(to_numpy(x), "x")  # real numbers, a float dtype kept (ints and bools become float64)
    check_weights(x, W)
    if user.num_heads and x.ndim != 3:
        raise ShapeError(f"x: multi-head attention is checked on a batch (batch, n, d_in), got shape {x.shape}")
    try:
        returned = run(np.array(x))  # a copy: the user's code may write into its input
    except NpattnError:
        raise
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" (at {frames[-1].filename}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""
        raise ConfigError(f"{user.name} raised {type(exc).__name__}: {exc}{where}") from exc
    if user.pair and isinstance(returned, tuple):  # (out, cache) of arrays that stack: never read as one array
        said = f"{user.name} returned {describe_value(returned)}, expected the output alone (it returns (output, cache)"
        raise DTypeError(f"{said} next to its backward): {user.pair}")
    output = returned_array(returned, user.name, user.pair)  # npattn's conversion, outside the user's code
    if output.dtype.kind not in "fiu":  # never compared after a silent conversion (complex, strings, objects)
        what = "None (a missing return?)" if returned is None else f"an output of dtype {output.dtype}"
        raise DTypeError(f"{user.name} returned {what}, expected a real floating array")
    n, d_in = x.shape[-2:]
    d_out = W["W_query"].shape[1]
    batch = x.shape[0] if x.ndim == 3 else None
    kind = "causal" if causal else "self"
    if user.num_heads:
        prediction = predict_shapes(n, d_in, d_out, batch=batch, num_heads=user.num_heads, kind="multihead")
    else:
        prediction = predict_shapes(n, d_in, d_out, batch=batch, kind=kind)
    shape_check = check_shapes(prediction, output)
    row_check: RowCheck | None = None
    skipped = ""
    if user.num_heads:
        skipped = "single-token check: skipped for multi-head attention (the output is compared as a whole below)"
        diagnosis = _multihead_diagnosis(x, W, output, user.num_heads, shape_check)
    elif output.shape == (*x.shape[:-1], d_out):
        row_check = check_rows(x, W, output, causal=causal, tokens=BOOK_TOKENS if n == len(BOOK_TOKENS) else None)
    else:
        skipped = f"single-token check: skipped (the output's shape {output.shape} has no row per token to compare)"
    if not user.num_heads:
        diagnosis = diagnose(x, W, output, causal=causal)
    report = CheckReport(
        user.name, user.kind, output, shape_check, row_check, skipped, diagnosis, causal, user.built_as,
        num_heads=user.num_heads, note=user.note,
    )
    if output.dtype.kind == "f" and output.dtype.itemsize < 4:  # a float16 output: about 3 digits
        half = (
            f"note: {user.name} returned {output.dtype} (about 3 significant digits): the check allows float16's "
            "rounding (0.05% of each column's largest value) and can judge no finer; return float32 or float64"
        )
        report.note = f"{report.note}\n{half}" if report.note else half
    if report.diagnosis.correct and set(W) == set(WEIGHT_NAMES):
        report.stale = second_input_problem(run, user.name, x, W, causal=causal, num_heads=user.num_heads)
    if user.has_backward:
        title = "4. backward: loss = sum(output * G), G random normal (seed 0), float64"
        forward, backward = user.backward_callables()
        report.backward = check_backward(
            forward, backward, x, W, name=user.name, title=title, causal=causal, num_heads=user.num_heads
        )
    forward_only = report.diagnosis.correct and not _is_torch(user.obj)  # torch's dropout: not np.random's
    if causal and user.kind == "class" and with_dropout and (user.has_backward or forward_only):
        obj = user._construct(d_in, d_out, dropout=DROPOUT_P)
        if getattr(obj, "out_proj", None) is not None:
            _identity_out_proj(obj, d_out, user.name)
        report.dropout, report.dropout_note = dropout_check(
            obj, user.name, x, W, num_heads=user.num_heads, backward_too=user.has_backward
        )
    return report


def _multihead_diagnosis(
    x: np.ndarray, W: Mapping[str, np.ndarray], output: np.ndarray, num_heads: int, shape_check: ShapeCheck
) -> Diagnosis:
    """The output against npattn's multi-head causal attention (no catalogue of forward mistakes)."""
    x64 = np.asarray(x, dtype=np.float64)
    expected, _ = attention_reference(x64, {n: np.asarray(w, np.float64) for n, w in W.items()}, causal=True,
                                      num_heads=num_heads)
    out = np.asarray(output, dtype=np.float64)
    symptoms: list[Symptom] = []
    max_diff = None
    if out.shape != expected.shape:
        symptoms.append(Symptom("shape_mismatch", f"output shape {out.shape}, expected {expected.shape}"))
    else:
        with np.errstate(invalid="ignore"):
            max_diff = float(np.nanmax(np.where(np.isfinite(out), np.abs(out - expected), np.inf)))
    if not np.all(np.isfinite(out)):
        symptoms.append(Symptom("non_finite", "the output holds NaN or inf"))
    correct = matches(out, expected)
    return Diagnosis(
        correct, (), tuple(symptoms), (), max_diff, expected, out, shape_check, True,
        label=f"multi-head causal attention, {num_heads} heads, no output projection",
    )


def run_check(spec: str, *, out: TextIO | None = None) -> int:
    """``npattn check FILE.py:NAME``: print the report; returns 0 when correct, 1 when wrong.

    Raises:
        ConfigError: see ``load_attention`` and ``check_attention`` (the CLI prints it, exit 2).
    """
    report = check_attention(spec)
    print(report, file=out or sys.stdout)
    return 0 if report else 1
