"""Tokenizers: exact round trips, the BPE's merges on a known example, determinism, speed-free
compression on the default corpus, JSON save/load, and the offline-only GPT-2 loader."""

import hashlib
import json
import sys
import types

import numpy as np
import pytest

from npattn.errors import CheckpointError, ConfigError
from npattn.train import tokenizer_files as TF
from npattn.train import tokenizers as T
from npattn.train.text import default_corpus

TRICKY = [
    "",
    "a",
    "Hello, world!  \n\n\tTabs\r\nand CRLF",
    "naïve café, Straße, ½ ², Ωmega",
    "日本語のテキスト 和 中文",
    "emoji 👩‍💻 and flags 🇫🇷, combining e\u0301",
    "lone surrogate \ud800 here",
    "don't we'll they've I'm it's",
    "snake_case __dunder__ x+=1; {a: [b]}",
    "   leading and trailing spaces   ",
]


@pytest.fixture(scope="module")
def corpus() -> str:
    return default_corpus()


@pytest.fixture(scope="module")
def bpe(corpus: str) -> T.BPETokenizer:
    return T.BPETokenizer.train(corpus[:60_000], vocab_size=400)


def test_bpe_learns_the_textbook_example() -> None:
    # "aaabdaaabac": aa (4 times) first, then ab and Zа tie at 2 (the smaller pair, (a, b), wins), then ZY
    tok = T.BPETokenizer.train("aaabdaaabac", vocab_size=300)
    assert tok.merges == [(97, 97), (97, 98), (256, 257)]
    assert tok.vocab_size == 259  # it stops when no pair occurs twice
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]
    assert tok.decode([258]) == "aaab"


def test_bpe_merges_stay_inside_pieces() -> None:
    tok = T.BPETokenizer.train("ab ab ab ab", vocab_size=300)
    # the pieces are "ab" and " ab" (x3): no merge joins a word to the space before the next one
    assert "".join(tok.decode([i]) for i in tok.encode("ab ab")) == "ab ab"
    assert all(not tok.token_bytes[i].endswith(b" ") for i in range(256, tok.vocab_size))


@pytest.mark.parametrize("text", TRICKY)
def test_bpe_round_trips_any_text(bpe: T.BPETokenizer, text: str) -> None:
    assert bpe.decode(bpe.encode(text)) == text


def test_bpe_round_trips_the_corpus_and_compresses_it(corpus: str, bpe: T.BPETokenizer) -> None:
    ids = bpe.encode(corpus[:100_000])
    assert bpe.decode(ids) == corpus[:100_000]
    assert max(ids) < bpe.vocab_size == 400
    assert len(ids) < len(corpus[:100_000].encode()) / 1.8  # 144 merges already halve the byte count


def test_bpe_training_is_deterministic(corpus: str) -> None:
    a = T.BPETokenizer.train(corpus[:30_000], 320)
    b = T.BPETokenizer.train(corpus[:30_000], 320)
    assert a.merges == b.merges and len(a.merges) == 64


def test_bpe_decode_of_a_cut_character_is_replaced(bpe: T.BPETokenizer) -> None:
    first_byte = "é".encode()[0]
    assert bpe.decode([first_byte]) == "\ufffd"


def test_split_pattern_covers_every_character() -> None:
    import re

    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    split = re.compile(T.GPT2_SPLIT)

    @hypothesis.given(st.text())
    def covers(text: str) -> None:
        assert "".join(split.findall(text)) == text

    covers()


def test_a_split_pattern_that_leaves_characters_out_is_refused(tmp_path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"kind": "bpe", "merges": [], "pattern": ""}))
    with pytest.raises(ConfigError, match=r"the split pattern '' is not npattn's GPT-2-style pattern"):
        TF.load_tokenizer(path)  # it encoded "hello world" as []
    with pytest.raises(ConfigError, match=r"the split pattern '' leaves 'Hello, wor' .* outside its matches"):
        T.BPETokenizer([], "")
    for pattern in (r"[a-z]+| ", r"\w+", r"(?:[^\W\d_]|\s)+"):  # no digits, no punctuation, ...
        with pytest.raises(ConfigError, match="outside its matches"):
            T.BPETokenizer([], pattern)
    sparse = T.BPETokenizer([], r"[^q]+")  # covers the probe text, but not a "q"
    assert sparse.decode(sparse.encode("hello")) == "hello"
    with pytest.raises(ConfigError, match=r"leaves 'quit' \(at offset 3\)"):
        sparse.encode("to quit")
    with pytest.raises(ConfigError, match="outside its matches"):
        T.BPETokenizer.train("no q here but quite so", 260, pattern=r"[^q]+")


def test_bpe_round_trips_random_text(bpe: T.BPETokenizer) -> None:
    hypothesis = pytest.importorskip("hypothesis")

    @hypothesis.given(hypothesis.strategies.text())
    def round_trip(text: str) -> None:
        assert bpe.decode(bpe.encode(text)) == text

    round_trip()


def test_char_tokenizer(corpus: str) -> None:
    tok = T.CharTokenizer.train(corpus)
    assert tok.chars == sorted(set(corpus)) and tok.vocab_size == len(set(corpus))
    assert tok.decode(tok.encode(corpus[:5000])) == corpus[:5000]
    assert tok.encode("ab") == [tok.chars.index("a"), tok.chars.index("b")]
    small = T.CharTokenizer.train("naïve ½ 日本")
    assert small.decode(small.encode("本日 ½ naïve")) == "本日 ½ naïve"
    with pytest.raises(ConfigError, match=r"character 'Z' \(U\+005A\) is not in this character tokenizer's vocab"):
        small.encode("Zebra")


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_decode_rejects_bad_ids(kind: str) -> None:
    tok = T.train_tokenizer(kind, "hello world")
    with pytest.raises(ConfigError, match=r"token id -1 is outside the vocabulary"):
        tok.decode([-1])
    with pytest.raises(
        ConfigError, match=rf"token id {tok.vocab_size} is outside the vocabulary \[0, {tok.vocab_size}\)"
    ):
        tok.decode([0, tok.vocab_size])
    with pytest.raises(ConfigError, match="flat sequence of integers"):
        tok.decode([[0, 1]])
    with pytest.raises(ConfigError, match="flat sequence of integers"):
        tok.decode([0.5])
    assert tok.decode([]) == "" and tok.decode(np.array([], dtype=np.int64)) == ""


def test_bad_arguments() -> None:
    with pytest.raises(ConfigError, match="at least 256"):
        T.BPETokenizer.train("abc", 255)
    with pytest.raises(ConfigError, match="empty text"):
        T.BPETokenizer.train("", 300)
    with pytest.raises(ConfigError, match="empty text"):
        T.CharTokenizer.train("")
    with pytest.raises(ConfigError, match="must be a str, got bytes"):
        T.BPETokenizer.train(b"abc", 300)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown tokenizer 'word'; choose one of char, bpe, gpt2"):
        T.train_tokenizer("word", "abc")
    with pytest.raises(ConfigError, match="vocab_size applies to the bpe tokenizer only"):
        T.train_tokenizer("char", "abc", vocab_size=300)
    with pytest.raises(ConfigError, match="refers to a token not yet defined"):
        T.BPETokenizer([(97, 300)])


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_save_and_load(tmp_path, kind: str, corpus: str) -> None:
    tok = T.train_tokenizer(kind, corpus[:20_000])
    path = tmp_path / "tok.json"
    TF.save_tokenizer(tok, path)
    back = TF.load_tokenizer(path)
    assert type(back) is type(tok) and back.to_dict() == tok.to_dict()
    assert back.encode(corpus[:3000]) == tok.encode(corpus[:3000])
    assert TF.tokenizer_from_dict(json.loads(json.dumps(tok.to_dict()))).to_dict() == tok.to_dict()


def test_load_rejects_bad_files(tmp_path) -> None:
    with pytest.raises(CheckpointError, match=r"tokenizer file '.*missing.json' does not exist"):
        TF.load_tokenizer(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="JSONDecodeError"):
        TF.load_tokenizer(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="not a tokenizer description: kind 'words'"):
        TF.tokenizer_from_dict({"kind": "words"})
    for state, got in (([1], "a list"), (3, "a number"), (None, "null"), ("char", "a string")):
        with pytest.raises(ConfigError, match=f"it must be a JSON object such as .*, got {got}$"):
            TF.tokenizer_from_dict(state)
    with pytest.raises(ConfigError, match="malformed bpe tokenizer description"):
        TF.tokenizer_from_dict({"kind": "bpe", "merges": [[1, "a"]], "pattern": "."})
    with pytest.raises(ConfigError, match="malformed char tokenizer description"):
        TF.tokenizer_from_dict({"kind": "char"})


def test_book_helpers() -> None:
    tok = T.CharTokenizer.train("abc ")
    ids = T.text_to_token_ids("cab a", tok)
    assert ids.shape == (1, 5) and ids.dtype == np.int64
    assert T.token_ids_to_text(ids, tok) == "cab a"


# ---------------------------------------------------------------------------------------------
# GPT-2 through tiktoken: only from files already cached, never downloaded


def test_gpt2_without_tiktoken(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import tiktoken -> ImportError
    with pytest.raises(ConfigError, match=r"needs tiktoken \(pip install tiktoken\)"):
        T.train_tokenizer("gpt2", "abc")


class _FakeEncoding:
    n_vocab = 50257

    def encode(self, text: str, allowed_special: object = ()) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)


def _fake_tiktoken(calls: list[str]) -> types.ModuleType:
    module = types.ModuleType("tiktoken")

    def get_encoding(name: str) -> _FakeEncoding:
        calls.append(name)
        return _FakeEncoding()

    module.get_encoding = get_encoding  # type: ignore[attr-defined]
    return module


def test_gpt2_needs_cached_files_and_never_downloads(monkeypatch, tmp_path) -> None:
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "tiktoken", _fake_tiktoken(calls))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match=r"files \(vocab.bpe, encoder.json\) are not in its cache .*never downloads"):
        T.gpt2_tokenizer()
    assert calls == []  # tiktoken was not asked (it would download)
    for url in (
        "az://openaipublic/gpt-2/encodings/main/vocab.bpe",
        "az://openaipublic/gpt-2/encodings/main/encoder.json",
    ):
        (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_text("cached")
    tok = T.gpt2_tokenizer()
    assert calls == ["gpt2"] and tok.vocab_size == 50257
    assert tok.decode(tok.encode("Hi")) == "Hi"
    assert TF.tokenizer_from_dict(tok.to_dict()).vocab_size == 50257


def test_gpt2_gives_the_book_ids_when_available() -> None:
    pytest.importorskip("tiktoken")
    try:
        tok = T.gpt2_tokenizer()
    except ConfigError as exc:
        pytest.skip(str(exc))
    assert tok.encode("Every effort moves you") == [6109, 3626, 6100, 345]
    assert tok.encode("Hello, I am") == [15496, 11, 314, 716]


def test_a_tokenizer_file_is_read_as_untrusted_input(tmp_path) -> None:
    for path, kind in (("/dev/zero", "a character device"), (tmp_path, "a directory")):  # /dev/zero: read without end
        with pytest.raises(CheckpointError, match=f"tokenizer file '{path}' is {kind}, not a file"):
            TF.load_tokenizer(path)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(TF.MAX_TOKENIZER_BYTES + 1)
    with pytest.raises(CheckpointError, match="is larger than 67,108,864 bytes"):
        TF.load_tokenizer(big)
    hostile = tmp_path / "hostile.json"  # catastrophic backtracking: encode("a" * 40 + "b") took days
    hostile.write_text(json.dumps({"kind": "bpe", "merges": [], "pattern": "(a+)+$|[\\s\\S]"}))
    with pytest.raises(ConfigError, match=r"the split pattern '\(a\+\)\+\$.*' is not npattn's GPT-2-style pattern"):
        TF.load_tokenizer(hostile)


def test_a_missing_key_and_a_non_tokenizer_are_named() -> None:
    with pytest.raises(ConfigError, match=r"bpe tokenizer description: the key\(s\) 'pattern' are missing"):
        TF.tokenizer_from_dict({"kind": "bpe", "merges": []})
    with pytest.raises(ConfigError, match=r"save_tokenizer expects a tokenizer .*, got str 'bpe'"):
        TF.save_tokenizer("bpe", "t.json")


def test_the_file_functions_keep_their_old_address() -> None:
    for name in ("tokenizer_from_dict", "save_tokenizer", "load_tokenizer"):
        assert getattr(T, name) is getattr(TF, name)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        T.nothing
