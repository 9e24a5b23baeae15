"""`npattn check` of a causal class without a backward still checks its forward's dropout
(section 5): a dropout scaled by 1/p instead of 1/(1 - p) fails; a right one passes."""

import io

from npattn.debug.usercode import run_check

CODE = """
import numpy as np
class Causal:
    def __init__(self, d_in, d_out, context_length, dropout):
        r = np.random.default_rng(0)
        self.W_query, self.W_key, self.W_value = (r.random((d_in, d_out)) for _ in range(3))
        self.mask = np.triu(np.ones((context_length, context_length), bool), 1)
        self.p = dropout
    def __call__(self, x):
        q, k, v = x @ self.W_query, x @ self.W_key, x @ self.W_value
        n = x.shape[-2]
        s = np.where(self.mask[:n, :n], -np.inf, q @ np.swapaxes(k, -1, -2)) / np.sqrt(k.shape[-1])
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        if self.p > 0:
            keep = np.random.random(a.shape) >= self.p
            a = a * keep / {scale}
        return a @ v
"""


def _report(tmp_path, scale):
    path = tmp_path / f"causal_{len(scale)}.py"
    path.write_text(CODE.format(scale=scale))
    out = io.StringIO()
    code = run_check(f"{path}:Causal", out=out)
    return code, out.getvalue()


def test_a_forward_only_class_with_a_wrongly_scaled_dropout_fails(tmp_path):
    code, text = _report(tmp_path, "self.p")
    assert code == 1, text
    assert "5. forward with dropout=0.2" in text and "forward: FAILED (with dropout=0.2" in text
    assert "Causal: FAILED: the forward is wrong (section 5: see there) (no backward to check)" in text


def test_a_forward_only_class_with_a_right_dropout_passes_section_5(tmp_path):
    code, text = _report(tmp_path, "(1 - self.p)")
    assert code == 0, text
    assert "5. forward with dropout=0.2: right" in text and "PASSED: the forward is right" in text


def test_a_forward_only_class_without_dropout_is_noted_not_failed(tmp_path):
    path = tmp_path / "nodrop.py"
    path.write_text(CODE.replace("if self.p > 0:", "if False:").format(scale="1"))
    out = io.StringIO()
    code = run_check(f"{path}:Causal", out=out)
    text = out.getvalue()
    assert code == 0 and "5. dropout: not checked: with dropout=0.2 your forward drops nothing" in text, text
