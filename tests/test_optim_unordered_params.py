"""A set of parameters is refused: its order changes between runs, so the indices a state_dict
writes would pair each parameter with another one's moments when loaded into a rebuilt optimizer.

The constructor, a group dict's ``"params"``, ``add_param_group`` and an edit of ``param_groups``
before ``step()`` all refuse a set or frozenset with ConfigError; lists, tuples, generators and a
dict's keys view (insertion order) are taken in their order.
"""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.optim import SGD, Adam, AdamW


def params():
    model = npattn.nn.Linear(3, 2)
    return [model.weight, model.bias]


@pytest.mark.parametrize("cls", [SGD, Adam, AdamW])
@pytest.mark.parametrize("container", [set, frozenset])
def test_constructor_refuses_a_set(cls, container):
    with pytest.raises(ConfigError, match=rf"{cls.__name__} expects .* fixed order .* got a {container.__name__}"):
        cls(container(params()), lr=0.1)


def test_group_dict_and_add_param_group_refuse_a_set():
    weight, bias = params()
    with pytest.raises(ConfigError, match=r"parameter group 0: 'params' .* got a set: a set's order changes"):
        Adam([{"params": {weight, bias}}], lr=0.1)
    opt = Adam([weight], lr=0.1)
    with pytest.raises(ConfigError, match=r"parameter group 1: 'params' .* got a set"):
        opt.add_param_group({"params": {bias}})
    assert len(opt.param_groups) == 1


def test_step_refuses_a_set_put_into_param_groups():
    weight, bias = params()
    opt = SGD([weight, bias], lr=0.1)
    weight.grad[...] = 1.0
    before = weight.data.copy()
    opt.param_groups[0]["params"] = {weight, bias}
    with pytest.raises(ConfigError, match=r"got a set"):
        opt.step()
    np.testing.assert_array_equal(weight.data, before)


def test_ordered_containers_are_taken_in_their_order():
    weight, bias = params()
    for given in ([weight, bias], (weight, bias), (p for p in (weight, bias)), {weight: 0, bias: 1}.keys()):
        assert SGD(given, lr=0.1).param_groups[0]["params"] == [weight, bias]
