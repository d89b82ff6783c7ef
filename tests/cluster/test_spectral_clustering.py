"""DSCL Algorithm 2: recovery, equality with a direct transcription, odd inputs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from clusterable.cluster import ClusterCountWarning, kmeans, spectral, spectral_embedding
from clusterable.evaluate import evaluate_embeddings


def algorithm_2(f: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Law et al. (2017), Algorithm 2, line by line."""
    m = f - f.mean(axis=0)  # 1: mean centring
    r = np.linalg.matrix_rank(m)  # 2: r = rank(M_t)
    u = np.linalg.svd(m, full_matrices=False)[0][:, :r]  # 3: M_t M_t^+ = U_t U_t^T
    t = u / np.linalg.norm(u, axis=1, keepdims=True)  # 4: l2-normalised rows
    return kmeans(t, k, seed=seed)  # 5


def test_recovers_separated_gaussians():
    x, y = make_blobs(500, 10, centers=5, cluster_std=0.5, random_state=0)
    assert normalized_mutual_info_score(y, spectral(x, 5, seed=0)) >= 0.99


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paper_rank_equals_direct_transcription_of_algorithm_2(seed):
    x, _ = make_blobs(300, 12, centers=8, cluster_std=2.5, random_state=seed)
    labels = spectral(x, 8, seed=seed, rank=None)
    assert adjusted_rand_score(algorithm_2(x, 8, seed), labels) == 1.0


def low_rank_clusters(n=2000, k=20, rank=10, d=64, seed=0):
    """``k`` clusters of a ``rank``-dimensional subspace of ``R^d``, and their labels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    inside = 3 * rng.normal(size=(k, rank))[labels] + 0.3 * rng.normal(size=(n, rank))
    basis = np.linalg.qr(rng.normal(size=(d, d)))[0][:rank]  # (rank, d) orthonormal rows
    return inside @ basis + 5.0, labels  # (n, d), off the origin


def test_float32_points_of_a_low_rank_set_have_its_rank_and_its_clusters():
    """The rank is decided at the precision the points were given in: float32 rounding of a
    rank-10 set made 54 more directions above float64's tolerance, and step 3 scaled that noise
    up to weigh as much as the 10 (rank 64, ARI 0.89 where float64 gives 1.0)."""
    x, y = low_rank_clusters()
    x32 = x.astype(np.float32)
    assert spectral_embedding(x).shape[1] == spectral_embedding(x32).shape[1] == 10
    assert adjusted_rand_score(y, spectral(x, 20, seed=0)) == 1.0
    assert adjusted_rand_score(y, spectral(x32, 20, seed=0)) == 1.0


def test_rank_option_truncates_to_k_leading_vectors():
    x, y = make_blobs(300, 20, centers=4, cluster_std=0.5, random_state=0)
    assert normalized_mutual_info_score(y, spectral(x, 4, rank=4)) >= 0.99


def test_deterministic():
    x, _ = make_blobs(300, 8, centers=6, cluster_std=3.0, random_state=0)
    assert np.array_equal(spectral(x, 6, seed=5), spectral(x, 6, seed=5))


def test_constant_data_needs_k_equal_one():
    assert np.array_equal(spectral(np.ones((4, 3)), 1), np.zeros(4))
    with pytest.raises(ValueError, match="all points are equal"):
        spectral(np.ones((4, 3)), 2)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 10), d=st.integers(1, 3), k=st.integers(1, 10), dup=st.booleans())
def test_odd_inputs_give_labels_or_value_error(n, d, k, dup):
    x = np.random.default_rng(n + 10 * d).normal(size=(n, d))
    if dup:
        x[n // 2 :] = x[0]
    try:
        labels = spectral(x, k)
    except ValueError as error:
        assert "cluster" in str(error) or "equal" in str(error)
        return
    assert labels.shape == (n,) and labels.min() >= 0 and labels.max() < k


def test_default_rank_k_recovers_blobs_where_the_papers_rank_collapses():
    # d = 20 > k = 3: r = rank(M_t) = 20 whitens 17 noise directions to the weight of the 2 class
    # directions (ARI 0.06); r = k keeps the class directions (ARI 1.0).
    x, y = make_blobs(60, 20, centers=3, random_state=0)
    assert adjusted_rand_score(y, spectral(x, 3)) == 1.0
    assert adjusted_rand_score(y, spectral(x, 3, rank=3)) == 1.0
    assert adjusted_rand_score(y, spectral(x, 3, rank=None)) < 0.1
    assert evaluate_embeddings(x, y, clustering="spectral")["ari"] == 1.0


def test_paper_rank_and_default_agree_when_d_equals_k():
    x, _ = make_blobs(200, 6, centers=6, cluster_std=1.5, random_state=0)
    assert np.array_equal(spectral(x, 6, rank=None), spectral(x, 6))


@pytest.mark.parametrize("rank", [0, -1, 2.5, "paper", True])
def test_invalid_rank_is_a_value_error(rank):
    with pytest.raises(ValueError, match="rank must be"):
        spectral(np.random.default_rng(0).normal(size=(10, 3)), 2, rank=rank)


def test_rank_one_points_warn_of_spectral_rows_not_of_kmeans_points():
    """Three blobs on a line, asked for three clusters: Algorithm 2's unit rows are -1 and +1
    only, so two clusters come out. The warning said "kmeans returned 2 clusters, not 3: the 60
    points hold only 2 distinct points", of a method not called and of points that are all
    distinct."""
    line = np.repeat([0.0, 6.0, 12.0], 20)[:, None] + np.random.default_rng(0).normal(size=(60, 1))
    with pytest.warns(ClusterCountWarning) as caught:
        labels = spectral(line, 3)
    assert np.unique(labels).size == 2
    assert [str(warning.message) for warning in caught] == [
        "spectral returned 2 clusters, not 3: its unit rows of rank 1 (Algorithm 2, steps 3-4) "
        "hold only 2 distinct points; ask for at most 2 clusters, or use kmeans"
    ]


def test_duplicated_points_warn_of_the_points_by_the_spectral_name():
    with pytest.warns(ClusterCountWarning, match=r"^spectral returned 2 clusters, not 3: the 10 "):
        spectral(np.repeat([[0.0, 0.0], [1.0, 3.0]], 5, axis=0), 3)
