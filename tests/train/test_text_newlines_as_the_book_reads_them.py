"""A ``--text`` file with Windows line ends kept ``\\r`` as a token (in the vocabulary, the windows and
the losses); the book reads its text with ``open(path, "r", encoding="utf-8")``, whose universal
newlines turn ``\\r\\n`` and ``\\r`` into ``\\n``. npattn reads it the same way."""

from npattn.train.text import read_text


def test_crlf_and_cr_read_as_newlines(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"\xef\xbb\xbfHello world.\r\nSecond line\rthird\n")
    with open(path, encoding="utf-8") as f:  # the book's read, but for the byte-order mark npattn drops
        book = f.read().removeprefix("\ufeff")
    assert read_text(path) == book == "Hello world.\nSecond line\nthird\n"
