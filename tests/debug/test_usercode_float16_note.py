"""`npattn check` of code that returns float16 says so next to its verdict (about 3 digits: the check
allows float16's rounding and can judge no finer)."""

import io

from npattn.debug.usercode import run_check

CODE = """
import numpy as np
def attention(x, W_query, W_key, W_value):
    q, k, v = x @ W_query, x @ W_key, x @ W_value
    s = q @ k.T / np.sqrt(k.shape[-1])
    a = np.exp(s - s.max(-1, keepdims=True)); a /= a.sum(-1, keepdims=True)
    return (a @ v).astype(np.{dtype})
"""


def _report(tmp_path, dtype):
    path = tmp_path / f"mine_{dtype}.py"
    path.write_text(CODE.format(dtype=dtype))
    out = io.StringIO()
    code = run_check(f"{path}:attention", out=out)
    return code, out.getvalue()


def test_a_correct_float16_output_passes_and_is_named_next_to_the_verdict(tmp_path):
    code, text = _report(tmp_path, "float16")
    assert code == 0 and "returned float16 (about 3 significant digits)" in text, text


def test_float32_and_float64_outputs_get_no_such_note(tmp_path):
    for dtype in ("float32", "float64"):
        code, text = _report(tmp_path, dtype)
        assert code == 0 and "significant digits" not in text, text
