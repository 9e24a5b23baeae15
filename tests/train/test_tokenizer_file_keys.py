"""A tokenizer file is read as untrusted input: unknown keys and repeated keys are refused (json
keeps the last of repeated keys without a word), and so is a number too long to convert."""

import pytest

from npattn.errors import CheckpointError, ConfigError
from npattn.train.tokenizer_files import load_tokenizer


@pytest.mark.parametrize(
    "text, error, message",
    [
        ('{"kind": "char", "chars": "abc", "vocab_size": 5}', ConfigError, r"unknown key\(s\) \['vocab_size'\]"),
        ('{"kind": "bpe", "kind": "char", "chars": "abc"}', CheckpointError, r"\['kind'\] appear more than once"),
        ('{"kind": "char", "chars": "abc", "n": ' + "9" * 5000 + "}", CheckpointError, r"a number of over 4300 digits"),
    ],
)
def test_refused(tmp_path, text, error, message):
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(error, match=message):
        load_tokenizer(path)


def test_a_plain_file_loads(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"kind": "char", "chars": "abc"}')
    assert load_tokenizer(path).vocab_size == 3
