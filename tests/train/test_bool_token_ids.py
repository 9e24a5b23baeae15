"""A True or False inside a Python list of token ids was read as token 1 or 0 (a bool array was
already refused): the dataset, the GPT's input, the loss's targets and generate's prompt refuse
it, naming its position."""

import numpy as np
import pytest

import npattn
from npattn.errors import DTypeError

CFG = dict(vocab_size=20, context_length=6, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False)


def test_the_dataset_refuses_a_bool_id():
    with pytest.raises(DTypeError, match=r"token_ids: expected integer token ids, got a bool \(True\) at position"):
        npattn.GPTDatasetV1(None, None, max_length=4, stride=2, token_ids=[5, True, 7, 8, 9, 10, 11, 12])


def test_the_model_and_the_loss_refuse_a_bool_id():
    model = npattn.GPTModel(CFG, rng=1)
    with pytest.raises(DTypeError, match=r"in_idx: .*a bool \(True\) at position \(0, 1\)"):
        npattn.calc_loss_batch([[1, True, 2, 3], [1, 2, 3, 4]], np.ones((2, 4), int), model)
    with pytest.raises(DTypeError, match=r"target_batch: .*a bool \(False\) at position \(1, 2\)"):
        npattn.calc_loss_batch([[1, 5, 2, 3], [1, 2, 3, 4]], [[1, 5, 2, 3], [1, 2, False, 4]], model)
    with pytest.raises(DTypeError, match=r"a bool \(True\)"):
        npattn.generate_text_simple(model, [[1, True]], max_new_tokens=1, context_size=6)


def test_integer_lists_are_taken_as_before():
    model = npattn.GPTModel(CFG, rng=1)
    assert np.isfinite(float(npattn.calc_loss_batch([[1, 5, 2, 3]], [[5, 2, 3, 4]], model)))
    assert len(npattn.GPTDatasetV1(None, None, max_length=4, stride=2, token_ids=list(range(10)))) == 3
