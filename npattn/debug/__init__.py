"""``npattn.debug``: the seed article's debugging habit as tools, one file per tool.

    formulas.py     each stage's name, formula and what it reads; the kinds of attention
    weights.py      the weights and outputs of any implementation as arrays
    predict.py      predict_shapes before running anything; check_shapes against a trace
    trace.py        trace: run a forward pass and record every stage
    rows.py         check_rows: the single-token check (the book's section 3.4)
    compare.py      compare: two implementations stage by stage, the first that diverges
    diagnose.py     diagnose: the catalogue of classic mistakes, reproduced exactly
    stagecheck.py   gradcheck_pipeline: every stage pair's gradient check, then the module's
    usercode.py     check_attention / ``npattn check``: a learner's own attention, checked
    userattention.py UserAttention: a learner's attention found in FILE.py:NAME, built, given weights
    backward.py     diagnose_backward: the catalogue of classic backward mistakes, reproduced exactly
    backvariant.py  backward_variant: npattn's attention backward with one choice per line
    backcheck.py    check_backward: each gradient against finite differences and npattn's gradient
    backsecond.py   the backward again after a forward on a second input (state kept from a call)
    userbackward.py a learner's backward (function pair or class) as the callables check_backward takes
"""

from npattn.debug.backcheck import BackwardCheck, check_backward
from npattn.debug.backward import BACKWARD_CATALOGUE, BackwardDiagnosis, BackwardMistake, diagnose_backward
from npattn.debug.compare import Comparison, StageDiff, compare
from npattn.debug.diagnose import CATALOGUE, Diagnosis, Mistake, diagnose
from npattn.debug.formulas import STAGE_FORMULAS, kind_of
from npattn.debug.predict import (
    ShapeCheck,
    ShapePrediction,
    StagePrediction,
    check_shapes,
    predict_shapes,
    predict_shapes_for,
)
from npattn.debug.rows import RowCheck, check_rows, check_rows_of
from npattn.debug.stagecheck import PipelineGradcheck, gradcheck_pipeline
from npattn.debug.trace import Stage, Trace, trace
from npattn.debug.usercode import CheckReport, check_attention
from npattn.debug.weights import check_weights, to_numpy, weights_of

__all__ = [
    "BACKWARD_CATALOGUE",
    "CATALOGUE",
    "STAGE_FORMULAS",
    "BackwardCheck",
    "BackwardDiagnosis",
    "BackwardMistake",
    "CheckReport",
    "Comparison",
    "Diagnosis",
    "Mistake",
    "PipelineGradcheck",
    "RowCheck",
    "ShapeCheck",
    "ShapePrediction",
    "Stage",
    "StageDiff",
    "StagePrediction",
    "Trace",
    "check_attention",
    "check_backward",
    "check_rows",
    "check_rows_of",
    "check_shapes",
    "check_weights",
    "compare",
    "diagnose",
    "diagnose_backward",
    "gradcheck_pipeline",
    "kind_of",
    "predict_shapes",
    "predict_shapes_for",
    "to_numpy",
    "trace",
    "weights_of",
]
