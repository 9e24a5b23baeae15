"""The reports render as HTML in Jupyter (``_repr_html_``): well-formed, plain HTML/CSS, the expected cells."""

from html.parser import HTMLParser

import learners
import numpy as np
import pytest

import npattn
from npattn.debug.usercode import attention_from_module, check_attention

VOID = {"br", "hr", "img", "meta", "input", "col"}


class Cells(HTMLParser):
    """Collects the text of every <td>/<th>/<caption>/<pre>, and checks that every tag is closed in order."""

    def __init__(self):
        super().__init__()
        self.open, self.cells, self.tags, self.text = [], [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.open.append(tag)
        if tag in ("td", "th", "caption", "pre"):
            self.text = ""

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, f"</{tag}> closes <{self.open[-1] if self.open else None}>"
        self.open.pop()
        if tag in ("td", "th", "caption", "pre"):
            self.cells.append(self.text)
            self.text = None

    def handle_data(self, data):
        if self.text is not None:
            self.text += data


def parse(obj):
    page = obj._repr_html_()
    assert "<script" not in page and "matplotlib" not in page
    parser = Cells()
    parser.feed(page)
    parser.close()
    assert not parser.open, f"unclosed tags: {parser.open}"
    return parser


def test_trace_renders_its_stages_and_a_heatmap_of_the_attention_weights():
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    tr = npattn.trace(model, npattn.book_inputs())
    p = parse(tr)
    assert "attn_weights" in p.cells and "softmax(attn_scores / sqrt(d_k)) over keys" in p.cells
    shaded = [a for t, a in p.tags if t == "td" and "background:rgb" in a.get("style", "")]
    assert len(shaded) == 36  # one shaded cell per (query, key) pair
    weights = np.asarray(tr["attn_weights"])
    assert shaded[1]["title"] == f"{weights[0, 1]:.6g}"
    assert f"{weights[0, 1]:.2f}" in p.cells


def test_the_heatmap_of_multi_head_weights_shows_the_first_head():
    mha = npattn.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2, rng=123)
    p = parse(npattn.trace(mha, npattn.book_batch()))
    assert sum(1 for t, a in p.tags if t == "td" and "background:rgb" in a.get("style", "")) == 36
    assert any("first sequence, first head" in c for c in p.cells)


def test_shape_prediction_renders_shapes_and_memory():
    p = parse(npattn.predict_shapes(6, 3, 2))
    assert ["attn_scores", "queries @ keys^T", "(6, 6)", "144 B", "288 B"] == p.cells[p.cells.index("attn_scores") :][
        :5
    ]
    assert any("all stages: 552 B in float32" in c for c in p.cells)


def test_prediction_memory_is_the_n_by_n_arithmetic():
    pred = npattn.predict_shapes(4096, 768, 64, batch=2)
    assert pred.memory(np.float32)["attn_weights"] == 2 * 4096 * 4096 * 4 == pred.stages[5].nbytes()
    assert pred.memory(np.float64)["context_vec"] == 2 * 4096 * 64 * 8
    assert pred.total_bytes(np.float16) * 2 == pred.total_bytes(np.float32)
    # x 24 MiB, queries, keys, values 2 MiB each, attn_scores and attn_weights 128 MiB each, context_vec 2 MiB
    assert "all stages: 288 MiB in float32, 576 MiB in float64" in str(pred)


def test_gradcheck_report_renders():
    report = npattn.gradcheck(npattn.SelfAttention_v1(3, 2, rng=123), npattn.book_inputs())
    p = parse(report)
    assert p.cells[:8] == [
        "gradient check",
        "tensor",
        "shape",
        "max abs err",
        "max rel err",
        "allowed",
        "margin",
        "result",
    ]
    assert "W_query" in p.cells and "ok" in p.cells and any("PASSED" in c for c in p.cells)


def test_diagnosis_and_comparison_render():
    x, weights = npattn.book_inputs(), npattn.weights_of(npattn.SelfAttention_v1(3, 2, rng=123))
    wrong = npattn.SelfAttention_v1(3, 2, rng=123)(x) * 2
    p = parse(npattn.diagnose(x, weights, wrong))
    assert "WRONG" in p.cells and "outside_value_range" in p.cells
    model = npattn.SelfAttention_v1(3, 2, rng=123)
    p = parse(npattn.compare(model, model, x))
    assert "context_vec" in p.cells and "ok" in p.cells


@pytest.mark.parametrize(
    ("name", "expected"), [("attention", "ok"), ("softmax_backward_identity", "softmax_backward_identity")]
)
def test_check_reports_render(name, expected):
    report = check_attention(attention_from_module(learners, name))
    p = parse(report)
    assert "context_vec" in p.cells  # the shape table
    assert ["dW_key", "(3, 2)", "finite differences"] == p.cells[p.cells.index("dW_key") :][:3]
    assert any(expected in c for c in p.cells)
    p = parse(report.backward)
    assert "npattn's gradient" in p.cells
