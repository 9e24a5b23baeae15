"""``TorchGenerator.seed`` was a plain attribute: ``g.seed = 7`` made ``initial_seed()`` and every saved
state report 7 while the stream went on drawing seed 5's numbers, and ``g.seed()``, torch's method,
was "'int' object is not callable". ``seed()`` is torch's method now (a non-deterministic re-seed,
returned) and assigning it is an AttributeError, as in torch."""

import pytest

import npattn
from npattn.random import TorchGenerator


def test_assigning_seed_is_refused_and_changes_nothing():
    g = TorchGenerator(5)
    before = g.get_state()
    with pytest.raises(AttributeError, match=r"TorchGenerator.seed is a method .*manual_seed\(seed\)"):
        g.seed = 7
    assert g.initial_seed() == 5 and g.get_state()["seed"] == before["seed"]
    assert (g.rand(3) == TorchGenerator(5).rand(3)).all()


def test_seed_reseeds_and_returns_the_seed_as_torch():
    g = TorchGenerator(5)
    value = g.seed()
    assert isinstance(value, int) and 0 <= value < 2**64 and g.initial_seed() == value
    assert (g.rand(4) == TorchGenerator(value).rand(4)).all()


def test_the_module_seed_uses_the_default_generator():
    value = npattn.random.seed()
    assert npattn.initial_seed() == value


@pytest.mark.torch
def test_torch_refuses_the_assignment_too():
    torch = pytest.importorskip("torch")
    with pytest.raises(AttributeError):
        torch.Generator().seed = 7
