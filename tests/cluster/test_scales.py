"""The partition algorithms answer in any units: the same partition at every scale and offset.

Three well-separated groups, multiplied by ``10**exponent`` and moved by ``offset`` times that
scale, must be partitioned exactly as at unit scale: squared distances of the raw values overflow
above ~1e154 (float64) or 1e19 (float32), vanish below, and cancel far from the origin.
"""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sklearn.metrics import adjusted_rand_score

from clusterable.cluster import (
    aas,
    affinity_propagation,
    gmm,
    kmeans,
    spectral,
    spectral_embedding,
)

ALGORITHMS = {
    "kmeans": lambda x: kmeans(x, 3),
    "spectral": lambda x: spectral(x, 3),
    "gmm": lambda x: gmm(x, 3),
    "affinity_propagation": lambda x: affinity_propagation(x, 3),
    "aas": lambda x: aas(x, k_graph=7),
}


def three_groups(seed: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Eight points around each of three centres 10 apart, spread 0.3, and their group ids."""
    rng = np.random.default_rng(seed)
    centres = 10.0 * np.eye(3, d)
    labels = np.repeat(np.arange(3), 8)
    return centres[labels] + rng.normal(0.0, 0.3, (labels.size, d)), labels


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    return adjusted_rand_score(a, b) == 1.0


@pytest.mark.parametrize("name", list(ALGORITHMS))
@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    d=st.sampled_from([2, 12]),  # 12 > aas.KD_TREE_MAX_DIM: the faiss kNN search
    exponent=st.integers(-300, 300),
    offset=st.sampled_from([0.0, 1e3, 1e6]),
)
@example(seed=0, d=12, exponent=300, offset=1e6)
@example(seed=0, d=12, exponent=200, offset=0.0)
@example(seed=0, d=12, exponent=-30, offset=0.0)
@example(seed=0, d=12, exponent=0, offset=1e9)
def test_float64_partition_does_not_depend_on_scale_or_offset(name, seed, d, exponent, offset):
    x, groups = three_groups(seed, d)
    cluster = ALGORITHMS[name]
    unit = cluster(x)
    if name != "aas":  # AAS picks its own number of modes; the others must find the groups
        assert same_partition(unit, groups)
    scale = 10.0**exponent
    assert same_partition(cluster(x * scale + offset * scale), unit)


@pytest.mark.parametrize("name", list(ALGORITHMS))
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), d=st.sampled_from([2, 12]), exponent=st.integers(-30, 30))
@example(seed=0, d=12, exponent=19)
@example(seed=0, d=12, exponent=-30)
@example(seed=0, d=2, exponent=-25)
def test_float32_partition_does_not_depend_on_scale(name, seed, d, exponent):
    x, _ = three_groups(seed, d)
    x = x.astype(np.float32)
    cluster = ALGORITHMS[name]
    scaled = (x.astype(np.float64) * 10.0**exponent).astype(np.float32)
    assert same_partition(cluster(scaled), cluster(x))


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    exponent=st.integers(-300, 300),
    offset=st.sampled_from([0.0, 1e3, 1e6]),
)
@example(seed=0, exponent=300, offset=1e6)
@example(seed=0, exponent=306, offset=0.0)
def test_spectral_embedding_does_not_depend_on_scale_or_offset(seed, exponent, offset):
    # T T^T: the singular vectors are only defined up to a rotation within equal singular values.
    x, _ = three_groups(seed, 12)
    unit = spectral_embedding(x, rank=3)
    scale = 10.0**exponent
    scaled = spectral_embedding(x * scale + offset * scale, rank=3)
    np.testing.assert_allclose(scaled @ scaled.T, unit @ unit.T, atol=1e-6)
