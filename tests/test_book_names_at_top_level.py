"""The chapter-5 names docs/training-lm.md lists beside ``npattn.calc_loss_batch`` are at the top
level too (and in ``__all__``), the same functions as in ``npattn.train.lm``."""

import pathlib
import re

import npattn
import npattn.train.lm as lm

BOOK_NAMES = ("calc_loss_batch", "calc_loss_loader", "evaluate_model", "generate_and_print_sample", "train_lm")


def test_the_book_names_are_top_level_and_exported() -> None:
    for name in BOOK_NAMES:
        assert getattr(npattn, name) is getattr(lm, name), name
        assert name in npattn.__all__, name


def test_every_name_the_loop_paragraph_lists_is_top_level() -> None:
    page = (pathlib.Path(__file__).parent.parent / "docs" / "training-lm.md").read_text(encoding="utf-8")
    start = page.index("`calc_loss_batch` (the mean")
    paragraph = page[start : page.index("```python", start)]
    listed = set(re.findall(r"`([a-z_]+)`", paragraph)) - {"train_model_simple"}  # the book's name of train_lm
    assert set(BOOK_NAMES) <= listed
    assert [name for name in sorted(listed) if not hasattr(npattn, name)] == []
