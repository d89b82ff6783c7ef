"""Gaussian mixture partition: recovery, determinism, high dimension, odd inputs, duplicates."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from clusterable.cluster import ClusterCountWarning, gmm


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
@pytest.mark.filterwarnings("ignore::clusterable.cluster.ClusterCountWarning")
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


THREE_LOCATIONS = np.repeat([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]], 4, axis=0)


def test_duplicated_points_give_k_clusters_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClusterCountWarning)
        labels = gmm(THREE_LOCATIONS, 3)
    assert adjusted_rand_score(np.repeat([0, 1, 2], 4), labels) == 1.0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_fewer_distinct_points_than_k_warns_naming_them():
    with pytest.warns(ClusterCountWarning, match="returned 3 clusters, not 4: .* only 3 distinct"):
        labels = gmm(THREE_LOCATIONS, 4)
    assert np.unique(labels).size == 3


def test_an_empty_component_warns_naming_it():
    # Ten distinct values, 0.001 and 0.002 closer than the regularised spread of a component.
    values = [-0.868, -0.561, -0.077, -0.013, -0.005, 0.001, 0.002, 0.014, 0.023, 3.066]
    x = np.repeat(values, [1, 1, 1, 3, 7, 4, 3, 1, 5, 1])[:, None]
    with pytest.warns(ClusterCountWarning, match="not 10: EM left 1 component"):
        labels = gmm(x, 10)
    assert np.unique(labels).size == 9
