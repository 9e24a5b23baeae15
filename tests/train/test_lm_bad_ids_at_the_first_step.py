"""A loader whose first batch holds an id outside the model's vocabulary is refused before the first
step, and the message says the weights hold their values before it (it said "after step -1")."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.optim import AdamW


def test_an_out_of_vocabulary_id_at_step_0_names_the_weights_before_the_first_step():
    cfg = {"vocab_size": 10, "context_length": 4, "emb_dim": 4, "n_heads": 1, "n_layers": 1, "drop_rate": 0.0,
           "qkv_bias": False}
    model = npattn.GPTModel(cfg, rng=1)
    batches = [(np.array([[1, 2, 3, 12]]), np.array([[2, 3, 4, 5]]))]
    before = [p.data.copy() for p in model.parameters()]
    with pytest.raises(ConfigError) as info:
        npattn.train_lm(model, batches, batches, AdamW(model.parameters(), lr=0.01), num_epochs=1, eval_freq=100,
                        eval_iter=1, start_context="", tokenizer=npattn.CharTokenizer.train("abcdefghij"), out=None,
                        sample_tokens=0)
    text = str(info.value)
    assert "token id 12" in text and "before the first step" in text and "step -1" not in text, text
    assert all(np.array_equal(a, p.data) for a, p in zip(before, model.parameters()))
