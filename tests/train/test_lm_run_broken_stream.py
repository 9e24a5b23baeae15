"""run_lm with a user stream that fails mid-run (a reader that went away) says what the checkpoint
holds, as the other failures mid-run do; the error keeps its type (BrokenPipeError) and errno."""

import errno
import io

import pytest

from npattn.train.lm_run import run_lm

LM = dict(tokenizer="char", context_length=8, emb_dim=8, n_heads=2, n_layers=1, batch_size=2, eval_iter=1,
          eval_every=1, sample_tokens=2, prompt="the", dtype="float64", lr=0.001, drop_rate=0.0)


class Broken(io.StringIO):
    def __init__(self, after):
        super().__init__()
        self.left = after

    def write(self, s):
        self.left -= 1
        if self.left < 0:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")
        return super().write(s)


def test_broken_stream_names_the_intact_checkpoint(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    path = tmp_path / "lm.npz"
    with pytest.raises(BrokenPipeError, match=r"The last checkpoint of this run, .*lm.npz', holds step \d") as info:
        run_lm(dict(LM, text=str(text), steps=8), save=str(path), save_every=1, out=Broken(16))
    assert info.value.errno == errno.EPIPE and "writing the run's progress to out failed" in str(info.value)
    run_lm({"steps": 8}, resume=str(path), out=None)  # the checkpoint it names continues


@pytest.mark.parametrize("resumed", [False, True])
def test_a_stream_failing_in_the_runs_header_says_what_was_saved(tmp_path, resumed):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    path = tmp_path / "lm.npz"
    if resumed:
        run_lm(dict(LM, text=str(text), steps=2), save=str(path), out=None)
    before = path.read_bytes() if resumed else None
    holds = r"is as it was before the run" if resumed else r"does not exist"
    with pytest.raises(BrokenPipeError, match=r"This run wrote no checkpoint: .*lm.npz' " + holds) as info:
        if resumed:
            run_lm({"steps": 4}, resume=str(path), save=str(path), out=Broken(0))
        else:
            run_lm(dict(LM, text=str(text), steps=2), save=str(path), out=Broken(0))
    assert info.value.errno == errno.EPIPE and "writing the run's progress to out failed" in str(info.value)
    assert (path.read_bytes() if resumed else path.exists()) == (before if resumed else False)
