"""A torch tensor without values to read (meta device) or not dense (sparse, mkldnn) is a
DTypeError naming the device or layout and the fix; it was torch's raw NotImplementedError
("Cannot copy out of meta tensor") or TypeError."""

import warnings

import numpy as np
import pytest

import npattn
from npattn._checks import from_tensor
from npattn.errors import DTypeError
from npattn.nn import functional as F


class FakeTensor:
    """Duck-typed like a torch tensor (the checks never import torch)."""

    def __init__(self, layout: str = "torch.strided", is_meta: bool = False):
        self.layout, self.is_meta, self.shape = layout, is_meta, (6, 3)

    def detach(self):
        return self

    def cpu(self):
        if self.is_meta:
            raise NotImplementedError("Cannot copy out of meta tensor; no data!")
        return self

    def numpy(self):
        if self.layout != "torch.strided":
            raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")
        return np.ones(self.shape)


def test_duck_typed_meta_and_sparse_are_refused_by_name():
    with pytest.raises(DTypeError, match=r"^x: .*meta device.*device='cpu'"):
        from_tensor(FakeTensor(is_meta=True), "x")
    with pytest.raises(DTypeError, match=r"got layout torch\.sparse_coo; convert it with tensor\.to_dense\(\)"):
        from_tensor(FakeTensor("torch.sparse_coo"))
    assert from_tensor(FakeTensor()).shape == (6, 3)


def test_torch_meta_and_sparse_inputs():
    torch = pytest.importorskip("torch")
    m = npattn.SelfAttention_v2(3, 2, rng=1)
    x = torch.randn(6, 3)
    with pytest.raises(DTypeError, match=r"^x: .*shape \(6, 3\) on the meta device"):
        m(torch.empty(6, 3, device="meta"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "sparse CSR is in beta"
        sparse = [x.to_sparse(), x.to_sparse_csr()]
    for s in sparse:
        with pytest.raises(DTypeError, match=rf"^x: .*got layout {s.layout}; convert it with tensor\.to_dense\(\)"):
            m(s)
    with pytest.raises(DTypeError, match=r"^softmax_forward: attn_scores: .*layout torch\.sparse_coo"):
        F.softmax_forward(x.to_sparse(), 1.0)
    assert np.array_equal(m(x.to_sparse().to_dense()), m(x.numpy()))
