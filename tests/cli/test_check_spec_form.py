"""npattn check names the expected FILE.py:NAME form for a spec with a colon too many, and
predict_shapes accepts the empty sequence the modules accept."""

from __future__ import annotations

import numpy as np
import pytest

import npattn
from npattn.cli.main import main
from npattn.errors import ConfigError

GOOD = "import numpy as np\n\ndef good(x, W_query, W_key, W_value):\n    return x @ W_value\n"


def test_a_spec_with_two_colons_names_the_expected_form(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text(GOOD)
    assert main(["check", f"{path}:good:x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("npattn check: error: ") and "expected FILE.py:NAME" in err
    assert f"the file is {str(path)!r}?" in err and "no such file" not in err


def test_a_missing_file_without_a_second_colon_is_still_no_such_file(tmp_path, capsys):
    assert main(["check", f"{tmp_path / 'missing.py'}:good"]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("build", "shape"),
    [
        (lambda: npattn.SelfAttention_v1(3, 2, rng=1), (0, 3)),
        (lambda: npattn.CausalAttention(3, 2, 4, 0.0, rng=1), (1, 0, 3)),
    ],
)
def test_predict_shapes_accepts_zero_tokens_like_the_modules(build, shape):
    module, x = build(), np.zeros(shape, dtype=np.float32)
    prediction = npattn.predict_shapes_for(module, x)
    assert prediction.n_tokens == 0
    assert npattn.check_shapes(prediction, npattn.trace(module, x)).passed
    assert npattn.predict_shapes(0, 3, 2).stages[-1].shape == (0, 2)
    with pytest.raises(ConfigError, match="n_tokens must be an integer >= 0, got -1"):
        npattn.predict_shapes(-1, 3, 2)
