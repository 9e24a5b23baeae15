"""An optimizer keeps the group dicts it is given, as torch does: an edit of the dict after the
constructor or add_param_group is the group's (it was a copy, and the edit was ignored silently);
a refused group leaves the dict as it was."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.optim import SGD, Adam


def test_an_edit_of_the_given_dict_is_the_groups():
    p = npattn.Parameter(np.ones(2))
    group = {"params": [p], "lr": 0.1}
    opt = SGD([group], lr=0.5)
    assert opt.param_groups[0] is group and group["momentum"] == 0.0  # filled in with the defaults
    group["lr"] = 0.3
    p.grad[...] = 1.0
    opt.step()
    assert np.allclose(p.data, [0.7, 0.7])  # torch.optim.SGD gives [0.7, 0.7] too
    q = npattn.Parameter(np.ones(2))
    added = {"params": [q]}
    opt.add_param_group(added)
    added["lr"] = 0.2
    q.grad[...] = 1.0
    opt.step()
    assert np.allclose(q.data, [0.8, 0.8])


def test_a_refused_group_leaves_the_dict_as_it_was():
    p = npattn.Parameter(np.ones(2))
    opt = Adam([p], lr=0.1)
    bad = {"params": [npattn.Parameter(np.ones(2))], "lr": -1.0}
    with pytest.raises(ConfigError):
        opt.add_param_group(bad)
    assert set(bad) == {"params", "lr"} and bad["lr"] == -1.0 and len(opt.param_groups) == 1
