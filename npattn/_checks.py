"""Input validation shared by every layer: clear errors instead of broadcasting tracebacks."""

from __future__ import annotations

import functools
import inspect
import math
import os
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from npattn._scalars import (
    check_bool,
    check_finite,
    check_nonnegative_int,
    check_positive_int,
    check_probability,
    check_seed,
    finite_float,
    shown,
)
from npattn.errors import ConfigError, DTypeError, ShapeError

__all__ = [
    "as_array",
    "as_batched_input",
    "as_features",
    "as_input",
    "as_number",
    "cast",
    "check_allocation",
    "check_bool",
    "check_bytes",
    "check_finite",
    "check_float_dtype",
    "check_grad_output",
    "check_int64_ids",
    "check_nonnegative_int",
    "check_positive_int",
    "check_probability",
    "check_seed",
    "device_name",
    "finite_float",
    "grad_problem",
    "plain",
    "refuse_masked",
    "shown",
    "stage_arrays",
]

_F = TypeVar("_F", bound=Callable[..., Any])


def as_array(value: Any, name: str, dtype: np.dtype | type | None = None) -> np.ndarray:
    """Convert ``value`` (ndarray or nested lists of numbers) to a real floating ndarray.

    A PyTorch tensor (anything with ``detach``, ``cpu`` and ``numpy`` methods; torch is never
    imported) is taken as ``tensor.detach().cpu().numpy()``, so one that requires grad works too.
    Integers and booleans are accepted like NumPy would and converted to ``dtype``
    (default float64 for non-float input; float input keeps its dtype when ``dtype`` is None).

    Raises:
        ShapeError: ragged nested lists.
        DTypeError: complex, object, string or other non-numeric data; a masked array with
            masked entries (``refuse_masked``).
    """
    if value is None:
        raise DTypeError(f"{name}: expected a real numeric array, got None")
    if not isinstance(value, np.ndarray):
        value = from_tensor(value, name)
        try:
            arr = np.asarray(value)
        except ValueError as exc:  # ragged lists in NumPy >= 1.24
            raise ShapeError(f"{name}: could not build an array from a ragged sequence ({exc})") from None
    else:
        arr = value
        if type(arr) is not np.ndarray:
            arr = plain(arr, name)
    if arr.dtype == object:
        raise DTypeError(
            f"{name}: expected a real numeric array, got dtype object "
            "(ragged lists or non-numbers); build it with np.asarray(..., dtype=np.float32)"
        )
    if arr.dtype.kind not in "biuf":
        raise DTypeError(f"{name}: expected a real numeric array (float, int or bool), got dtype {arr.dtype}")
    if dtype is not None:
        return cast(arr, dtype, name)
    if arr.dtype.kind != "f":
        return arr.astype(np.float64)
    return arr


def cast(arr: np.ndarray, dtype: np.dtype | type, name: str, refuse_underflow: bool = False) -> np.ndarray:
    """``arr`` in ``dtype`` (no copy when it has it).

    Raises:
        DTypeError: a finite value the dtype cannot hold (1e39 into float32, 70000 into float16),
            which the cast would turn into inf; with ``refuse_underflow`` (a module's input or
            upstream gradient, not a ``.grad``, where rounding to 0 is a zero update as in torch),
            nonzero values that all underflow to 0 (1e-50 into float32).
    """
    if arr.dtype == dtype or np.can_cast(arr.dtype, dtype, "safe"):  # nothing can overflow
        return arr.astype(dtype, copy=False)
    with np.errstate(over="ignore"):
        out = arr.astype(dtype, copy=False)
    if out.dtype.kind == "f" and np.isinf(out).any():
        overflow = np.isinf(out) & np.isfinite(arr)
        if overflow.any():
            largest = float(np.max(np.abs(arr[overflow].astype(np.float64))))
            raise DTypeError(
                f"{name}: {int(overflow.sum())} of {arr.size} entries overflow {out.dtype} (largest magnitude "
                f"{largest:.3g}), the dtype it is computed in; they would become inf "
                f"(convert the model with .to(np.float64), or scale the values)"
            )
    if refuse_underflow and out.dtype.kind == "f" and out.size and not out.any() and arr.any():  # all underflowed
        largest = float(np.max(np.abs(arr.astype(np.float64))))
        raise DTypeError(
            f"{name}: every nonzero entry underflows {out.dtype} (largest magnitude {largest:.3g}), the dtype it is "
            "computed in; they would all become 0 (convert the model with .to(np.float64), or scale the values)"
        )
    return out


def refuse_masked(value: Any, name: str) -> None:
    """A NumPy masked array with masked entries is refused: npattn would compute with the values
    under its mask as if they were there (a masked array with nothing masked is taken as its data).

    Raises:
        DTypeError: naming how many entries are masked and what to pass instead.
    """
    if isinstance(value, np.ma.MaskedArray) and np.ma.is_masked(value):
        count = int(np.count_nonzero(np.ma.getmaskarray(value)))
        raise DTypeError(
            f"{name}: a masked array with {count} of {value.size} entries masked; npattn does not read "
            f"masks of masked arrays (it would use the values under them): pass {name}.filled(value), "
            "or for attention use the mask argument"
        )


def plain(value: np.ndarray, name: str) -> np.ndarray:
    """An ndarray subclass read as its base ndarray (a view, ``np.asarray``): np.matrix's ``*`` is
    the matrix product and its reductions keep two axes, so the stages would compute other numbers
    with it; np.memmap and the like are just their values. A masked array with masked entries is
    refused (``refuse_masked``). An exact ndarray is returned as it is.

    Raises:
        DTypeError: a masked array with masked entries.
    """
    if type(value) is np.ndarray:
        return value
    refuse_masked(value, name)
    return np.asarray(value)


def from_tensor(value: Any, name: str = "") -> Any:
    """``value.detach().cpu().numpy()`` for a torch tensor (duck-typed), else ``value`` unchanged.
    A bfloat16 tensor, which NumPy has no dtype for, is widened to float32 first (exactly).

    Raises:
        DTypeError: a tensor without values to read: on the meta device, or not dense (sparse,
            mkldnn); the message starts with ``name`` when given.
    """
    if all(callable(getattr(value, method, None)) for method in ("detach", "cpu", "numpy")):
        where = f"{name}: " if name else ""
        if getattr(value, "is_meta", False) is True:
            raise DTypeError(
                f"{where}expected a tensor with values, got a tensor of shape {tuple(value.shape)} on the meta "
                "device (it has no data); create it on a real device, e.g. torch.empty(..., device='cpu')"
            )
        layout = str(getattr(value, "layout", "torch.strided"))
        if layout != "torch.strided":
            raise DTypeError(
                f"{where}expected a dense tensor (layout torch.strided), got layout {layout}; convert it with "
                "tensor.to_dense()"
            )
        value = value.detach().cpu()
        if str(getattr(value, "dtype", "")) == "torch.bfloat16" and callable(getattr(value, "float", None)):
            value = value.float()
        return value.numpy()
    return value


def as_number(value: Any) -> Any:
    """A 0-d array, NumPy scalar or 0-d torch tensor as the Python number it holds (torch takes a
    tensor learning rate, a tensor scale); anything else unchanged, for the caller's check to describe."""
    value = from_tensor(value)
    if isinstance(value, (np.ndarray, np.generic)) and value.ndim == 0 and value.dtype.kind in "iuf":
        return value.item()
    return value


def as_input(x: Any, d_in: int, dtype: np.dtype | type, name: str = "x") -> np.ndarray:
    """Validate an attention input: (n, d_in) or (b, n, d_in), converted to ``dtype`` (no copy when
    it has it: the stage that reads x in backward keeps its own copy, ``functional.project_forward``).

    Raises:
        ShapeError: wrong rank or last dimension not ``d_in``.
        DTypeError: non-numeric data.
    """
    arr = as_array(x, name)
    if arr.ndim not in (2, 3):
        raise ShapeError(
            f"{name}: expected shape (n, d_in={d_in}) or (batch, n, d_in={d_in}), "
            f"got a {arr.ndim}-D array of shape {arr.shape}"
        )
    if arr.shape[-1] != d_in:
        raise ShapeError(
            f"{name}: expected last dimension d_in={d_in}, got shape {arr.shape} (last dimension {arr.shape[-1]})"
        )
    return cast(arr, dtype, name, refuse_underflow=True)


def as_batched_input(x: Any, d_in: int, dtype: np.dtype | type, name: str = "x") -> np.ndarray:
    """Validate a batched attention input: exactly (b, n, d_in), converted to ``dtype``.

    Raises:
        ShapeError: wrong rank (a single (n, d_in) sequence included) or last dimension not ``d_in``.
        DTypeError: non-numeric data.
    """
    arr = as_input(x, d_in, dtype, name)
    if arr.ndim != 3:
        raise ShapeError(
            f"{name}: expected a batch of shape (batch, n, d_in={d_in}), got shape {arr.shape}; "
            f"add a batch axis with x[None] for a single sequence"
        )
    return arr


def as_features(x: Any, features: int, dtype: np.dtype | type, name: str = "x") -> np.ndarray:
    """Validate a Linear input: shape (..., features) with at least one axis, converted to ``dtype``
    (no copy when it has it, as in ``as_input``).

    Raises:
        ShapeError: a 0-D array or a last dimension other than ``features``.
        DTypeError: non-numeric data.
    """
    arr = as_array(x, name)
    if arr.ndim == 0 or arr.shape[-1] != features:
        raise ShapeError(f"{name}: expected shape (..., in_features={features}), got shape {arr.shape}")
    return cast(arr, dtype, name, refuse_underflow=True)


def check_grad_output(
    grad: Any, expected_shape: tuple[int, ...], dtype: np.dtype, name: str = "grad_output"
) -> np.ndarray:
    """Validate an upstream gradient: it must have exactly the forward output's shape."""
    arr = as_array(grad, name)
    if arr.shape != tuple(expected_shape):
        raise ShapeError(
            f"{name}: expected shape {tuple(expected_shape)} (the shape of the last forward output: backward "
            f"differentiates the most recent forward call), got {arr.shape}"
        )
    return cast(arr, dtype, name, refuse_underflow=True)


def check_float_dtype(dtype: Any, name: str = "dtype") -> np.dtype:
    """Return ``np.dtype(dtype)`` if it is float16, float32 or float64 (a torch dtype such as
    ``torch.float64`` names its NumPy twin), else raise DTypeError."""
    text = str(dtype)
    if type(dtype).__name__ == "dtype" and text.startswith("torch."):  # torch.float64 -> "float64"
        dtype = text[len("torch.") :]
    try:
        resolved = np.dtype(dtype) if dtype is not None else None
    except TypeError:
        resolved = None
    if resolved is None or resolved.kind != "f" or resolved.itemsize > 8:
        got = repr(dtype) if resolved is None else resolved.name
        raise DTypeError(f"{name} must be a floating dtype such as np.float32 or np.float64, got {got}")
    return resolved


def physical_memory() -> int:
    """This machine's physical memory in bytes (2**63 where the operating system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 2**63


def check_allocation(shape: tuple[int, ...], dtype: Any, what: str, count: int = 1) -> None:
    """Refuse, before anything is allocated, ``count`` arrays of ``shape`` and ``dtype`` that need more
    bytes than this machine has memory (NumPy would fail with "array is too big", or the process
    would be killed while filling them). ``what`` names them, with the argument that sized them.

    Raises:
        ConfigError: naming ``what``, the bytes needed and the memory there is.
    """
    nbytes = count * math.prod(shape) * np.dtype(dtype).itemsize
    arrays = f"{count:,} arrays of shape {shape}" if count != 1 else f"shape {shape}"
    check_bytes(nbytes, f"{what} ({arrays}, {np.dtype(dtype)})")


def check_bytes(nbytes: int, what: str) -> None:
    """``check_allocation`` for arrays counted by the caller: ``what`` would need ``nbytes`` bytes."""
    limit = physical_memory()
    if nbytes > limit:
        raise ConfigError(
            f"{what} would need {nbytes:,} bytes ({_human(nbytes)}), more than this machine's memory ({_human(limit)})"
        )


def _human(nbytes: int) -> str:
    """``1.5 GiB``, ``977 KiB``: bytes in the largest binary unit that keeps a number >= 1."""
    value, unit = float(nbytes), "bytes"
    for name in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, name
    return f"{value:,.1f} {unit}"


def accepts_positional(func: Any, n_args: int) -> bool | None:
    """Whether ``func`` (or a class's constructor) can be called with ``n_args`` positional
    arguments; None when it has no signature to tell (a builtin: the call decides)."""
    try:
        inspect.signature(func).bind(*[None] * n_args)
    except TypeError:
        return False
    except ValueError:
        return None
    return True


def repeated_keys(pairs: list[tuple[str, Any]]) -> list[str]:
    """The keys a JSON object's ``pairs`` (``json.loads(object_pairs_hook=...)``) give more than once,
    sorted: ``json`` itself keeps the last of repeated keys without a word."""
    keys = [key for key, _ in pairs]
    return sorted({key for key in keys if keys.count(key) > 1})


def grad_problem(grad: Any, data: np.ndarray, shape: tuple[int, ...] | None = None) -> str | None:
    """Why a Parameter's ``grad`` cannot take ``+= d`` for a gradient d of ``shape`` (None if it can).

    ``grad`` must be None (backward starts it from zeros) or a writeable ndarray of ``data``'s
    shape and dtype; ``shape`` must be ``data``'s (the parameter was not replaced since forward).
    """
    if grad is None:
        return None if shape is None or shape == data.shape else f"cannot take a gradient of shape {shape}"
    if type(grad) is np.ndarray and grad.shape == data.shape and grad.dtype == data.dtype and grad.flags.writeable:
        if overlaps_itself(grad):
            return (
                "overlaps itself (entries share memory, as np.lib.stride_tricks.as_strided makes): += would add "
                "several entries' gradients into one place"
            )
        if shape is None or shape == data.shape:
            return None
        return (
            f"has shape {data.shape} but the last forward's parameter had shape {shape} "
            "(the parameter was replaced since; run forward again)"
        )
    if type(grad) is not np.ndarray:
        return f"is a {type(grad).__name__}, expected None or an ndarray of shape {data.shape} and dtype {data.dtype}"
    if grad.shape != data.shape or grad.dtype != data.dtype:
        return (
            f"has shape {grad.shape} and dtype {grad.dtype}, expected the parameter's shape {data.shape} "
            f"and dtype {data.dtype}"
        )
    return "is read-only (its flags.writeable is False)"


def overlaps_itself(arr: np.ndarray) -> bool:
    """Whether two entries of ``arr`` share memory (a zero or short stride from ``as_strided``);
    a contiguous array never does, and is told at the cost of one flag."""
    if arr.flags.c_contiguous or arr.flags.f_contiguous or arr.size < 2:
        return False
    axes = sorted((abs(stride), n) for n, stride in zip(arr.shape, arr.strides) if n > 1)
    reach = arr.itemsize  # a strided view: each axis steps past all the axes of smaller stride
    for stride, n in axes:
        if stride < reach:
            break
        reach = stride * n
    else:
        return False
    if any(stride == 0 for stride, _ in axes):
        return True
    if arr.size > 1 << 20:  # an interleaving the stride test cannot tell: refused rather than read entry by entry
        return True
    offsets = np.zeros(1, dtype=np.int64)
    for n, stride in zip(arr.shape, arr.strides):
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64) * stride).ravel()
    return len(np.unique(offsets)) < arr.size


MASKS = {"mask": "True = masked", "keep": "True = kept", "dropout_keep": "True = kept"}
"""The stages' bool-array arguments, by name: kept as they are here, judged by the stage contract."""


def _floats(arr: np.ndarray, name: str) -> np.ndarray:
    """Integers as float64 (int8 products wrap around: 20 * 20 is -112), anything else (and the
    masks, whose dtype the stage contract judges) unchanged."""
    return arr.astype(np.float64) if arr.dtype.kind in "iu" and name not in MASKS else arr


def stage_arrays(fn: _F) -> _F:
    """``fn`` (a stage function) with its array arguments checked, as the modules check theirs.

    Every argument annotated ``np.ndarray`` (or ``np.ndarray | None``, or a sequence of ndarrays)
    must be an ndarray (a NumPy scalar is taken as its 0-d array); a PyTorch tensor is taken as
    ``tensor.detach().cpu().numpy()`` like the modules take it (``from_tensor``). Anything else (a
    list, a number, None where an array is needed) is refused with a DTypeError naming the stage,
    the argument, its type and the fix, instead of a raw AttributeError from deep inside the
    stage. Integer arrays become float64 (as ``kernels.attention`` takes them: int8 products
    would wrap around); an ndarray subclass (np.matrix, np.memmap) is read as its base ndarray
    (``plain``); an exact float ndarray passes untouched.
    """
    params = list(inspect.signature(fn).parameters.values())
    checked = [
        (
            i if p.kind is p.POSITIONAL_OR_KEYWORD else len(params),
            p.name,
            "Sequence" in str(p.annotation),
            "None" in str(p.annotation),
        )
        for i, p in enumerate(params)
        if "ndarray" in str(p.annotation)
    ]
    stage = fn.__name__

    def convert(value: Any, name: str, optional: bool) -> Any:
        if (type(value) is np.ndarray and value.dtype.kind not in "iu") or (optional and value is None):
            return value
        if isinstance(value, np.ndarray):
            return _floats(plain(value, f"{stage}: {name}"), name)
        if isinstance(value, np.generic):  # a NumPy scalar: the 0-d array it stands for
            return _floats(np.asarray(value), name)
        converted = from_tensor(value, f"{stage}: {name}")
        if isinstance(converted, np.ndarray):
            return _floats(converted, name)
        raise DTypeError(
            f"{stage}: {name} must be a NumPy ndarray, got {type(value).__name__}; convert it with "
            f"np.asarray({name}) (a torch tensor is taken as tensor.detach().cpu().numpy())"
        )

    def arg(value: Any, name: str, sequence: bool, optional: bool) -> Any:
        if not sequence:
            return convert(value, name, optional)
        if isinstance(value, np.ndarray):
            return _floats(plain(value, f"{stage}: {name}"), name)
        if not isinstance(value, (list, tuple)):
            raise DTypeError(f"{stage}: {name} must be a list or tuple of ndarrays, got {type(value).__name__}")
        return [convert(v, f"{name}[{j}]", False) for j, v in enumerate(value)]

    positions = tuple(i for i, _, sequence, _ in checked if not sequence and i < len(params))
    by_position = len(positions) == len(checked)  # no sequence arguments: the fast path below decides alone
    ndarray = np.ndarray

    @functools.wraps(fn)
    def with_arrays(*args: Any, **kwargs: Any) -> Any:
        if by_position and not kwargs and len(args) > positions[-1]:
            for i in positions:
                if type(args[i]) is not ndarray or args[i].dtype.kind in "iu":
                    break
            else:  # the common case: every array argument passed by position, an ndarray
                return fn(*args)
        args_list = list(args)
        for i, name, sequence, optional in checked:
            if i < len(args_list):
                args_list[i] = arg(args_list[i], name, sequence, optional)
            elif name in kwargs:
                kwargs[name] = arg(kwargs[name], name, sequence, optional)
        return fn(*args_list, **kwargs)

    return with_arrays  # type: ignore[return-value]


DEVICE_TYPES = {
    "cpu", "cuda", "mps", "xpu", "meta", "hip", "xla", "hpu", "mtia", "lazy", "ipu", "vulkan", "privateuseone",
}  # fmt: skip


def device_name(value: Any) -> str | None:
    """The device a ``to()`` argument names ("cpu", "cuda:0", a ``torch.device``), or None when
    it names none (then it must be a dtype)."""
    if isinstance(value, str):
        return value if value.split(":")[0] in DEVICE_TYPES else None
    if type(value).__name__ == "device" and isinstance(getattr(value, "type", None), str):
        return str(value)
    return None


def check_int64_ids(arr: np.ndarray, name: str = "idx") -> None:
    """Refuse unsigned ids past int64 (2**64 - 1 became -1 in the conversion, and was named so).

    Raises:
        ConfigError: naming the id as given.
    """
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise ConfigError(f"{name}: token id {int(arr.max())} is outside any vocabulary (ids are below 2**63)")
