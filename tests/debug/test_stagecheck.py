"""npattn gradcheck: every stage pair and every parameter, and a non-zero exit when one is broken."""

import pytest
from planted import plant

from npattn.cli.main import main
from npattn.debug.stagecheck import gradcheck_pipeline

STAGE_NAMES = [
    "project",
    "bias",
    "scores",
    "softmax",
    "mask (+ softmax)",
    "dropout",
    "context",
    "split_heads",
    "merge_heads",
    "concat",
    "attention (stages 2-5)",
]


def test_every_stage_pair_and_parameter_passes():
    result = gradcheck_pipeline(5, 4, 2, seed=1)
    assert result
    assert [name for name, _ in result.stages] == STAGE_NAMES
    assert [c.name for c in result.module.checks] == ["W_query", "W_key", "W_value", "x"]


def test_cli_gradcheck_prints_both_tables(capsys):
    assert main(["gradcheck", "--tokens", "4", "--d-in", "3", "--d-out", "2"]) == 0
    out = capsys.readouterr().out
    for text in ["stage pair", "attention (stages 2-5)", "queries 4x2, keys 4x2", "W_value", "gradcheck: PASSED"]:
        assert text in out


def _broken_softmax_backward(d_attn_weights, cache):
    attn_weights, scale = cache
    row_dot = (d_attn_weights * attn_weights).sum(axis=-2, keepdims=True)  # planted: the wrong axis
    return (scale * attn_weights * (d_attn_weights - row_dot),)


def test_cli_gradcheck_fails_on_a_planted_bug(monkeypatch, capsys):
    plant(monkeypatch, "softmax_backward", _broken_softmax_backward)
    assert main(["gradcheck"]) == 1
    out = capsys.readouterr().out
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines() if line.strip()}
    assert rows["softmax"].endswith("FAIL") and rows["context"].endswith("ok")
    assert "gradcheck: FAILED (softmax, mask (+ softmax), attention (stages 2-5), SelfAttention_v1" in out


@pytest.mark.parametrize("size", ["--tokens", "--d-in", "--d-out"])
def test_cli_gradcheck_rejects_bad_sizes(capsys, size):
    assert main(["gradcheck", size, "0"]) == 2
    assert "must be a positive integer" in capsys.readouterr().err
