import subprocess
import sys

from npattn.cli import main


def test_demo_prints_shapes_output_and_gradcheck(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for text in ["attn_weights   (6, 6)", "context_vec    (6, 2)", "journey  [ 0.3061,  0.8210]", "PASSED"]:
        assert text in out


def test_python_dash_m_runs():
    result = subprocess.run([sys.executable, "-m", "npattn", "--help"], capture_output=True, text=True, check=True)
    assert "demo" in result.stdout
