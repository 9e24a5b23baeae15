"""Plain HTML for the reports' ``_repr_html_`` (Jupyter): tables and a small heatmap, no matplotlib.

Every function returns a string of HTML with inline CSS only (no scripts, no external files), so
a notebook renders it as it is and an exported notebook keeps it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["heatmap", "table", "wrap"]

_CELL = "padding:2px 8px;text-align:left;font-family:monospace;border-bottom:1px solid #ddd"
_STATUS = {"ok": "#1a7f37", "FAIL": "#cf222e", "MISMATCH": "#cf222e", "WRONG": "#cf222e", "PASSED": "#1a7f37"}


def _cell(value: Any, tag: str = "td") -> str:
    text = html.escape(str(value))
    color = _STATUS.get(str(value))
    style = _CELL + (f";color:{color};font-weight:bold" if color else "")
    return f'<{tag} style="{style}">{text}</{tag}>'


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> str:
    """A table with a header row; cells are escaped; "ok"/"FAIL" cells are coloured."""
    cap = f'<caption style="text-align:left;font-weight:bold">{html.escape(caption)}</caption>' if caption else ""
    head = "<tr>" + "".join(_cell(h, "th") for h in header) + "</tr>"
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f'<table style="border-collapse:collapse">{cap}<thead>{head}</thead><tbody>{body}</tbody></table>'


def heatmap(weights: Any, labels: Sequence[str] | None = None, caption: str = "attention weights") -> str:
    """An (n, m) matrix of weights in [0, 1] as a table of shaded cells (darker = larger), values printed.

    Higher-dimensional arrays show their first matrix (the first sequence, the first head).
    """
    a = np.asarray(weights, dtype=np.float64)
    while a.ndim > 2:
        a = a[0]
    a = np.atleast_2d(a)
    cells = []
    for i, row in enumerate(a):
        label = labels[i] if labels is not None and i < len(labels) else str(i)
        tds = []
        for v in row:
            level = float(np.clip(v, 0.0, 1.0)) if np.isfinite(v) else 0.0
            shade = round(255 * (1.0 - level))
            ink = "#fff" if level > 0.55 else "#000"
            tds.append(
                f'<td title="{v:.6g}" style="background:rgb({shade},{shade},255);color:{ink};'
                f'padding:2px 5px;font-family:monospace;font-size:80%;text-align:right">{v:.2f}</td>'
            )
        cells.append(f'<tr><th style="{_CELL}">{html.escape(label)}</th>{"".join(tds)}</tr>')
    keys = labels if labels is not None and len(labels) == a.shape[1] else [str(j) for j in range(a.shape[1])]
    head = "<tr><th></th>" + "".join(f'<th style="{_CELL};font-size:80%">{html.escape(k)}</th>' for k in keys) + "</tr>"
    cap = f'<caption style="text-align:left;font-weight:bold">{html.escape(caption)}</caption>'
    return f'<table class="npattn-heatmap" style="border-collapse:collapse">{cap}{head}{"".join(cells)}</table>'


def wrap(*parts: str, text: str = "") -> str:
    """Parts one under the other; ``text`` (a plain-text report) appended as a preformatted block."""
    pre = f'<pre style="font-size:85%">{html.escape(text)}</pre>' if text else ""
    return '<div class="npattn-report">' + "".join(f"<div>{p}</div>" for p in parts) + pre + "</div>"
