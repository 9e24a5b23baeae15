"""A masked array given to ``npattn.save``: a .safetensors save wrote its data and dropped the mask
without a word (the values under the mask then loaded as weights), while .npz refused every masked
array, even one with nothing masked. Both formats now refuse masked entries, naming how many, and
save a masked array with nothing masked as its data (what npattn computes with)."""

import importlib.util

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError

FORMATS = ["npz", pytest.param("safetensors", marks=pytest.mark.skipif(
    importlib.util.find_spec("safetensors") is None, reason="needs the safetensors extra"))]  # fmt: skip


@pytest.mark.parametrize("ext", FORMATS)
def test_masked_entries_are_refused_and_the_old_file_kept(tmp_path, ext):
    path = tmp_path / f"w.{ext}"
    npattn.save({"W": np.zeros((3, 2))}, path)
    before = path.read_bytes()
    state = {"W": np.ma.masked_array(np.ones((3, 2)), mask=np.eye(3, 2, dtype=bool))}
    with pytest.raises(CheckpointError, match=r"a masked array with 2 of 6 entries masked \(its mask would be lost\)"):
        npattn.save(state, path)
    assert path.read_bytes() == before
    with pytest.raises(CheckpointError, match="1 of 1 entries masked"):
        npattn.save({"s": np.ma.masked_array(3.0, mask=True)}, path)


@pytest.mark.parametrize("ext", FORMATS)
def test_nothing_masked_is_saved_as_its_data(tmp_path, ext):
    path = tmp_path / f"w.{ext}"
    npattn.save({"W": np.ma.masked_array(np.arange(6.0).reshape(3, 2), mask=False)}, path)
    back = npattn.load(path)["W"]
    assert type(back) is np.ndarray
    np.testing.assert_array_equal(back, np.arange(6.0).reshape(3, 2))


def test_a_bfloat16_tensor_is_told_to_become_float_first(tmp_path):
    pytest.importorskip("safetensors")
    torch = pytest.importorskip("torch")
    with pytest.raises(CheckpointError, match=r"a bfloat16 one after \.float\(\)"):
        npattn.save({"w": torch.ones(2, dtype=torch.bfloat16)}, tmp_path / "w.safetensors")
