"""Metadata is standard JSON: a NaN or infinite float (which Python's json would write as NaN or
Infinity) is refused by save, in both formats, before anything is written, naming the key."""

import math

import numpy as np
import pytest

import npattn
from npattn.errors import CheckpointError


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -math.inf, np.float64("nan")])
def test_a_non_finite_metadata_float_is_refused(tmp_path, suffix, value):
    if suffix == ".safetensors":
        pytest.importorskip("safetensors")
    path = tmp_path / f"m{suffix}"
    with pytest.raises(CheckpointError, match=r"metadata\['run'\]\['lr'\] is -?(nan|inf).*no NaN or infinity"):
        npattn.save({"W": np.ones(2)}, path, metadata={"run": {"lr": value}})
    assert not path.exists()


def test_finite_floats_and_the_string_nan_round_trip(tmp_path):
    path = tmp_path / "m.npz"
    npattn.save({"W": np.ones(2)}, path, metadata={"lr": 1e-308, "note": "nan"})
    meta = npattn.load_metadata(path)
    assert meta["lr"] == 1e-308 and meta["note"] == "nan"
