"""fit refuses an optimizer that updates parameters of another model: it trained nothing, silently."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.optim import SGD


def _batches(step):
    rng = np.random.default_rng(step)
    return rng.standard_normal((4, 3)), rng.standard_normal((4, 2))


def test_fit_refuses_an_optimizer_of_another_model():
    model, other = npattn.Linear(3, 2, rng=0), npattn.Linear(3, 2, rng=1)
    before = model.weight.data.copy()
    with pytest.raises(ConfigError, match=r"fit: 2 of the optimizer's 2 parameters are not parameters of the model"):
        npattn.fit(model, SGD(other.parameters(), lr=0.1), npattn.MSELoss(), _batches, 3)
    np.testing.assert_array_equal(model.weight.data, before)


def test_fit_refuses_an_optimizer_with_one_foreign_parameter():
    model, other = npattn.Linear(3, 2, rng=0), npattn.Linear(3, 2, rng=1)
    with pytest.raises(ConfigError, match=r"1 of the optimizer's 2 parameters"):
        npattn.fit(model, SGD([model.weight, other.bias], lr=0.1), npattn.MSELoss(), _batches, 3)


def test_fit_accepts_an_optimizer_of_some_of_the_model_parameters():
    model = npattn.Linear(3, 2, rng=0)
    bias = model.bias.data.copy()
    npattn.fit(model, SGD([model.weight], lr=0.1), npattn.MSELoss(), _batches, 2)
    np.testing.assert_array_equal(model.bias.data, bias)
