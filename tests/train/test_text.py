"""The corpus, the book's sliding windows, and seeded batches."""

import os
import re

import numpy as np
import pytest

from npattn.errors import ConfigError
from npattn.train.text import (
    DataLoader,
    GPTDatasetV1,
    create_dataloader_v1,
    default_corpus,
    read_text,
    split_train_val,
)
from npattn.train.tokenizers import CharTokenizer


def test_default_corpus_is_the_standard_library_docs() -> None:
    text = default_corpus()
    assert 300_000 < len(text) < 2_000_000
    assert text.startswith('The "assert" statement')
    assert text == default_corpus()


@pytest.mark.parametrize(
    "encode,hint",
    [
        (lambda s: s.encode("utf-16"), "a UTF-16 byte-order mark: convert it first, e.g. iconv -f utf-16 -t utf-8"),
        (lambda s: s.encode("utf-16-be").join([b"\xfe\xff", b""]), "iconv -f utf-16 -t utf-8"),
        (lambda s: s.encode("utf-32"), "a UTF-32 byte-order mark: convert it first, e.g. iconv -f utf-32 -t utf-8"),
        (lambda s: s.encode("latin1", "replace"), "iconv -f latin1 -t utf-8"),
    ],
)
def test_a_file_that_is_not_utf8_gets_the_hint_its_bytes_show(tmp_path, encode, hint) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(encode("caf\u00e9 \U0001f642"))
    with pytest.raises(ConfigError, match=re.escape(hint)):
        read_text(path)


def test_surrogates_encoded_one_by_one_are_named(tmp_path) -> None:
    text = "smile \U0001f642"
    units = text.encode("utf-16-le")
    codes = [int.from_bytes(units[i : i + 2], "little") for i in range(0, len(units), 2)]
    cesu = b"".join(chr(code).encode("utf-8", "surrogatepass") for code in codes)
    (tmp_path / "t.txt").write_bytes(cesu)  # as CESU-8 and Java's modified UTF-8 write it
    with pytest.raises(ConfigError, match="a UTF-16 surrogate encoded on its own") as info:
        read_text(tmp_path / "t.txt")
    fix = re.search(r"in Python: (.*)\)$", str(info.value)).group(1)
    assert eval(fix, {"data": cesu}) == text  # the hint's own conversion gives the text back


def test_read_text(tmp_path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes("\ufeffnaïve text\r\n".encode())
    assert read_text(path) == "naïve text\n"  # as the book's text-mode read gives it
    path.write_bytes(b"ok \xe9t\xe9")
    with pytest.raises(ConfigError, match=r"is not UTF-8 text: byte 0xe9 at offset 3 is invalid"):
        read_text(path)
    path.write_bytes(b"")
    with pytest.raises(ConfigError, match="is empty"):
        read_text(path)
    with pytest.raises(ConfigError, match=r"text file .*missing\.txt' does not exist"):
        read_text(tmp_path / "missing.txt")
    with pytest.raises(ConfigError, match="is a directory, not a file"):
        read_text(tmp_path)


def test_read_text_refuses_what_is_not_a_regular_file_and_bounds_the_size(tmp_path, monkeypatch) -> None:
    import npattn.train.text as text_module

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it would block forever
    with pytest.raises(ConfigError, match=r"is a FIFO \(named pipe\), not a file"):
        read_text(fifo)
    with pytest.raises(ConfigError, match="is a character device, not a file"):
        read_text("/dev/zero")  # would be read without end
    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 2**20 + b"y")
    monkeypatch.setattr(text_module, "MAX_TEXT_BYTES", 2**20)
    with pytest.raises(ConfigError, match="is larger than 1 MiB"):
        read_text(path)


def test_split_is_the_books() -> None:
    text = "".join(chr(97 + i % 26) for i in range(1001))
    train, val = split_train_val(text)
    assert train == text[:900] and val == text[900:]
    for bad in (0, 1, 1.5, True, "0.9"):
        with pytest.raises(ConfigError, match=r"train_ratio must lie in \(0, 1\)"):
            split_train_val(text, bad)


def _book_windows(token_ids: list[int], max_length: int, stride: int) -> tuple[list, list]:
    # the book's GPTDatasetV1.__init__ loop, as printed
    input_ids, target_ids = [], []
    for i in range(0, len(token_ids) - max_length, stride):
        input_ids.append(token_ids[i : i + max_length])
        target_ids.append(token_ids[i + 1 : i + max_length + 1])
    return input_ids, target_ids


@pytest.mark.parametrize(
    ("n", "max_length", "stride"), [(20, 4, 1), (20, 4, 4), (21, 4, 3), (5, 4, 1), (4, 4, 1), (0, 3, 2)]
)
def test_windows_are_the_books(n: int, max_length: int, stride: int) -> None:
    ids = list(range(100, 100 + n))
    data = GPTDatasetV1(None, None, max_length, stride, token_ids=ids)
    inputs, targets = _book_windows(ids, max_length, stride)
    assert len(data) == len(inputs)
    assert data.input_ids.shape == (len(inputs), max_length) and data.input_ids.dtype == np.int64
    assert data.input_ids.tolist() == inputs and data.target_ids.tolist() == targets
    if inputs:
        x, y = data[0]
        assert x.tolist() == inputs[0] and y.tolist() == targets[0]


def test_dataset_from_text() -> None:
    tok = CharTokenizer.train("abcdefgh")
    data = GPTDatasetV1("abcdefgh", tok, max_length=3, stride=2)
    assert [tok.decode(x) + ">" + tok.decode(y) for x, y in (data[i] for i in range(len(data)))] == [
        "abc>bcd",
        "cde>def",
        "efg>fgh",
    ]
    with pytest.raises(ConfigError, match="max_length must be a positive integer, got 0"):
        GPTDatasetV1("abc", tok, 0, 1)
    with pytest.raises(ConfigError, match="stride must be a positive integer"):
        GPTDatasetV1("abc", tok, 2, 1.5)  # type: ignore[arg-type]


def test_loader_batches_and_shuffle() -> None:
    data = GPTDatasetV1(None, None, 4, 2, token_ids=range(50))  # 23 windows
    plain = DataLoader(data, batch_size=5)
    assert len(plain) == 5 and len(DataLoader(data, 5, drop_last=True)) == 4
    batches = list(plain)
    assert [x.shape for x, _ in batches] == [(5, 4)] * 4 + [(3, 4)]
    assert np.array_equal(np.concatenate([x for x, _ in batches]), data.input_ids)
    shuffled = DataLoader(data, batch_size=5, shuffle=True, drop_last=True, seed=7)
    epoch0 = list(shuffled)
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(epoch0, shuffled))  # iterating again: same epoch
    shuffled.set_epoch(1)
    epoch1 = list(shuffled)
    rows0 = np.concatenate([x[:, 0] for x, _ in epoch0])
    assert len(set(rows0.tolist())) == 20 and not np.array_equal(rows0, np.sort(rows0))
    assert not np.array_equal(rows0, np.concatenate([x[:, 0] for x, _ in epoch1]))
    again = [x for x, _ in DataLoader(data, 5, shuffle=True, drop_last=True, seed=7).batches(1)]
    assert all(np.array_equal(a, b) for a, b in zip(again, (x for x, _ in epoch1)))
    for x, y in epoch0:
        assert np.array_equal(x[:, 1:], y[:, :-1])  # targets are the inputs shifted by one token


def test_loader_and_book_function_arguments() -> None:
    tok = CharTokenizer.train("abcdefgh")
    loader = create_dataloader_v1("abcdefgh" * 10, batch_size=2, max_length=4, stride=4, tokenizer=tok)
    assert loader.shuffle and loader.drop_last and len(loader) == 9
    with pytest.raises(ConfigError, match="num_workers must be 0"):
        create_dataloader_v1("abc", num_workers=2, tokenizer=tok)
    data = GPTDatasetV1(None, None, 2, 1, token_ids=range(10))
    with pytest.raises(ConfigError, match="batch_size must be a positive integer, got 0"):
        DataLoader(data, 0)
    with pytest.raises(ConfigError, match="shuffle must be True or False"):
        DataLoader(data, 1, shuffle="yes")  # type: ignore[arg-type]
