"""save_tokenizer never writes a file load_tokenizer refuses: an object of one's own with a
``to_dict()`` is written only when that dict is JSON and reads back as itself. Before, any object
with encode, decode and to_dict replaced a good tokenizer file with one that did not load (or got
Python's TypeError from json for a set)."""

import json

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError, ConfigError
from npattn.train import load_tokenizer, save_tokenizer, tokenizer_from_dict


class Own:
    def __init__(self, state):
        self.state = state

    def encode(self, text):
        return []

    def decode(self, ids):
        return ""

    def to_dict(self):
        return self.state


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"junk": 1}, "is no description load_tokenizer reads back"),
        ({"kind": "char", "chars": "aa"}, "is no description load_tokenizer reads back"),
        ({"kind": "bpe", "merges": [[1, 2]], "pattern": "x"}, "is no description load_tokenizer reads back"),
        ({"kind": "char", "chars": {1, 2}}, "cannot be written as JSON"),
        ({"kind": "char", "chars": "ab", "x": float("nan")}, "cannot be written as JSON"),
    ],
)
def test_a_description_that_does_not_read_back_is_refused_and_the_old_file_kept(tmp_path, state, message):
    path = tmp_path / "tok.json"
    save_tokenizer(npattn.CharTokenizer.train("hello"), path)
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=message):
        save_tokenizer(Own(state), path)
    assert path.read_bytes() == before
    assert load_tokenizer(path).to_dict() == {"kind": "char", "chars": "ehlo"}


def test_a_description_of_ones_own_that_reads_back_is_written(tmp_path):
    save_tokenizer(Own({"kind": "char", "chars": "ab"}), tmp_path / "tok.json")
    assert load_tokenizer(tmp_path / "tok.json").to_dict() == {"kind": "char", "chars": "ab"}


def test_loading_a_checkpoint_as_a_tokenizer_says_how_to_get_its_tokenizer(tmp_path):
    tokenizer = npattn.CharTokenizer.train("hello")
    npattn.save({"tokenizer": json.dumps(tokenizer.to_dict()), "w": np.ones(2)}, tmp_path / "run.npz")
    with pytest.raises(CheckpointError, match=r"it is a zip archive \(an npattn checkpoint\?\)"):
        load_tokenizer(tmp_path / "run.npz")
    again = tokenizer_from_dict(json.loads(npattn.load(tmp_path / "run.npz")["tokenizer"]))
    assert again.to_dict() == tokenizer.to_dict()


def test_a_utf16_tokenizer_file_is_named_as_such(tmp_path):
    (tmp_path / "tok.json").write_text('{"kind": "char", "chars": "ab"}', encoding="utf-16")
    with pytest.raises(CheckpointError, match="it is UTF-16 text; a tokenizer file is UTF-8 JSON"):
        load_tokenizer(tmp_path / "tok.json")
