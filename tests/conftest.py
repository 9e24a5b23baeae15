import os

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


# Property-test profiles (tests/test_properties.py). "ci", the default, is fast and reproducible:
# the same examples on every run. "long" explores thousands of fresh examples per property:
#     NPATTN_HYPOTHESIS_PROFILE=long python -m pytest -q tests/test_properties.py
try:
    from hypothesis import settings
except ImportError:  # hypothesis is in the test extra; without it the property tests skip
    pass
else:
    settings.register_profile("ci", max_examples=50, deadline=None, derandomize=True, print_blob=True)
    settings.register_profile("long", max_examples=2000, deadline=None, print_blob=True)
    settings.load_profile(os.environ.get("NPATTN_HYPOTHESIS_PROFILE", "ci"))
