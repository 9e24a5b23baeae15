import subprocess
import sys

import numpy as np
import pytest

import npattn
from npattn.cli.main import main


def test_book_prints_shapes_output_and_gradcheck(capsys):
    assert main(["book"]) == 0
    out = capsys.readouterr().out
    for text in ["attn_weights   (6, 6)", "context_vec    (6, 2)", "journey  [ 0.3061,  0.8210]", "PASSED"]:
        assert text in out


def test_python_dash_m_runs():
    result = subprocess.run([sys.executable, "-m", "npattn", "--help"], capture_output=True, text=True, check=True)
    assert "demo" in result.stdout and "book" in result.stdout and "train" in result.stdout


def test_demo_trains_and_shows_the_weights_moving(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for text in [
        "starting weights",
        "moved from start:  W_query    W_key  W_value",
        "final weights",
        "before  [",
        "after   [",
    ]:
        assert text in out
    assert "  accuracy                        24.3%   100.0%" in out
    assert out.count("\n") > 40
    # the progress lines: step 0 shows no movement, later steps show W_value moving
    assert "    0      1.479                       0.000    0.000    0.000" in out
    assert "  300   0.005966                       5.205    2.498   12.153" in out


def test_no_command_runs_the_demo(capsys):
    assert main([]) == 0
    assert "final weights" in capsys.readouterr().out


def test_demo_plot_without_matplotlib_says_how_to_get_it(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    assert main(["demo", "--plot", str(tmp_path / "fig.png")]) == 2
    assert "pip install 'npattn[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "fig.png").exists()


@pytest.mark.parametrize("command", [["demo"], ["train", "--task", "lm", "--text", "text.txt"]])
def test_plot_with_a_bad_mplbackend_is_one_line_before_any_work(capsys, tmp_path, monkeypatch, command):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "text.txt").write_text("every effort moves you forward. " * 40)
    script = (
        "import sys; from npattn.cli.main import main; "
        f"sys.exit(main({command!r} + ['--plot', {str(tmp_path / 'fig.png')!r}]))"
    )
    env = {**__import__("os").environ, "MPLBACKEND": "no-such-backend"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "matplotlib fails to start" in result.stderr and "MPLBACKEND" in result.stderr
    assert result.stdout == "" and not (tmp_path / "fig.png").exists()


def test_demo_plot_with_matplotlib(capsys, tmp_path):
    import pytest

    pytest.importorskip("matplotlib")
    assert main(["demo", "--plot", str(tmp_path / "fig.png")]) == 0
    assert (tmp_path / "fig.png").stat().st_size > 1000


def test_train_save_resume_and_errors(capsys, tmp_path):
    ck = tmp_path / "run.npz"
    assert main(["train", "--task", "teacher-student", "--steps", "40", "--log-every", "20", "--save", str(ck)]) == 0
    out = capsys.readouterr().out
    assert "teacher-student with adam(lr=0.05), seed 123, 40 steps" in out and f"saved {ck}" in out
    assert npattn.load(ck)["step"] == 40
    assert main(["train", "--steps", "60", "--resume", str(ck), "--save", str(ck)]) == 0
    assert npattn.load(ck)["step"] == 60
    # options that contradict the stored run are refused, not silently ignored
    assert main(["train", "--steps", "80", "--resume", str(ck), "--lr", "0.1"]) == 2
    assert "--lr 0.1 (checkpoint: 0.05)" in capsys.readouterr().err
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    assert main(["train", "--resume", str(tmp_path / "junk.npz")]) == 2
    assert "npattn train: error:" in capsys.readouterr().err
    m, _, _, _ = npattn.train_task("teacher-student", steps=60)
    np.testing.assert_array_equal(npattn.load(ck)["model"]["W_key"], m.W_key.data)


BAD_COMMAND_LINES = [
    ["train", "--steps", "-1"],
    ["train", "--steps", "abc"],
    ["train", "--log-every", "-1"],
    ["train", "--save-every", "-1", "--save", "x.npz"],
    ["train", "--save-every", "5", "--steps", "2"],
    ["train", "--seed", "-1"],
    ["train", "--seed", str(2**32)],
    ["train", "--lr", "nan", "--steps", "2"],
    ["train", "--lr", "-1", "--steps", "2"],
    ["train", "--task", "nope"],
    ["train", "--save", ".", "--steps", "2"],
    ["train", "--save", "missing/x.npz", "--steps", "2"],
    ["train", "--resume", "missing.npz"],
    ["train", "--resume", "."],
    ["train", "--resume", "/dev/null"],
    ["train", "--resume", "module.npz"],
    ["train", "--resume", "nan.npz"],  # a multi-line load_state_dict message, printed on one line
    ["trace", "--tokens", "-1"],
    ["trace", "--tokens", str(10**9)],
    ["trace", "--d-in", "0"],
    ["trace", "--seed", "-1"],
    ["trace", "--heads", "2"],
    ["trace", "--class", "mha", "--heads", "0"],
    ["trace", "--book", "--tokens", "3"],
    ["trace", "--book", "--class", "v2", "--seed", "5"],
    ["gradcheck", "--d-out", "-2"],
    ["gradcheck", "--tokens", "65"],
    ["gradcheck", "--seed", "x"],
    ["check", str(__file__).rsplit("/", 1)[0]],
    ["check"],
    ["demo", "--plot", "."],
    ["bogus"],
]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "--lr", "nan"], "Invalid learning rate: expected a finite number >= 0, got nan"),
        (["trace", "--book", "--tokens", "3"], "--tokens: --book uses the book's input, sizes and seeds"),
        (["trace", "--book", "--class", "v2", "--seed", "5"], "--seed: --book uses the book's input"),
        (["trace", "--book", "--d-in", "4", "--heads", "3"], "--d-in, --heads: --book uses"),
    ],
)
def test_a_refusal_comes_alone_before_any_output(capsys, argv, message) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err and captured.err.count("\n") == 1


@pytest.mark.parametrize("argv", BAD_COMMAND_LINES, ids=" ".join)
def test_every_bad_option_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    npattn.save(npattn.SelfAttention_v1(3, 2, rng=0), "module.npz")
    if argv[-1] == "nan.npz":
        npattn.train_task("teacher-student", steps=1, save="nan.npz")
        state = npattn.load("nan.npz")
        state["model"]["W_query"][0, 0] = np.nan
        state["model"]["W_key"] = np.zeros((1, 1))
        npattn.save(state, "nan.npz")
    if argv[:2] == ["demo", "--plot"]:
        pytest.importorskip("matplotlib")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("npattn") and "Traceback" not in err, err
