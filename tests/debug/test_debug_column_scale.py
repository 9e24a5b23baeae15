"""The forward checks judge each output column on its own scale: a wrong column of small values
(W_value's column scaled by 1e-7, the output's column sign-flipped) fails next to large ones,
while correct float64, float32 and float16 answers at mixed column scales pass."""

import io

import numpy as np
import pytest

import npattn
from npattn.debug.usercode import run_check


def _mixed(dtype, causal=False):
    x = npattn.book_batch() if causal else npattn.book_inputs()
    cls = npattn.CausalAttention if causal else npattn.SelfAttention_v1
    m = cls(3, 4, 6, 0.0, rng=123, dtype=dtype) if causal else cls(3, 4, rng=123, dtype=dtype)
    value = m.W_value.weight.data.T if causal else m.W_value.data  # (d_in, d_out), a view
    value[:, 1] *= dtype(1e-7)  # one small column next to large ones
    value[:, 3] *= dtype(1e3)
    x = x.astype(dtype)
    return x, npattn.weights_of(m), m(x)


@pytest.mark.parametrize("causal", [False, True])
def test_a_sign_flipped_small_column_fails(causal):
    x, W, out = _mixed(np.float64, causal)
    bad = out.copy()
    bad[..., 1] *= -1
    assert not npattn.diagnose(x, W, bad, causal=causal).correct
    rows = npattn.check_rows(x, W, bad, causal=causal)
    assert not rows.passed and "in column 2" in str(rows), str(rows)
    zero = out.copy()
    zero[..., 1] = 0.0
    assert not npattn.diagnose(x, W, zero, causal=causal).correct
    assert not npattn.check_rows(x, W, zero, causal=causal).passed


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("causal", [False, True])
def test_correct_answers_at_mixed_column_scales_pass(dtype, causal):
    x, W, out = _mixed(dtype, causal)
    assert out.dtype == dtype
    assert npattn.diagnose(x, W, out, causal=causal).correct
    assert npattn.check_rows(x, W, out, causal=causal).passed
    # the same answer computed in float64 and rounded once to the dtype passes too
    W64 = {n: np.asarray(w, np.float64) for n, w in W.items()}
    exact = npattn.diagnose(x.astype(np.float64), W64, out.astype(np.float64), causal=causal).expected
    assert npattn.diagnose(x, W, exact.astype(dtype), causal=causal).correct
    assert npattn.check_rows(x, W, exact.astype(dtype), causal=causal).passed


def test_a_correct_float16_output_passes_and_one_off_by_a_tenth_of_a_percent_fails():
    m = npattn.SelfAttention_v1(3, 4, rng=123, dtype=np.float64)
    x, big = npattn.book_inputs().astype(np.float64), npattn.weights_of(m)
    exact = m(x)
    half = exact.astype(np.float16)
    assert npattn.diagnose(x, big, half).correct and npattn.check_rows(x, big, half).passed
    assert "float16's rounding" in str(npattn.check_rows(x, big, half))
    off = (exact * 1.001).astype(np.float16)
    assert not npattn.diagnose(x, big, off).correct and not npattn.check_rows(x, big, off).passed


def test_npattn_check_passes_correct_float16_code(tmp_path):
    path = tmp_path / "half.py"
    path.write_text(
        "import numpy as np\n"
        "def attn(x, W_query, W_key, W_value):\n"
        "    q, k, v = x @ W_query, x @ W_key, x @ W_value\n"
        "    s = q @ k.T / np.sqrt(k.shape[-1])\n"
        "    a = np.exp(s - s.max(-1, keepdims=True)); a /= a.sum(-1, keepdims=True)\n"
        "    return (a @ v).astype(np.float16)\n"
    )
    out = io.StringIO()
    code = run_check(f"{path}:attn", out=out)
    text = out.getvalue()
    assert code == 0 and "the forward is wrong" not in text and "float16's rounding" in text, text


def test_npattn_check_in_its_own_process_keeps_the_float16_dtype(tmp_path):
    from npattn.cli.check import run_check_isolated

    path = tmp_path / "half2.py"
    path.write_text(
        "import numpy as np\n"
        "import npattn\n"
        "def attn(x, W_query, W_key, W_value):\n"
        "    return npattn.nn.functional.attention_forward(x @ W_query, x @ W_key, x @ W_value)[0].astype(np.float16)\n"
    )
    out = io.StringIO()
    assert run_check_isolated(f"{path}:attn", out=out) == 0, out.getvalue()
