"""generate and generate_text_simple name an unsigned id past int64 as given (2**64 - 1 was named
-1, the value after the conversion to int64)."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError

CFG = {"vocab_size": 7, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1, "drop_rate": 0.0,
       "qkv_bias": False}  # fmt: skip


@pytest.mark.parametrize("value", [2**64 - 1, 2**63 + 5])
def test_ids_past_int64_are_named_as_given(value):
    model = npattn.GPTModel(CFG, rng=5).eval()
    ids = np.array([[value]], dtype=np.uint64)
    for run in (lambda: npattn.generate(model, ids, 2, 8), lambda: npattn.generate_text_simple(model, ids, 1, 8)):
        with pytest.raises(ConfigError, match=f"token id {value} is outside any vocabulary"):
            run()
