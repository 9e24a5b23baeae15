"""compare hands each side NumPy arrays: a PyTorch module there failed inside torch with a raw
TypeError (linear(): argument 'input' must be Tensor); it is refused, pointing to npattn check."""

import numpy as np
import pytest

import npattn


def test_a_torch_module_is_refused_pointing_to_npattn_check() -> None:
    torch = pytest.importorskip("torch")
    mine = npattn.SelfAttention_v1(3, 2, rng=123)
    theirs = torch.nn.Linear(3, 2)
    refused = r"got a PyTorch Linear; check a PyTorch attention class with `npattn check"
    with pytest.raises(npattn.ConfigError, match=refused):
        npattn.compare(mine, theirs, npattn.book_inputs())


def test_a_numpy_function_is_still_compared() -> None:
    mine = npattn.SelfAttention_v1(3, 2, rng=123, dtype=np.float64)
    result = npattn.compare(mine, lambda x: mine.forward(x), npattn.book_inputs())
    assert "agree" in str(result)
