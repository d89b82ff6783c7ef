"""Gaussian mixture partition: recovery, determinism, high dimension, odd inputs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_blobs
from sklearn.metrics import normalized_mutual_info_score

from clusterable.cluster import gmm


def test_recovers_separated_gaussians():
    x, y = make_blobs(600, 8, centers=5, cluster_std=0.5, random_state=0)
    assert normalized_mutual_info_score(y, gmm(x, 5, seed=0)) >= 0.99


def test_high_dimension_fewer_points_per_component_than_dimensions():
    # 40 points per component in 128-D: a full covariance would be singular.
    x, y = make_blobs(200, 128, centers=5, cluster_std=1.0, random_state=0)
    assert normalized_mutual_info_score(y, gmm(x, 5)) >= 0.99


def test_scale_invariant_regularisation():
    x, _ = make_blobs(300, 4, centers=4, cluster_std=2.0, random_state=0)
    assert np.array_equal(gmm(x, 4), gmm(x * 1e-4, 4))


def test_deterministic():
    x, _ = make_blobs(300, 4, centers=6, cluster_std=3.0, random_state=0)
    assert np.array_equal(gmm(x, 6, seed=2), gmm(x, 6, seed=2))


def test_k_larger_than_n_is_a_value_error():
    with pytest.raises(ValueError, match="cannot make"):
        gmm(np.zeros((3, 2)), 4)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 10), k=st.integers(1, 10), constant=st.booleans())
def test_odd_inputs_give_labels_or_value_error(n, k, constant):
    x = np.full((n, 2), 1.5) if constant else np.random.default_rng(n).normal(size=(n, 2))
    if k > n:
        with pytest.raises(ValueError):
            gmm(x, k)
        return
    labels = gmm(x, k)
    assert labels.shape == (n,) and labels.min() >= 0 and labels.max() < k
