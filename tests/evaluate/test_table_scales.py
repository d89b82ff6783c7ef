"""evaluate_embeddings answers in any units: the same table at every float32 scale 1e-30 .. 1e30."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from clusterable.evaluate import evaluate_embeddings


def grouped_points(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Ten float32 points around each of four centres 10 apart, spread 0.5, and their classes."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(4), 10)
    x = 10.0 * np.eye(4, 6)[labels] + rng.normal(0.0, 0.5, (labels.size, 6))
    return x.astype(np.float32), labels


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), exponent=st.integers(-30, 30))
@example(seed=0, exponent=30)
@example(seed=0, exponent=19)
@example(seed=0, exponent=-30)
def test_the_table_does_not_depend_on_the_scale(seed, exponent):
    x, labels = grouped_points(seed)
    unit = evaluate_embeddings(x, labels, ks=(1, 5), seed=seed)
    scaled = (x.astype(np.float64) * 10.0**exponent).astype(np.float32)
    table = evaluate_embeddings(scaled, labels, ks=(1, 5), seed=seed)
    assert table.keys() == unit.keys()
    for key, value in unit.items():
        assert table[key] == pytest.approx(value, abs=1e-6), key
