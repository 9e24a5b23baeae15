"""Two parameters whose ``.data`` share memory (GPT-2's tying done as ``out_head.weight.data =
tok_emb.weight.data``): each update was computed from the old weights and the last one stored won,
dropping the other without a word (torch applies both). ``step`` refuses them, naming both, and
changes nothing; tying by one shared Parameter trains as before."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.nn.module import Parameter
from npattn.optim import SGD, Adam

A = np.arange(12.0).reshape(4, 3)


@pytest.mark.parametrize(
    "views",
    [lambda a: (a, a), lambda a: (a[:2], a[1:]), lambda a: (a.T, a)],
    ids=["same array", "overlapping rows", "transposed view"],
)
@pytest.mark.parametrize("cls", [SGD, Adam])
def test_parameters_sharing_memory_are_refused_and_nothing_changes(cls, views):
    a = A.copy()
    p, q = (Parameter(v) for v in views(a))
    for x in (p, q):
        x.grad = np.ones_like(x.data)
    opt = cls([p, q], lr=0.1)
    with pytest.raises(ConfigError, match=rf"{cls.__name__}\.step: parameters 0 and 1 .* share memory"):
        opt.step()
    np.testing.assert_array_equal(a, A)
    assert opt.state == {}


def test_disjoint_views_and_one_shared_parameter_train():
    a = A.copy()
    p, q = Parameter(a[:2]), Parameter(a[2:])
    p.grad, q.grad = np.ones((2, 3)), np.ones((2, 3))
    SGD([p, q], lr=1.0).step()
    np.testing.assert_array_equal(a, A - 1)
    cfg = dict(vocab_size=20, context_length=6, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False)
    model = npattn.GPTModel(cfg, rng=1, dtype=np.float64)
    model.out_head.weight = model.tok_emb.weight  # the tying that works: one Parameter
    opt = SGD(model.parameters(), lr=0.1)
    npattn.calc_loss_batch([[1, 2, 3]], [[2, 3, 4]], model).backward()
    opt.step()


def test_an_overlap_with_any_earlier_parameter_is_found():
    big = np.zeros(30)
    params = [Parameter(big[0:10]), Parameter(big[10:20]), Parameter(big[15:25])]
    for p in params:
        p.grad = np.ones(10)
    with pytest.raises(ConfigError, match=r"parameters 1 and 2 .* share memory"):
        SGD(params, lr=0.1).step()
    assert not big.any()
