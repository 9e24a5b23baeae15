"""Extreme but valid values: a temperature so small that logits / temperature overflows samples
greedily (its limit), not the last token; a huge Adam step count steps (beta**t is 0); a torch 1.x
SGD state with momentum_buffer=None loads as no buffer yet, as torch reads it."""

import copy

import numpy as np
import pytest

import npattn
from npattn.optim import SGD, Adam


@pytest.mark.parametrize("temperature", [1e-310, 5e-324])
def test_a_temperature_that_overflows_the_logits_is_greedy(temperature):
    tok = npattn.CharTokenizer.train("abcdefgh ")
    cfg = {"vocab_size": tok.vocab_size, "context_length": 8, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
           "drop_rate": 0.0, "qkv_bias": False}  # fmt: skip
    model = npattn.GPTModel(cfg, rng=1).eval()
    idx = npattn.text_to_token_ids("ab", tok)
    greedy = npattn.generate(model, idx, 3, 8)
    with np.errstate(all="raise"):
        np.testing.assert_array_equal(npattn.generate(model, idx, 3, 8, temperature=temperature, rng=1), greedy)
        top3 = npattn.generate(model, idx, 3, 8, temperature=temperature, top_k=3, rng=1)
        np.testing.assert_array_equal(top3, greedy)


def test_a_huge_adam_step_count_steps():
    p = npattn.Parameter(np.ones(2))
    adam = Adam([p])
    p.grad = np.ones(2)
    adam.step()
    state = copy.deepcopy(adam.state_dict())
    state["state"][0]["step"] = 10**400
    resumed = Adam([p])
    resumed.load_state_dict(state)
    p.grad = np.ones(2)
    resumed.step()  # bias corrections of 1: was Python's OverflowError
    assert np.all(np.isfinite(p.data))


def test_an_sgd_state_with_a_none_momentum_buffer_loads_as_no_buffer_yet():
    p, q = npattn.Parameter(np.ones(2)), npattn.Parameter(np.ones(2))
    loaded, fresh = SGD([p], lr=0.1, momentum=0.9), SGD([q], lr=0.1, momentum=0.9)
    groups = loaded.state_dict()["param_groups"]
    loaded.load_state_dict({"state": {0: {"momentum_buffer": None}}, "param_groups": groups})
    for _ in range(3):
        p.grad, q.grad = np.ones(2), np.ones(2)
        loaded.step()
        fresh.step()
    np.testing.assert_array_equal(p.data, q.data)
