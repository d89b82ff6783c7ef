"""k-means: recovery, determinism, inertia against scikit-learn, input checks, small sets."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import normalized_mutual_info_score

from clusterable.cluster import kmeans


def inertia(x: np.ndarray, labels: np.ndarray) -> float:
    return sum(((x[labels == c] - x[labels == c].mean(0)) ** 2).sum() for c in np.unique(labels))


def test_recovers_separated_gaussians():
    x, y = make_blobs(600, 16, centers=6, cluster_std=0.5, random_state=0)
    assert normalized_mutual_info_score(y, kmeans(x, 6, seed=0)) >= 0.99


def test_same_seed_same_labels():
    x, _ = make_blobs(500, 8, centers=20, cluster_std=3.0, random_state=1)
    assert np.array_equal(kmeans(x, 20, seed=3), kmeans(x, 20, seed=3))


@pytest.mark.parametrize("n,k,d", [(1000, 50, 32), (300, 10, 4)])
def test_inertia_no_worse_than_sklearn(n, k, d):
    x, _ = make_blobs(n, d, centers=k, cluster_std=3.0, random_state=0)
    ours = inertia(x, kmeans(x, k, seed=0, n_init=10))
    theirs = KMeans(k, n_init=10, random_state=0).fit(x).inertia_
    assert ours <= theirs * 1.01


def test_small_set_below_faiss_minimum_points():
    # n = 12 < 39 * k: faiss would warn and subsample; every point must still be placed correctly.
    x = np.repeat(np.arange(4.0)[:, None] * 10.0, 3, axis=0) + np.tile(
        [[0.0], [0.1], [0.2]], (4, 1)
    )
    labels = kmeans(x, 4)
    assert len(np.unique(labels)) == 4
    assert all(len(np.unique(labels[i : i + 3])) == 1 for i in range(0, 12, 3))


def test_n_equals_k_gives_singletons():
    x = np.random.default_rng(0).normal(size=(7, 3))
    assert sorted(kmeans(x, 7)) == list(range(7))


def test_torch_and_float32_input():
    torch = pytest.importorskip("torch")
    x, _ = make_blobs(100, 4, centers=3, random_state=0)
    assert np.array_equal(kmeans(torch.tensor(x, dtype=torch.float32), 3), kmeans(x, 3))


@pytest.mark.parametrize(
    "x,k,match",
    [
        (np.zeros((5, 2)), 6, "cannot make 6 clusters"),
        (np.zeros((5, 2)), 0, "cannot make 0 clusters"),
        (np.array([[0.0, np.nan], [1.0, 1.0]]), 1, "NaN"),
        (np.arange(5.0), 2, "2-D"),
        (np.zeros((5, 2)), 2.5, "integer"),
    ],
)
def test_bad_input_is_a_clear_value_error(x, k, match):
    with pytest.raises(ValueError, match=match):
        kmeans(x, k)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 12),
    d=st.integers(1, 3),
    k=st.integers(1, 12),
    kind=st.sampled_from(["random", "constant", "duplicates"]),
)
def test_odd_inputs_give_labels_or_value_error(n, d, k, kind):
    rng = np.random.default_rng(n * 100 + d)
    x = {"random": rng.normal(size=(n, d)), "constant": np.full((n, d), 3.0)}.get(
        kind, np.repeat(rng.normal(size=(1, d)), n, axis=0) + (np.arange(n) % 2)[:, None]
    )
    if k > n:
        with pytest.raises(ValueError):
            kmeans(x, k)
        return
    labels = kmeans(x, k)
    assert labels.shape == (n,) and labels.dtype == np.int64
    assert labels.min() >= 0 and labels.max() < k
