"""param_groups hold checked copies of the dicts given (documented; torch keeps the dict itself):
the dict passed is never changed, also by a failed constructor, one dict can serve optimizers of two
kinds, and an edit of param_groups[i] is what takes effect."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.optim import SGD, Adam


def test_the_dict_given_is_never_changed_and_param_groups_is_what_counts():
    p = npattn.Parameter(np.ones(2))
    shared = {"params": [p], "lr": 0.1}
    sgd, adam = SGD([shared], lr=0.5), Adam([shared], lr=0.01)
    assert shared == {"params": [p], "lr": 0.1} and sgd.param_groups[0] is not shared
    assert adam.param_groups[0]["lr"] == 0.1
    shared["lr"] = 0.3  # not the group
    sgd.param_groups[0]["lr"] = 0.2  # the group
    p.grad[...] = 1.0
    sgd.step()
    assert np.allclose(p.data, [0.8, 0.8])
    q = npattn.Parameter(np.ones(2))
    first = {"params": [q]}
    with pytest.raises(ConfigError):
        Adam([first, {"params": [q]}])  # q twice: refused, and the first dict is as it was
    assert first == {"params": [q]}
