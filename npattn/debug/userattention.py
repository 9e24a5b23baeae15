"""A user's attention as ``UserAttention``: found in ``FILE.py:NAME``, built, given weights, run.

``load_attention("FILE.py:NAME")`` imports the file and ``attention_from_module`` takes NAME from
it: a class, an instance (``W_query``, ``W_key``, ``W_value`` and a ``forward``/``__call__``), a
function ``f(x, W_query, W_key, W_value)`` or a function pair ``NAME_forward``/``NAME_backward``.
``UserAttention.prepare(weights)`` builds a class with the book's call forms (``NAME(d_in, d_out)``,
``NAME(d_in, d_out, context_length, dropout)`` or with ``num_heads`` too), loads the (d_in, d_out)
weights into whatever holds them (NumPy arrays, npattn or torch Parameters, Linear layers) and
returns the attention as a function of x. ``npattn.debug.usercode`` checks what it returns.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from npattn._checks import accepts_positional
from npattn.book import BOOK_TOKENS
from npattn.debug.formulas import WEIGHT_NAMES
from npattn.debug.kept_inputs import call_keeping_inputs
from npattn.debug.userbackward import forward_of, object_callables, pair_callables, pair_hint, seeded
from npattn.debug.weights import returned_array, to_numpy
from npattn.errors import ConfigError

__all__ = ["UserAttention", "attention_from_module", "load_attention"]

# The book's causal attention is built with context_length and dropout too: check it with no dropout.
BOOK_CONTEXT_LENGTH = len(BOOK_TOKENS)
NUM_HEADS = 2


def _is_torch(obj: Any) -> bool:
    return any(cls.__module__.split(".")[0] == "torch" for cls in type(obj).__mro__)


def _uses_torch(obj: Any) -> bool:
    """A torch module, or an object whose W_query, W_key or W_value is a torch tensor, Parameter or Linear."""
    holders = [getattr(obj, n, None) for n in WEIGHT_NAMES]
    return _is_torch(obj) or any(_is_torch(h) or _is_torch(getattr(h, "weight", None)) for h in holders)


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
        tried = forms[::-1] if _takes_context_length(self.target) else forms  # the book's causal signature
        args = next((form for form in tried if accepts_positional(self.target, len(form)) is not False), forms[0])
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
            self.causal = len(args) >= 4
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
        if _uses_torch(obj) and callable(getattr(obj, "backward", None)):
            raise ConfigError(
                f"{self.name} is a torch class with a backward() of its own: npattn check checks a hand-written "
                "backward in NumPy (it loads float64 NumPy weights into W_query, W_key and W_value) and a torch "
                "class forward only (autograd is its backward); remove backward() to check the forward, or write "
                "the class with NumPy arrays to check both"
            )
        self.obj = obj
        for n in WEIGHT_NAMES:
            _assign(obj, n, W[n], f"{self.name}.{n}")
        self.note = neutral_extras(obj, W["W_query"].shape[1], self.name)
        if _is_torch(obj):
            import torch

            return lambda x: obj(torch.from_numpy(np.ascontiguousarray(x)))
        forward = seeded(forward_of(obj, self.name))
        return _tensor_if_refused(forward) if _uses_torch(obj) else forward

    def run(self, x: np.ndarray, weights: Mapping[str, np.ndarray]) -> np.ndarray:
        """Run on x with the given (d_in, d_out) weights; returns the output as an ndarray."""
        return returned_array(self.prepare(weights)(x), self.name)


def _tensor_if_refused(forward: Callable[[Any], Any]) -> Callable[[np.ndarray], Any]:
    """A class of one's own holding torch weights: run on the NumPy array, as any class, and where
    that raises, on a torch tensor (its layers take tensors: ``self.W_query(x)``); the first call's
    choice holds for the calls after it."""
    takes: dict[str, bool] = {}  # "tensor": what the first call settled

    def run(x: np.ndarray) -> Any:
        import torch

        tensor = torch.from_numpy(np.ascontiguousarray(x))
        if "tensor" in takes:
            return forward(tensor if takes["tensor"] else np.array(x))
        try:
            out = forward(np.array(x))
        except Exception as numpy_refused:
            try:
                out = forward(tensor)
            except Exception:
                raise numpy_refused from None
            takes["tensor"] = True
            return out
        takes["tensor"] = False
        return out

    return run


def neutral_extras(obj: Any, d_out: int, name: str) -> str:
    """What npattn check's reference lacks, made neutral on the built object: the biases of Linear
    projections (``qkv_bias=True``) set to 0, an ``out_proj`` to the identity; returns the notes that
    say so ("" when there is neither)."""
    notes = []
    biased = [n for n in WEIGHT_NAMES if _linear_bias(getattr(obj, n, None)) is not None]
    for n in biased:
        layer = getattr(obj, n)
        _assign(layer, "bias", np.zeros(np.shape(to_numpy(_linear_bias(layer)))), f"{name}.{n}.bias")
    if biased:
        notes.append(
            f"note: {name} has biases in {', '.join(biased)}: they were set to 0, because npattn check compares "
            "attention without biases (x @ W_query, ...); their gradients are not checked"
        )
    if getattr(obj, "out_proj", None) is not None:
        notes.append(_identity_out_proj(obj, d_out, name))
    return "\n".join(notes)


def _linear_bias(layer: Any) -> Any:
    """The bias of a Linear-like projection (npattn's or torch's), or None (none, or a bare array)."""
    if layer is None or isinstance(layer, np.ndarray) or not hasattr(layer, "weight"):
        return None
    return getattr(layer, "bias", None)


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


def _takes_context_length(cls: Any) -> bool:
    """A constructor with a parameter named context_length (the book's CausalAttention), even with a default."""
    try:
        return "context_length" in inspect.signature(cls).parameters
    except (TypeError, ValueError):  # no signature to read
        return False


def _import_file(path_text: str) -> ModuleType:
    path = Path(path_text)
    if path.is_dir():
        raise ConfigError(f"{path_text!r} is a directory, expected a Python file (FILE.py:NAME)")
    if not path.is_file():
        what = "no such file" if not path.exists() else "not a regular file (a device, a FIFO or a socket)"
        raise ConfigError(f"{what}: {path_text!r}, expected a Python file (FILE.py:NAME)")
    module_name = f"_npattn_user_{path.stem}_{uuid.uuid4().hex[:8]}"
    spec_obj = importlib.util.spec_from_file_location(module_name, path)
    if spec_obj is None or spec_obj.loader is None:
        raise ConfigError(f"cannot import {path_text}: not a Python source file")
    module = importlib.util.module_from_spec(spec_obj)
    folder = str(path.resolve().parent)  # resolved once: the file's code may change the current folder
    sys.path.insert(0, folder)  # the user's own helper modules next to the file
    try:
        spec_obj.loader.exec_module(module)
    except Exception as exc:
        raise ConfigError(f"importing {path_text} failed: {type(exc).__name__}: {exc}") from exc
    except SystemExit as exc:  # the file's own top level, not the function it names (which was blamed)
        raise ConfigError(
            f"importing {path_text} called sys.exit({exc.code!r}) before its functions could be checked; keep "
            "script code under `if __name__ == '__main__':`"
        ) from None
    finally:
        if isinstance(sys.path, list) and folder in sys.path:  # unless the file's code removed it, or sys.path
            sys.path.remove(folder)
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
