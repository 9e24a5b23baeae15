"""``torch.load``'s keywords on ``npattn.load``/``load_metadata``: the values that change nothing
(``map_location`` None/'cpu'/torch.device('cpu'), ``weights_only`` True) are accepted; others are a
ConfigError saying why (was Python's TypeError for any of them)."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError
from npattn.nn import SelfAttention_v1


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "p.npz"
    model = SelfAttention_v1(3, 2, rng=np.random.default_rng(0))
    npattn.save(model, path)
    return path, model.state_dict()


@pytest.mark.parametrize(
    "keywords", [{"map_location": "cpu"}, {"map_location": None}, {"weights_only": True}, {"map_location": "cpu:0"}]
)
def test_harmless_values_are_accepted(saved, keywords):
    path, state = saved
    loaded = npattn.load(path, **keywords)
    np.testing.assert_array_equal(loaded["W_query"], state["W_query"])
    assert npattn.load_metadata(path, **keywords)["class"] == "SelfAttention_v1"


def test_a_torch_cpu_device_is_accepted_and_cuda_refused(saved):
    torch = pytest.importorskip("torch")
    path, _ = saved
    assert list(npattn.load(path, map_location=torch.device("cpu"))) == ["W_query", "W_key", "W_value"]
    with pytest.raises(ConfigError, match=r"map_location=device\(type='cuda'\) is not supported: npattn runs"):
        npattn.load(path, map_location=torch.device("cuda"))


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"map_location": "cuda"}, r"map_location='cuda' is not supported: npattn runs on the CPU"),
        ({"map_location": lambda storage, loc: storage}, "has no storages to remap; expected None, 'cpu'"),
        ({"map_location": {"cuda:0": "cpu"}}, "has no storages to remap"),
        ({"weights_only": False}, "weights_only=False is not supported: npattn never unpickles, so there is nothing"),
        ({"weights_only": "yes"}, "expected True or None, got str"),
    ],
)
def test_other_values_are_a_config_error(saved, keywords, message):
    path, _ = saved
    with pytest.raises(ConfigError, match=message):
        npattn.load(path, **keywords)
    with pytest.raises(ConfigError, match=message):
        npattn.load_metadata(path, **keywords)
