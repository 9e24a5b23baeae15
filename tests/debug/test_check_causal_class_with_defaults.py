"""A causal class whose constructor takes a context_length with a default (and builds its mask in
forward) is built with the book's call form and checked as causal attention: it was built as
NAME(d_in, d_out), judged as self-attention and called wrong. A correct causal function of
(x, W_query, W_key, W_value), checked as self-attention (a function is), is failed with the
catalogued mistake that says so, ``unexpected_causal_mask``, and how to check it as causal (it was
"no catalogued mistake reproduces it")."""

import npattn

CAUSAL = '''import numpy as np

class CausalDefaults:
    def __init__(self, d_in, d_out, context_length=6, dropout=0.0, qkv_bias=False):
        rng = np.random.default_rng(0)
        self.W_query, self.W_key, self.W_value = (rng.standard_normal((d_in, d_out)) for _ in range(3))

    def __call__(self, x):
        return causal_fn(x, self.W_query, self.W_key, self.W_value)


def causal_fn(x, W_query, W_key, W_value):
    q, k, v = x @ W_query, x @ W_key, x @ W_value
    s = q @ np.swapaxes(k, -1, -2)
    n = s.shape[-1]
    s = np.where(np.triu(np.ones((n, n), bool), 1), -np.inf, s) / np.sqrt(k.shape[-1])
    a = np.exp(s - s.max(-1, keepdims=True))
    return (a / a.sum(-1, keepdims=True)) @ v
'''


def test_a_causal_class_with_a_defaulted_context_length_is_checked_as_causal(tmp_path):
    (tmp_path / "kinds.py").write_text(CAUSAL)
    report = npattn.check_attention(str(tmp_path / "kinds.py") + ":CausalDefaults")
    assert report.causal and report.passed, str(report)


def test_a_causal_function_is_told_it_is_causal_attention(tmp_path):
    (tmp_path / "kinds.py").write_text(CAUSAL)
    report = npattn.check_attention(str(tmp_path / "kinds.py") + ":causal_fn")
    assert not report.passed
    assert report.diagnosis.matches == ("unexpected_causal_mask",)
    assert "check causal code as a class whose constructor takes context_length" in str(report)
