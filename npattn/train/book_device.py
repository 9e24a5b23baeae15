"""The book's ``device`` argument for the chapter-5 functions.

The book passes a torch device to ``calc_loss_batch``, ``calc_loss_loader``, ``evaluate_model``,
``generate_and_print_sample`` and ``train_model_simple``; npattn runs on the CPU, so these take
the book's call as well as their own: a device ("cpu", ``torch.device("cpu")``) at the book's
place is checked and dropped, any other device is a ConfigError (as ``Module.to``). Only a value
that names a device is read as one: an int in that place keeps its npattn meaning.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from npattn._checks import device_name
from npattn.errors import ConfigError

__all__ = ["book_device"]

F = TypeVar("F", bound=Callable[..., Any])


def _check_cpu(value: Any, where: str) -> None:
    name = device_name(value)
    if name is None or name.split(":")[0] != "cpu":
        raise ConfigError(
            f"{where}: npattn runs on the CPU only; the book's device argument must be 'cpu' "
            f"(or torch.device('cpu')), got {value!r}"
        )


def book_device(at: int, before: str | None = None) -> Callable[[F], F]:
    """Let ``fn`` take the book's ``device`` as positional argument ``at`` (or ``device=``).

    ``before``: the parameter the device precedes, when that slot of npattn's own call also takes
    a str (``generate_and_print_sample(model, tokenizer, "cpu")`` continues the text "cpu"): the
    value is then read as a device only when that parameter follows it, positionally or by name.

    Raises:
        ConfigError: a device other than the CPU.
    """

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if "device" in kwargs:
                _check_cpu(kwargs.pop("device"), fn.__name__)
            follows = before is None or len(args) > at + 1 or before in kwargs
            if len(args) > at and device_name(args[at]) is not None and follows:
                _check_cpu(args[at], fn.__name__)
                args = args[:at] + args[at + 1 :]
            return fn(*args, **kwargs)

        return cast(F, call)

    return wrap
