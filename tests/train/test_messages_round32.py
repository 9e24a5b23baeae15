"""Messages that named the wrong thing: an optimizer buffer of the wrong type (it was "has shape
list"), a negative exp_avg_sq found by step (now naming the parameter), a train_ratio that is no
number (it was "must lie in (0, 1)", as for 1.5), a token id past int64 (it was "a flat sequence of integers")."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError, StateDictError
from npattn.optim import Adam
from npattn.train import split_train_val


def _stepped():
    m = npattn.SelfAttention_v1(3, 2, rng=1, dtype=np.float64)
    opt = Adam(m.parameters(), lr=0.01)
    m(npattn.book_inputs().astype(np.float64))
    m.backward(np.ones((6, 2)))
    opt.step()
    return m, opt


def test_a_buffer_of_the_wrong_type_is_named_by_its_type():
    m, opt = _stepped()
    opt.state[m.W_key]["exp_avg"] = [[0.0, 0.0]] * 3
    with pytest.raises(StateDictError, match=r"state 'exp_avg' is a list, expected a NumPy array"):
        opt.step()


def test_a_negative_running_mean_of_squares_names_the_parameter():
    m, opt = _stepped()
    opt.state[m.W_key]["exp_avg_sq"][0, 0] = -np.inf
    with pytest.raises(StateDictError, match=r"Adam\.step: Adam parameter 1 of group 0: the state 'exp_avg_sq'"):
        opt.step()


def test_a_train_ratio_that_is_no_number():
    with pytest.raises(ConfigError, match=r"train_ratio must lie in \(0, 1\), got '0.9' \(a str, not a real number\)"):
        split_train_val("abcdef", "0.9")


def test_a_token_id_past_int64_is_outside_the_vocabulary():
    with pytest.raises(ConfigError, match=r"token id 1180591620717411303424 is outside the vocabulary \[0, 3\)"):
        npattn.CharTokenizer.train("abc").decode([2**70])
