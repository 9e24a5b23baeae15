"""The losses take PyTorch's keywords at the values npattn implements and refuse the others."""

import numpy as np
import pytest

from npattn.errors import ConfigError
from npattn.nn import losses as L

LOGITS = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]])
TARGET = np.array([1, 2])


def test_defaults_and_implemented_values_are_accepted():
    plain = L.CrossEntropyLoss()(LOGITS, TARGET)
    crit = L.CrossEntropyLoss(weight=None, size_average=None, ignore_index=-100, reduce=None, label_smoothing=0.0)
    assert crit(LOGITS, TARGET) == plain
    assert L.cross_entropy(LOGITS, TARGET, "mean", ignore_index=-1, label_smoothing=0.0) == plain
    assert L.MSELoss(size_average=None, reduce=None)(LOGITS, LOGITS * 2) == L.mse_loss(LOGITS, LOGITS * 2, weight=None)
    for reduction in ("mean", "sum", "none"):
        L.CrossEntropyLoss(reduction=reduction)(LOGITS, TARGET)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"label_smoothing": 0.1}, r"label_smoothing=0\.1 is not supported .*leave it at 0\.0"),
        ({"weight": np.ones(3)}, r"weight=an array of shape \(3,\) is not supported .*leave it at None"),
        ({"ignore_index": 0}, r"ignore_index=0 is not supported .*negative integer"),
        ({"size_average": True}, r"size_average=True is not supported .*reduction="),
        ({"reduce": False}, r"reduce=False is not supported"),
        ({"reduction": "avg"}, r"reduction must be one of .*got 'avg'"),
    ],
)
def test_unimplemented_values_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        L.CrossEntropyLoss(**kwargs)
    with pytest.raises(ConfigError, match=message):
        L.cross_entropy(LOGITS, TARGET, **kwargs)


def test_mse_refuses_torch_keywords_it_does_not_implement():
    with pytest.raises(ConfigError, match="MSELoss: reduce=False"):
        L.MSELoss(reduce=False)
    with pytest.raises(ConfigError, match="mse_loss: weight=an array"):
        L.mse_loss(LOGITS, LOGITS, weight=np.ones(3))
