"""Parameter: a trainable array and its gradient (``torch.nn.Parameter``'s place in npattn).

``.data`` is the array, ``.grad`` the gradient every backward accumulates into (same shape and
dtype; None when frozen). ``npattn.nn.module`` re-exports it next to Module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npattn._checks import as_array, check_bool

__all__ = ["Parameter"]


class Parameter:
    """A trainable array: ``.data`` (ndarray) and ``.grad`` (same shape and dtype, starts at zero).

    ``requires_grad=False`` freezes it, as in PyTorch: ``.grad`` is None, backward passes leave
    it alone and optimizers skip it (``requires_grad_()`` and ``Module.requires_grad_()`` switch).

    ``.grad`` of a trainable Parameter may be set to None (``backward`` then starts it from zeros,
    like PyTorch; ``zero_grad`` leaves it None) or to an array of the data's shape and dtype;
    ``backward`` refuses anything else before it changes any gradient.

    Raises:
        DTypeError: data that is not real floating point (ints are converted to float64).
        ConfigError: requires_grad that is not a bool.
    """

    grad: np.ndarray | None

    def __init__(self, data: Any, requires_grad: bool = True) -> None:
        self._requires_grad = check_bool(requires_grad, "requires_grad")
        self.grad = None
        self.data = data

    @property
    def data(self) -> np.ndarray:
        """The values, an ndarray; assigning a new array of another shape or dtype resets ``grad``."""
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        grad, current = self.grad, self.__dict__.get("_data")
        if value is current and isinstance(grad, np.ndarray) and isinstance(current, np.ndarray):
            if grad.shape == current.shape and grad.dtype == current.dtype:  # ``p.data -= step``: the same array back
                return
        arr = as_array(value, "Parameter data")
        self._data = arr
        grad = self.grad
        if self._requires_grad and (
            not isinstance(grad, np.ndarray) or grad.shape != arr.shape or grad.dtype != arr.dtype
        ):
            self.grad = np.zeros_like(arr)

    @property
    def requires_grad(self) -> bool:
        """Whether backward accumulates into ``.grad`` (False: frozen, ``.grad`` is None)."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._requires_grad = check_bool(value, "requires_grad")
        self.grad = np.zeros_like(self._data) if self._requires_grad else None

    def requires_grad_(self, requires_grad: bool = True) -> Parameter:
        """Set ``requires_grad`` in place (``tensor.requires_grad_``); returns self."""
        self.requires_grad = requires_grad
        return self

    def accumulate_grad(self, grad: np.ndarray) -> None:
        """``.grad += grad`` (what every backward does with a parameter's gradient); nothing
        when frozen, even if ``.grad`` was set to an array (PyTorch leaves a frozen ``.grad`` alone)."""
        if self._requires_grad and self.grad is not None:
            self.grad += grad

    def numel(self) -> int:
        """The number of elements (``tensor.numel()``), e.g. for counting a model's parameters."""
        return int(self._data.size)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    def numpy(self) -> np.ndarray:
        """The data array itself (not a copy), like ``tensor.detach().numpy()``."""
        return self._data

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if dtype is None:
            return self._data if not copy else self._data.copy()
        return self._data.astype(dtype)

    def __repr__(self) -> str:
        body = np.array2string(self._data, precision=4, suppress_small=True)
        return f"Parameter(shape={self.shape}, dtype={self.dtype}):\n{body}"
