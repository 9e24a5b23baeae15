"""npattn check FILE.py:NAME: loading a user's attention, running it on the book's example, reporting."""

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import npattn
from npattn.cli.main import main
from npattn.debug.usercode import book_weights, check_attention, load_attention
from npattn.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "broken_attention.py"

USER_FILE = """
import numpy as np
import npattn
from npattn.nn.functional import softmax


def crashes(x, W_query, W_key, W_value):
    return x @ W_query @ W_key


def two_args(x, W):
    return x


class NumpyAttention:
    def __init__(self, d_in, d_out):
        self.W_query = np.zeros((d_in, d_out))
        self.W_key = np.zeros((d_in, d_out))
        self.W_value = np.zeros((d_in, d_out))

    def forward(self, x):
        q, k, v = x @ self.W_query, x @ self.W_key, x @ self.W_value
        return softmax(q @ k.T) @ v

    __call__ = forward


class WideAttention(NumpyAttention):
    def __init__(self, d_in, d_out):
        super().__init__(d_in, d_out)
        self.W_value = np.zeros((d_in, d_in))


class NoWeights:
    def __init__(self, d_in, d_out):
        pass


class NeedsThreeArgs:
    def __init__(self, d_in, d_out, context_length):
        pass


Subclassed = npattn.SelfAttention_v1
instance = NumpyAttention(3, 2)
NUMBER = 3
"""


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "my_attention.py"
    path.write_text(USER_FILE)
    return path


def test_check_a_correct_function(capsys):
    assert main(["check", f"{EXAMPLES}:self_attention"]) == 0
    out = capsys.readouterr().out
    assert "context_vec  (6, 2)     (6, 2)  ok" in out
    assert "single-token check" in out and "PASSED" in out
    assert "correct: the output equals the reference" in out
    assert "journey  [ 0.3061,  0.8210]" in out


def test_check_a_broken_function(capsys):
    assert main(["check", f"{EXAMPLES}:softmax_over_queries"]) == 1
    out = capsys.readouterr().out
    assert "FAILED (6 of 6 rows differ)" in out
    assert "softmax_wrong_axis: softmax normalised over the queries" in out


@pytest.mark.parametrize(
    "name, identifiers",
    [("NumpyAttention", ("missing_scale",)), ("instance", ("missing_scale",)), ("Subclassed", ())],
)
def test_check_classes_and_instances(user_file, name, identifiers):
    report = check_attention(f"{user_file}:{name}")
    assert report.diagnosis.identifiers == identifiers
    assert bool(report) is (identifiers == ())


def test_the_books_weights_are_loaded_into_the_users_object(user_file):
    user = load_attention(f"{user_file}:instance")
    user.run(npattn.book_inputs(), book_weights())
    np.testing.assert_array_equal(user.target.W_key, book_weights()["W_key"])


@pytest.mark.parametrize(
    "spec, message",
    [
        ("missing.py:good", "no such file: 'missing.py'"),
        ("{f}", "expected FILE.py:NAME"),
        ("{f}:nothing", "defines no 'nothing' (it defines: NeedsThreeArgs, NoWeights, NumpyAttention, WideAttention,"),
        ("{f}:NUMBER", "NUMBER is of type int: expected a class with W_query"),
        ("{f}:two_args", "two_args is a function that does not take 4 arguments"),
        ("{f}:NoWeights", "NoWeights has no W_query, W_key, W_value"),
        ("{f}:NeedsThreeArgs", "could not construct NeedsThreeArgs(3, 2)"),
        ("{f}:crashes", "crashes raised ValueError"),
        ("{f}:WideAttention", "WideAttention.W_value has shape (3, 3), expected (3, 2)"),
    ],
)
def test_check_gives_clear_errors(user_file, capsys, spec, message):
    assert main(["check", spec.format(f=user_file)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("npattn check: error: ") and message in err
    if "crashes" in spec:
        assert "my_attention.py:" in err and "in crashes" in err


def test_check_reports_an_import_error(tmp_path, capsys):
    path = tmp_path / "broken.py"
    path.write_text("import not_a_module_anywhere\n")
    assert main(["check", f"{path}:f"]) == 2
    assert "importing" in capsys.readouterr().err


def test_check_leaves_sys_path_as_it_was(user_file):
    before = list(sys.path)
    load_attention(f"{user_file}:crashes")
    assert sys.path == before


def test_load_attention_rejects_bad_specs():
    with pytest.raises(ConfigError):
        load_attention("")


# ---------------------------------------------------------------------------------------------- examples/


EXPECTED = {
    "self_attention": (),
    "softmax_over_queries": ("softmax_wrong_axis",),
    "no_scaling": ("missing_scale",),
    "scaled_by_input_dim": ("scale_by_d_in",),
    "divide_by_row_sum": ("naive_normalisation",),
    "weights_on_keys": ("context_from_keys",),
    "weights_transposed": ("weights_transposed",),
    "projects_to_d_in": ("values_not_projected", "shape_mismatch"),
    "SelfAttentionSwapped": ("swapped_query_key",),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_what_the_tools_say_about_each_example(name):
    report = check_attention(f"{EXAMPLES}:{name}")
    assert report.diagnosis.identifiers == EXPECTED[name]


def test_the_examples_script_runs(capsys):
    import runpy

    runpy.run_path(str(EXAMPLES), run_name="__main__")
    out = capsys.readouterr().out
    assert "first diverging stage: attn_weights" in out
    assert "projects_to_d_in       shape mismatch  rows skipped" in out


# ---------------------------------------------------------------------------------------------- torch users


TORCH_FILE = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class SelfAttention_v1(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.W_query = nn.Parameter(torch.rand(d_in, d_out))
            self.W_key = nn.Parameter(torch.rand(d_in, d_out))
            self.W_value = nn.Parameter(torch.rand(d_in, d_out))

        def forward(self, x):
            keys, queries, values = x @ self.W_key, x @ self.W_query, x @ self.W_value
            attn_scores = queries @ keys.T
            attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
            return attn_weights @ values


    class SelfAttention_v2(nn.Module):
        def __init__(self, d_in, d_out, qkv_bias=False):
            super().__init__()
            self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
            self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

        def forward(self, x):
            keys, queries, values = self.W_key(x), self.W_query(x), self.W_value(x)
            attn_scores = queries @ keys.T
            attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=0)
            return attn_weights @ values
    """
)


@pytest.mark.torch
def test_check_the_books_torch_classes(tmp_path):
    pytest.importorskip("torch")
    path = tmp_path / "torch_attention.py"
    path.write_text(TORCH_FILE)
    assert check_attention(f"{path}:SelfAttention_v1").diagnosis.correct
    assert check_attention(f"{path}:SelfAttention_v2").diagnosis.matches == ("softmax_wrong_axis",)
