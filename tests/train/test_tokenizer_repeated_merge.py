"""A BPE description with a repeated merge is refused, as a char list with a repeated character is.

``d["merges"].append(d["merges"][0])`` used to load as a tokenizer of 271 tokens instead of 270
whose encode gave other ids. Now the file, the dict and the constructor all refuse it, naming the
merge and the one it repeats.
"""

import json
import re

import pytest

from npattn.errors import ConfigError
from npattn.train.text import default_corpus
from npattn.train.tokenizer_files import load_tokenizer, tokenizer_from_dict
from npattn.train.tokenizers import BPETokenizer, train_tokenizer


@pytest.fixture(scope="module")
def bpe():
    return train_tokenizer("bpe", default_corpus()[:2_000], 270)


def test_a_repeated_merge_is_refused_by_file_dict_and_constructor(bpe, tmp_path):
    d = bpe.to_dict()
    a, b = d["merges"][0]
    d["merges"].append(d["merges"][0])
    message = f"BPETokenizer: merge 14 ({a}, {b}) repeats merge 0 of the merges list; each pair is merged once"
    path = tmp_path / "tok.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_tokenizer(path)
    with pytest.raises(ConfigError, match=re.escape(message)):
        tokenizer_from_dict(d)
    with pytest.raises(ConfigError, match=re.escape(message)):
        BPETokenizer([tuple(m) for m in d["merges"]])


def test_distinct_merges_still_load(bpe):
    again = tokenizer_from_dict(bpe.to_dict())
    text = default_corpus()[:300]
    assert again.vocab_size == bpe.vocab_size
    assert again.encode(text) == bpe.encode(text)
