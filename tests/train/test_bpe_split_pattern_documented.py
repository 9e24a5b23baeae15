"""npattn's BPE splits text with GPT-2's pattern written in Python's ``re`` classes, and the docs say
where that differs from GPT-2's ``\\p{L}``/``\\p{N}``: numeric characters that are not decimal digits
(Unicode's No, Nl) are taken as letters. Pinned here, so the documented difference stays true."""

import re

from npattn.train.bpe import GPT2_SPLIT


def test_the_documented_differences_from_gpt2s_pattern():
    assert re.findall(GPT2_SPLIT, "x²") == ["x²"]  # GPT-2: ['x', '²']
    assert re.findall(GPT2_SPLIT, "12½") == ["12", "½"]  # GPT-2: ['12½']
    # where both agree: words with their leading space, numbers, punctuation runs, whitespace
    assert re.findall(GPT2_SPLIT, "It's 42 apples!!  ok") == ["It", "'s", " 42", " apples", "!!", " ", " ok"]
