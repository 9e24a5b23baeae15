"""A BPE vocabulary below the 256 bytes is refused naming the command line's flag (--vocab-size), as
the other settings' messages do, before the text is read; run_lm's settings say the same."""

import pytest

from npattn.cli.main import main
from npattn.errors import ConfigError
from npattn.train.lm_run import LMSettings


def test_the_command_names_the_flag(capsys, tmp_path):
    assert main(["train", "--task", "lm", "--tokenizer", "bpe", "--vocab-size", "100", "--steps", "1",
                 "--text", str(tmp_path / "absent.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("vocab_size (--vocab-size) of a byte-level BPE must be at least 256 (the bytes), got 100")
    assert "\n" not in err


def test_the_settings_name_it_too():
    with pytest.raises(ConfigError, match=r"vocab_size \(--vocab-size\) of a byte-level BPE must be at least 256"):
        LMSettings(tokenizer="bpe", vocab_size=255)
    assert LMSettings(tokenizer="bpe", vocab_size=256).vocab_size == 256
