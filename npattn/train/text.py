"""Text for training a GPT offline: the corpus, the book's sliding windows, batches.

- ``default_corpus()``: the standard library's documentation topics (``pydoc_data.topics``, the
  text of ``help("assert")`` and the rest, about 465 KB of English in Python 3.11), joined in the
  order of their names; every Python installation carries it, so nothing is downloaded.
  ``read_text(path)`` reads any UTF-8 file instead (a regular file of at most 256 MiB).
- ``split_train_val(text, 0.9)``: the book's split, the first 90% of the characters for training.
- ``GPTDatasetV1(txt, tokenizer, max_length, stride)``: the book's dataset. Window i holds tokens
  ``[i * stride, i * stride + max_length)`` as input and the same window shifted by one token as
  target (the next token at every position).
- ``DataLoader(dataset, batch_size, shuffle, drop_last, seed=...)``: batches of (input, target),
  each (batch_size, max_length) int64. With ``shuffle`` the order of epoch e is a permutation drawn
  from ``numpy.random.default_rng([seed, e])``: it depends only on the seed and the epoch, so a
  resumed run sees the same batches (``set_epoch(e)`` chooses the epoch a loop iterates).
  ``create_dataloader_v1`` is the book's function.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from npattn._checks import check_bool, check_nonnegative_int, check_positive_int, finite_float, from_tensor, shown
from npattn.errors import CheckpointError, ConfigError, DTypeError, ShapeError
from npattn.nn.functional.transformer import refuse_bool_ids
from npattn.train.atomic import check_source
from npattn.train.tokenizers import TOKENIZERS_SHOWN, Tokenizer

__all__ = [
    "DataLoader",
    "GPTDatasetV1",
    "check_tokenizer",
    "create_dataloader_v1",
    "default_corpus",
    "largest_stride",
    "read_text",
    "split_train_val",
]


def default_corpus() -> str:
    """The standard library's documentation topics as one text (about 465 KB in Python 3.11).

    Raises:
        ConfigError: this Python was installed without ``pydoc_data`` (pass a text file instead).
    """
    try:
        from pydoc_data.topics import topics
    except ImportError:
        raise ConfigError(
            "the default corpus is the standard library's pydoc_data.topics, which this Python does not "
            "include; pass a UTF-8 text file instead (--text FILE)"
        ) from None
    return "".join(topics[name] for name in sorted(topics))


MAX_TEXT_BYTES = 256 * 2**20
"""The largest text ``read_text`` reads (256 MiB): its token ids alone take 8 bytes a token, and
the book's loop holds them all in memory."""


def read_text(path: str | os.PathLike[str]) -> str:
    """The contents of a UTF-8 text file (a leading byte-order mark is dropped; \r\n and \r read
    as \n, as Python's text mode reads them for the book), at most
    ``MAX_TEXT_BYTES``. Only a regular file is read (``atomic.check_source``): a FIFO, a device
    such as /dev/zero or a directory is refused before it is opened, so nothing hangs.

    Raises:
        ConfigError: the path is missing, not a regular file, unreadable, larger than
            ``MAX_TEXT_BYTES``, empty, not UTF-8 (the message gives the offset of the first bad byte) or
            holding NUL bytes (UTF-16 without a byte-order mark, a binary file).
    """
    try:
        path = check_source(path, "text file")
    except CheckpointError as exc:
        raise ConfigError(str(exc)) from None
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_TEXT_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read the text file {path!r}: {exc.strerror or exc}") from None
    if len(data) > MAX_TEXT_BYTES:
        raise ConfigError(
            f"the text file {path!r} is larger than {MAX_TEXT_BYTES // 2**20} MiB; train on a part of it"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path!r} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} is invalid "
            f"({_conversion_hint(data, exc.start)})"
        ) from None
    if "\0" in text:  # valid UTF-8, but no text file holds NUL: UTF-16 without a byte-order mark, or binary
        raise ConfigError(f"{path!r} is not UTF-8 text: {_nul_hint(data)}")
    # newlines as the book's open(path, "r", encoding="utf-8").read() gives them: \r\n and \r become \n
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if not text:
        raise ConfigError(f"{path!r} is empty")
    return text


def _conversion_hint(data: bytes, bad: int) -> str:
    """How to convert a file that is not UTF-8, from what its bytes show."""
    for bom, encoding in ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"), (b"\xff\xfe", "utf-16"),
                          (b"\xfe\xff", "utf-16")):  # fmt: skip
        if data.startswith(bom):
            name = encoding.upper()
            return f"it starts with a {name} byte-order mark: convert it first, e.g. iconv -f {encoding} -t utf-8"
    if data[bad] == 0xED and 0xA0 <= data[bad + 1 : bad + 2].ljust(1, b"\0")[0] <= 0xBF:
        return (
            "it holds a UTF-16 surrogate encoded on its own, as CESU-8 and Java's modified UTF-8 write them: "
            "convert it first, e.g. in Python: data.decode('utf-8', 'surrogatepass').encode('utf-16', "
            "'surrogatepass').decode('utf-16')"
        )
    for magic, what in _BINARY:
        if data.startswith(magic):
            return f"it is {what}, not text in another encoding: the run needs a text file"
    if b"\x00" in data[:4096]:
        return "it holds NUL bytes, as a binary file does, not text in another encoding: the run needs a text file"
    return "convert it first, e.g. iconv -f latin1 -t utf-8"


def _nul_hint(data: bytes) -> str:
    """Why a file that decodes as UTF-8 but holds NUL bytes is refused, and how to convert it."""
    at = data.index(b"\0")
    head = data[:4096]
    for encoding, zeros, chars in (("utf-16le", head[1::2], head[0::2]), ("utf-16be", head[0::2], head[1::2])):
        if len(head) >= 4 and zeros.count(0) >= 0.9 * len(zeros) and chars.count(0) <= 0.1 * len(chars):  # ASCII
            return (
                f"it holds NUL bytes at every other offset (the first at offset {at}), as {encoding.upper()} text "
                f"without a byte-order mark does: convert it first, e.g. iconv -f {encoding} -t utf-8"
            )
    return (
        f"it holds NUL bytes (the first at offset {at}), which no text file holds: a binary file, or text in "
        "another encoding (UTF-16 or UTF-32 without a byte-order mark?); the run needs a UTF-8 text file"
    )


_BINARY = (
    (b"PK\x03\x04", "a zip archive (an npattn checkpoint or .npz?)"),
    (b"\x7fELF", "a program"),
    (b"\x93NUMPY", "a NumPy .npy array"),
    (b"\x89PNG", "a PNG image"),
    (b"%PDF", "a PDF"),
)
"""Binary files by their first bytes: advice to convert them from latin-1 would train on garbage."""


def check_tokenizer(tokenizer: Any, name: str = "tokenizer") -> Tokenizer:
    """``tokenizer`` if it has ``encode`` and ``decode`` (a ``Tokenizer``).

    Raises:
        ConfigError: anything else, e.g. a name such as "gpt2" (build it with ``npattn.train.gpt2_tokenizer()``).
    """
    if not all(callable(getattr(tokenizer, method, None)) for method in ("encode", "decode")):
        got = f"{type(tokenizer).__name__} {tokenizer!r}" if isinstance(tokenizer, str) else type(tokenizer).__name__
        raise ConfigError(
            f"{name} must be a tokenizer with encode and decode ({TOKENIZERS_SHOWN}), got {got}"
        )
    return tokenizer


def split_train_val(text: str, train_ratio: float = 0.9) -> tuple[str, str]:
    """The book's split: ``text[:int(train_ratio * len(text))]`` and the rest. ``train_ratio`` is
    any real number (a NumPy scalar or 0-d array or tensor too, taken as the Python float it holds:
    ``np.float32(0.9)`` is 0.8999999761581421).

    Raises:
        ConfigError: ``train_ratio`` not a real number, or outside (0, 1).
    """
    value = from_tensor(train_ratio)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    ratio = finite_float(value)
    if (ratio is None and not isinstance(value, (int, float, np.integer, np.floating))) or isinstance(value, bool):
        got = f"{shown(train_ratio)} (a {type(value).__name__}, not a real number)"
        raise ConfigError(f"train_ratio must lie in (0, 1), got {got}")
    if ratio is None or not 0 < ratio < 1:
        raise ConfigError(f"train_ratio must lie in (0, 1), got {shown(train_ratio)}")
    split_idx = int(ratio * len(text))
    return text[:split_idx], text[split_idx:]


class GPTDatasetV1:
    """The book's sliding windows over the token ids of ``txt``.

    ``input_ids[i] = ids[i * stride : i * stride + max_length]`` and ``target_ids[i]`` the same
    window one token later, for ``i * stride`` in ``range(0, len(ids) - max_length, stride)``;
    both (len(self), max_length) int64. ``token_ids`` may be given instead of ``txt`` (already encoded).

    Raises:
        ConfigError: ``max_length`` or ``stride`` not a positive integer; both ``txt`` and
            ``token_ids`` given; a negative token id or one past int64 (a uint64 id used to wrap).
        DTypeError: ``token_ids`` not integers (bools and floats included).
        ShapeError: ``token_ids`` not 1-D (one stream of ids; rows are not joined into one).
    """

    def __init__(
        self,
        txt: str | None,
        tokenizer: Tokenizer | None,
        max_length: int,
        stride: int,
        *,
        token_ids: Any = None,
    ) -> None:
        self.max_length = check_positive_int(max_length, "max_length")
        self.stride = check_positive_int(stride, "stride")
        if token_ids is None:
            if txt is None or tokenizer is None:
                raise ConfigError("GPTDatasetV1 needs txt and a tokenizer (or token_ids=)")
            token_ids = check_tokenizer(tokenizer).encode(txt)
        elif txt is not None:
            raise ConfigError(
                "GPTDatasetV1 got both txt and token_ids: give one source (txt=None with token_ids=, "
                "or txt with a tokenizer)"
            )
        ids = _token_ids(token_ids)
        self.token_ids = ids
        starts = np.arange(0, max(len(ids) - self.max_length, 0), self.stride, dtype=np.int64)
        if len(starts) == 0:  # no window: nothing allocated (a max_length of 10**9 took 8 GB for none)
            self.input_ids = self.target_ids = np.empty((0, self.max_length), dtype=ids.dtype)
            return
        offsets = starts[:, None] + np.arange(self.max_length, dtype=np.int64)
        self.input_ids = ids[offsets]
        self.target_ids = ids[offsets + 1]

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, idx: int) -> tuple[np.ndarray, np.ndarray]:
        """Window ``idx`` (negative from the end), an IndexError naming the count past either end."""
        if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)):
            raise DTypeError(f"GPTDatasetV1 indices must be integers, got {type(idx).__name__}")
        count = len(self.input_ids)
        if not -count <= idx < count:
            raise IndexError(f"GPTDatasetV1 index {int(idx)} is out of range: it holds {count} windows")
        return self.input_ids[idx].copy(), self.target_ids[idx].copy()  # editing one cannot change the dataset


def largest_stride(dataset: GPTDatasetV1, windows: int) -> int | None:
    """The largest stride at which ``dataset``'s tokens give at least ``windows`` windows of its
    ``max_length`` (plus the target's one token), or None when no stride does (the text is too short
    even at stride 1). Window starts are ``range(0, len(ids) - max_length, stride)``, so ``n`` tokens
    past the first window give ``ceil(n / stride)`` windows."""
    span = len(dataset.token_ids) - dataset.max_length
    if span < windows:
        return None
    return span if windows <= 1 else (span - 1) // (windows - 1)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _token_ids(token_ids: Any) -> np.ndarray:
    """``token_ids`` (1-D) as an int64 array: integers in [0, 2**63) only (a uint64 id past int64 used
    to wrap to a negative one; Python ints past int64 make NumPy pick float64 or object, still refused
    for their value, not as floats).

    Raises:
        DTypeError: not integers (bools and floats included). ConfigError: a negative id or one
            past int64, naming it and its position. ShapeError: not 1-D, naming the shape.
    """
    ids = np.asarray(token_ids)
    refuse_bool_ids(token_ids, ids, "GPTDatasetV1: token_ids")
    if ids.dtype.kind in "fO" and ids.size and not isinstance(token_ids, np.ndarray):
        exact = np.asarray(token_ids, dtype=object)  # the Python ints given, before NumPy's choice (its shape kept)
        if all(map(_is_int, exact.flat)):
            ids = exact
    if ids.dtype.kind not in "iuO" and not (ids.size == 0 and ids.dtype.kind == "f"):  # [] is float64
        raise DTypeError(
            f"GPTDatasetV1: token_ids must be integers, got dtype {ids.dtype} (bools and floats are refused, "
            "not rounded)"
        )
    if ids.dtype.kind == "O" and not all(map(_is_int, ids.reshape(-1))):
        raise DTypeError("GPTDatasetV1: token_ids must be integers, got dtype object")
    if ids.ndim != 1:  # a (rows, n) array would be read as one stream, its windows straddling rows
        raise ShapeError(
            f"GPTDatasetV1: token_ids must be 1-D (one stream of token ids), got shape {ids.shape}; "
            "join the rows yourself (e.g. np.concatenate) if they are one text"
        )
    if ids.dtype.kind == "O":
        outside = [i for i, v in enumerate(ids.tolist()) if not 0 <= v < 2**63]
    else:
        outside = np.flatnonzero((ids < 0) | (ids > np.iinfo(np.int64).max)).tolist()
    if outside:
        raise ConfigError(
            f"GPTDatasetV1: token_ids must lie in [0, 2**63) (token ids, stored as int64), got {int(ids[outside[0]])} "
            f"at position {outside[0]}"
        )
    return ids.astype(np.int64)


class DataLoader:
    """Batches of a ``GPTDatasetV1``: iterating gives (input, target) pairs of shape
    (batch_size, max_length); the last smaller batch is dropped with ``drop_last``.

    ``iter(loader)`` gives the batches of epoch ``loader.epoch`` (set it with ``set_epoch``, like
    a torch DistributedSampler); with ``shuffle`` their order is drawn from ``seed`` and the epoch
    number only, so iterating twice gives the same batches and a resumed run finds its place.
    ``loader.batches(epoch)`` gives the batches of any epoch.

    Raises:
        ConfigError: ``batch_size`` not a positive integer, ``shuffle`` or ``drop_last`` not a bool.
    """

    def __init__(
        self,
        dataset: GPTDatasetV1,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        *,
        seed: int = 123,
    ) -> None:
        self.dataset = dataset
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.shuffle = check_bool(shuffle, "shuffle")
        self.drop_last = check_bool(drop_last, "drop_last")
        self.seed = check_nonnegative_int(seed, "seed")
        self.epoch = 0

    def __len__(self) -> int:
        n, b = len(self.dataset), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def order(self, epoch: int) -> np.ndarray:
        """The order of the windows in ``epoch``: a seeded permutation, or 0..n-1 without shuffle."""
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        return np.random.default_rng([self.seed, check_nonnegative_int(epoch, "epoch")]).permutation(n)

    def batches(self, epoch: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The batches of ``epoch``, in order."""
        order = self.order(epoch)
        for i in range(len(self)):
            rows = order[i * self.batch_size : (i + 1) * self.batch_size]
            yield self.dataset.input_ids[rows], self.dataset.target_ids[rows]

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order ``iter(loader)`` follows."""
        self.epoch = check_nonnegative_int(epoch, "epoch")

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self.batches(self.epoch)


def create_dataloader_v1(
    txt: str,
    batch_size: int = 4,
    max_length: int = 256,
    stride: int = 128,
    shuffle: bool = True,
    drop_last: bool = True,
    num_workers: int = 0,
    *,
    tokenizer: Tokenizer,
    seed: int = 123,
) -> DataLoader:
    """The book's ``create_dataloader_v1``, with the tokenizer passed in (the book builds tiktoken's
    gpt2 inside) and a seed for the shuffle.

    Raises:
        ConfigError: ``num_workers`` other than 0 (batches are cut in the calling process), or the
            errors of ``GPTDatasetV1`` and ``DataLoader``.
    """
    if num_workers != 0:
        raise ConfigError(f"num_workers must be 0 (npattn cuts batches in the calling process), got {num_workers!r}")
    dataset = GPTDatasetV1(txt, tokenizer, max_length, stride)
    return DataLoader(dataset, batch_size, shuffle=shuffle, drop_last=drop_last, seed=seed)
