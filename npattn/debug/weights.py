"""Weights and outputs of any implementation as NumPy arrays: npattn modules, torch modules, plain
objects, mappings and state dicts."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from difflib import get_close_matches
from typing import Any

import numpy as np

from npattn._checks import as_array, from_tensor
from npattn.debug.formulas import WEIGHT_NAMES
from npattn.errors import ConfigError, DTypeError, ShapeError

__all__ = [
    "ModuleWeights",
    "check_single_head",
    "check_weights",
    "check_weights_and_biases",
    "describe_value",
    "gradient_array",
    "refuse_biases",
    "refuse_unknown_keys",
    "returned_array",
    "to_numpy",
    "weights_of",
]


class ModuleWeights(dict):
    """``weights_of``'s result when what it read does more than the three projections of one head:
    the same dict, plus ``source`` (the class read), ``num_heads`` and ``out_proj`` (its (d_out,
    d_out) weight as x @ W, and its bias or None), so that the checks that model one head, or the
    rows before an output projection, can refuse it rather than judge right code wrong."""

    source: str = ""
    num_heads: int = 1
    out_proj: tuple[np.ndarray, np.ndarray | None] | None = None


def _marked(weights: dict[str, np.ndarray], obj: Any) -> dict[str, np.ndarray]:
    """``weights`` as a ModuleWeights when ``obj`` has heads or an out_proj, else unchanged."""
    heads = getattr(obj, "num_heads", 1) if not isinstance(obj, Mapping) else 1
    heads = heads if isinstance(heads, int) and not isinstance(heads, bool) and heads > 1 else 1
    if isinstance(obj, Mapping):
        weight, bias = obj.get("out_proj.weight"), obj.get("out_proj.bias")
    else:
        layer = getattr(obj, "out_proj", None)
        weight, bias = getattr(layer, "weight", None), getattr(layer, "bias", None)
    if heads == 1 and weight is None:
        return weights
    marked = ModuleWeights(weights)
    # a state dict does not say how many heads its weights are split into: 0, not checked
    marked.source, marked.num_heads = ("state dict", 0) if isinstance(obj, Mapping) else (type(obj).__name__, heads)
    if weight is not None:
        bias_array = None if bias is None else as_array(to_numpy(bias), "out_proj.bias")
        marked.out_proj = (as_array(to_numpy(weight), "out_proj.weight").T, bias_array)
    return marked


def check_single_head(weights: Any, where: str) -> None:
    """Refuse the weights of a module with several heads or an out_proj in a check that models
    one head of attention (``diagnose``).

    Raises:
        ConfigError: naming the module's heads and out_proj and what to use instead.
    """
    if isinstance(weights, ModuleWeights):
        parts = ([f"{weights.num_heads} heads"] if weights.num_heads > 1 else []) + (
            ["an out_proj"] if weights.out_proj is not None else []
        )
        raise ConfigError(
            f"{where} models one head of attention without an output projection; these are the weights "
            f"of a {weights.source or 'module'} with {' and '.join(parts)}: use npattn.check_rows_of(module, x) "
            "(it checks merged_heads, head by head)"
        )


def to_numpy(value: Any) -> np.ndarray:
    """An ndarray from an ndarray, an npattn Parameter, a torch tensor (detached; bfloat16 widened
    to float32 exactly, as the modules take it) or nested lists."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without importing torch
        value = from_tensor(value)
    elif hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    return np.asarray(value)


def returned_array(value: Any, who: str, pair: str = "") -> np.ndarray:
    """``to_numpy`` of what the user's code ``who`` returned, run outside the user's code so that a
    value npattn cannot read is reported as what it is, never as the user's code raising. ``pair``:
    what to check instead when ``who`` has a sibling backward (``userbackward.pair_hint``), said
    when it returned a tuple of arrays.

    Raises:
        DTypeError: naming the returned value (type, and dtype/device for a tensor), why it cannot be
            read, and what was expected.
    """
    try:
        return to_numpy(value)
    except Exception as exc:
        several = isinstance(value, tuple) and any(isinstance(v, np.ndarray) or hasattr(v, "detach") for v in value)
        hint = " (the output alone: a forward that returns (output, cache) is NAME_forward, with NAME_backward)"
        if several and pair:
            hint = f"; {who} returns (output, cache) next to its backward: {pair}"
        raise DTypeError(
            f"{who} returned {describe_value(value)}, which npattn cannot read as an array "
            f"({type(exc).__name__}: {str(exc)[:100]}); expected a real floating ndarray or a CPU torch tensor"
            + (hint if several else "")
        ) from None


def describe_value(value: Any) -> str:
    """``a list``, ``a torch tensor of dtype torch.float32 on meta, shape (6, 2)``, ``a Weird``."""
    kind = type(value).__name__
    if hasattr(value, "detach") and hasattr(value, "dtype"):
        shape = tuple(getattr(value, "shape", ()))
        return f"a torch tensor of dtype {value.dtype} on {getattr(value, 'device', '?')}, shape {shape}"
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    if isinstance(value, tuple) and 0 < len(value) <= 8:  # (out, cache, 1): say what is in it
        parts = [
            f"ndarray {v.shape}" if isinstance(v, np.ndarray) else describe_value(v).split(" ", 1)[1] for v in value
        ]
        return f"{article} {kind} of {len(value)} ({', '.join(parts)})"
    return f"{article} {kind}"


# state-dict keys of the book's attention classes that are not one of the three projections:
# the causal mask buffer and MultiHeadAttention's output projection (read by ``_marked``)
STATE_KEYS = ("mask", "out_proj.weight", "out_proj.bias")


def refuse_unknown_keys(mapping: Mapping[Any, Any], known: Collection[str], what: str, expected: str = "") -> None:
    """Refuse a key of ``mapping`` that is not in ``known``, naming the closest known key (a
    misspelt key would otherwise be ignored and the result silently wrong).

    Raises:
        ConfigError: ``{what}: unknown key 'W_query.bais' (did you mean 'W_query.bias'?); expected ...``.
    """
    unknown = [str(k) for k in mapping if k not in known]
    per_head = [k for k in unknown if k.startswith("heads.")]
    if per_head and all(k.startswith("heads.") for k in unknown if k != "mask"):
        heads = sorted({k.split(".")[1] for k in unknown if k.startswith("heads.")})
        raise ConfigError(
            f"{what}: the keys are per head ({', '.join(f'heads.{h}.' for h in heads)}...): the state dict of a "
            "MultiHeadAttentionWrapper; check the module with check_rows_of(module, x), or one head with the keys "
            "of heads.0 without their 'heads.0.' prefix"
        )
    if unknown:
        hints = [
            f"{k!r} (did you mean {m[0]!r}?)" if (m := get_close_matches(k, list(known), 1)) else repr(k)
            for k in unknown
        ]
        raise ConfigError(
            f"{what}: unknown key {', '.join(hints)}; expected the keys {expected or ', '.join(known)}"
        )


def weight_keys(names: Sequence[str] = WEIGHT_NAMES) -> tuple[str, ...]:
    """The keys a weights mapping may hold: each name (d_in, d_out), ``name.weight`` (d_out, d_in),
    ``name.bias``, and the ``STATE_KEYS`` of a state dict."""
    names = (*names, *(n for n in WEIGHT_NAMES if n not in names))
    return (*names, *(f"{n}.weight" for n in names), *(f"{n}.bias" for n in names), *STATE_KEYS)


def weights_of(obj: Any, names: Sequence[str] = WEIGHT_NAMES) -> dict[str, np.ndarray]:
    """The (d_in, d_out) weight matrices of a module, an object, or a mapping (a state dict), and
    their (d_out,) biases where there are any, under ``"W_query.bias"`` (a state dict's key).

    Accepts for each name: an array or Parameter (used as it is, (d_in, d_out)), or a Linear-like
    layer with ``.weight`` (out_features, in_features), whose transpose is used, and its ``.bias``
    unless None. In a mapping, ``"W_query.weight"`` keys (a state dict of Linear layers) are
    transposed the same way and ``"W_query.bias"`` keys are the biases.

    Raises:
        ConfigError: a weight is missing (the message lists what was found), a mapping names one
            twice (both ``"W_query"`` and ``"W_query.weight"``), or a mapping holds a key that is
            none of these (a misspelt ``"W_query.bais"`` would drop the bias): the error names the
            closest expected key. State-dict buffers (``"mask"``) and ``"out_proj.*"`` are accepted.
    """
    if isinstance(obj, Mapping):
        refuse_unknown_keys(
            obj, weight_keys(names), "weights",
            f"{', '.join(names)} (d_in, d_out), or NAME.weight (d_out, d_in), NAME.bias, and a state dict's "
            f"{', '.join(STATE_KEYS)}",
        )
    out: dict[str, np.ndarray] = {}
    missing = []
    for name in names:
        bias: Any = None
        if isinstance(obj, Mapping):
            if name in obj and f"{name}.weight" in obj:
                raise ConfigError(
                    f"the weights name {name} twice, as {name!r} (d_in, d_out) and as {name + '.weight'!r} "
                    "(d_out, d_in): expected one of the two keys (which one to use would be a guess)"
                )
            if name in obj:
                out[name] = as_array(to_numpy(obj[name]), name)
            elif f"{name}.weight" in obj:
                out[name] = as_array(to_numpy(obj[f"{name}.weight"]), name).T
            else:
                missing.append(name)
            bias = obj.get(f"{name}.bias")
        else:
            attr = getattr(obj, name, None)
            if attr is None:
                missing.append(name)
            elif hasattr(attr, "weight") and not isinstance(attr, np.ndarray):
                out[name] = as_array(to_numpy(attr.weight), f"{name}.weight").T
                bias = getattr(attr, "bias", None)
            else:
                out[name] = as_array(to_numpy(attr), name)
        if bias is not None:
            out[f"{name}.bias"] = as_array(to_numpy(bias), f"{name}.bias")
    if missing:
        have = sorted(map(str, obj)) if isinstance(obj, Mapping) else [a for a in dir(obj) if a.startswith("W_")]
        per_head = hasattr(getattr(obj, "heads", None), "__len__") or any(h.startswith("heads.") for h in have)
        hint = (
            "; its weights are per head (heads.0.W_query, ...): check it with check_rows_of(module), or one "
            "head with weights_of(module.heads[0])"
            if per_head
            else ""
        )
        raise ConfigError(
            f"{type(obj).__name__} has no {', '.join(missing)} (expected {', '.join(names)}; found: "
            f"{', '.join(have[:8]) + (', ...' if len(have) > 8 else '') or 'nothing of the kind'}{hint})"
        )
    if isinstance(obj, ModuleWeights):  # weights_of of weights_of: the same marks
        marked = ModuleWeights(out)
        marked.source, marked.num_heads, marked.out_proj = obj.source, obj.num_heads, obj.out_proj
        return marked
    return _marked(out, obj)


def check_weights(x: Any, weights: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validate x (..., n, d_in) and the three (d_in, d_out) weights; returns float64 copies. For
    the checks that model attention without biases: biases that are not all zero are refused.

    Raises:
        ConfigError: a weight missing, NaN/inf in x or a weight (no check can pass or fail on
            them), a nonzero bias. ShapeError: shapes that do not fit together.
    """
    x64, Ws, biases = check_weights_and_biases(x, weights)
    refuse_biases({f"{name}.bias": b for name, b in zip(WEIGHT_NAMES, biases)})
    return (x64, *Ws)  # type: ignore[return-value]


def refuse_biases(biases: Mapping[str, Any]) -> None:
    """Refuse the ``"W_query.bias"`` ... entries of ``weights_of``'s result that are not all zero,
    for the checks that compute (or hand user code) W_query, W_key and W_value only.

    Raises:
        ConfigError: naming the nonzero biases.
    """
    used = [name for name, b in biases.items() if name.endswith(".bias") and np.any(to_numpy(b))]
    if used:
        raise ConfigError(
            f"the weights hold nonzero biases ({', '.join(used)}): this check computes x @ W_query, "
            "x @ W_key, x @ W_value without biases, so it cannot judge attention that adds them "
            "(check_rows, check_rows_of and diagnose include them; here use qkv_bias=False)"
        )


def all_float64(x: Any, weights: Any) -> bool:
    """Whether x and every weight (a mapping, or what ``weights_of`` takes from a module) are
    float64 arrays: then the output is judged to float64's precision (``tolerance.forward_rtol``)."""
    try:
        mapping = weights if isinstance(weights, Mapping) else weights_of(weights)
        arrays = [to_numpy(x), *map(to_numpy, mapping.values())]
    except Exception:  # the checks that follow say what is wrong with them
        return False
    return all(np.asarray(a).dtype == np.float64 for a in arrays)


def check_weights_and_biases(
    x: Any, weights: Mapping[str, Any]
) -> tuple[np.ndarray, tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """``check_weights`` for the checks that include biases: (x, (W_query, W_key, W_value),
    (b_query, b_key, b_value)) as float64 copies, a missing bias as zeros (d_out,).

    Raises:
        ConfigError: a weight missing, NaN/inf in x, a weight or a bias. ShapeError: shapes that
            do not fit together (a bias must be (d_out,)).
    """
    W = weights_of(weights)
    x64 = np.asarray(as_array(to_numpy(x), "x"), dtype=np.float64)
    if x64.ndim < 2:
        raise ShapeError(f"x: expected shape (n, d_in) or (batch, n, d_in), got {x64.shape}")
    d_in = x64.shape[-1]
    d_out = W["W_query"].shape[-1] if W["W_query"].ndim == 2 else None
    shapes = {W[n].shape for n in WEIGHT_NAMES}
    if len(shapes) == 1 and W["W_query"].ndim == 2 and W["W_query"].shape[0] != d_in:  # the weights agree: x is off
        raise ShapeError(
            f"x: expected shape (..., n, d_in={W['W_query'].shape[0]}) for weights of shape {W['W_query'].shape} "
            f"(d_in, d_out), got {x64.shape}"
        )
    for name in WEIGHT_NAMES:
        w = W[name]
        if w.ndim != 2 or w.shape != (d_in, d_out):
            raise ShapeError(
                f"{name}: expected shape (d_in={d_in}, d_out) with the same d_out for all three weights "
                f"(W_query is {W['W_query'].shape}), got {w.shape}"
            )
        bias = W.get(f"{name}.bias")
        if bias is not None and bias.shape != (d_out,):
            raise ShapeError(f"{name}.bias: expected shape (d_out={d_out},), got {bias.shape}")
    for name, a in (("x", x64), *W.items()):
        finite = int(np.count_nonzero(np.isfinite(a)))
        if finite != a.size:
            raise ConfigError(
                f"{name} holds NaN or inf ({a.size - finite} of {a.size} entries non-finite): "
                "expected finite numbers (nothing can be checked against a non-finite input)"
            )
    Ws = tuple(np.asarray(W[n], dtype=np.float64) for n in WEIGHT_NAMES)
    zeros = np.zeros(d_out or 0)
    biases = tuple(np.asarray(W.get(f"{n}.bias", zeros), dtype=np.float64) for n in WEIGHT_NAMES)
    return x64, Ws, biases


def gradient_array(value: Any, expected_shape: tuple[int, ...]) -> tuple[np.ndarray | None, str]:
    """(the gradient as float64, "") when ``value`` is a real floating or integer array (or a torch
    tensor) of ``expected_shape``; else (None, what it is: "missing", "complex (complex128)",
    "strings (<U1)", "shape (2, 3)", "not an array (ValueError: ...)", ...). Never converts silently
    (a complex gradient keeps its imaginary part out of the check by failing it) and never raises
    for what user code returned (KeyboardInterrupt and the like propagate)."""
    if value is None:
        return None, "missing"
    try:
        arr = value if isinstance(value, np.ndarray) else np.asarray(from_tensor(value))  # bfloat16 widened
    except Exception as exc:
        return None, f"not an array ({type(value).__name__}: {type(exc).__name__}: {str(exc)[:60]})"
    kind = arr.dtype.kind
    if kind == "c":
        return None, f"complex ({arr.dtype}): a gradient of a real loss is real"
    if kind in "US":
        return None, f"strings ({arr.dtype})"
    if kind == "b":
        return None, "booleans (bool)"
    if kind not in "fiu":
        what = type(value).__name__ if isinstance(value, (tuple, list)) or not arr.ndim else "array"
        return None, f"not a numeric array ({what} of dtype {arr.dtype})"
    if arr.shape != tuple(expected_shape):
        return None, f"shape {arr.shape}"
    return np.array(arr, dtype=np.float64), ""
