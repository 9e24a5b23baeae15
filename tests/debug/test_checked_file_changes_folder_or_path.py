"""A checked file whose top level changes the current folder or ``sys.path`` is checked like any
other (npattn's own clean-up of the file's folder on the path raised "list.remove(x): x not in
list", blamed on the user's function)."""

import sys

import pytest

from npattn.debug.userattention import load_attention

TOPS = {
    "os.chdir": "import os\nos.chdir({elsewhere!r})\n",
    "sys.path.clear()": "import sys\nsys.path.clear()\n",
    "sys.path = []": "import sys\nsys.path = []\n",
    "sys.path.remove(its folder)": "import sys, os\nsys.path.remove(os.path.dirname(os.path.realpath(__file__)))\n",
}


@pytest.mark.parametrize("top", TOPS)
def test_a_file_changing_folder_or_path_at_import_loads(tmp_path, monkeypatch, top):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "mine.py").write_text(
        TOPS[top].format(elsewhere=str(tmp_path / "elsewhere"))
        + "def attention(x, W_query, W_key, W_value):\n    return x @ W_value\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # restored after the test
    user = load_attention("code/mine.py:attention")
    assert user.name == "attention"
    assert str(tmp_path / "code") not in sys.path
