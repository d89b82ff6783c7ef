"""k-means: recovery, determinism, inertia against scikit-learn, input checks, small sets."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from clusterable._optional import installed
from clusterable.cluster import ClusterCountWarning, _kmeans_assignments, kmeans
from clusterable.cluster._kmeans_assignments import Assignments
from clusterable.cluster._kmeans_frame import KMeansFrame
from clusterable.cluster._kmeans_seeding import greedy_kmeans_plusplus, initial_centroids
from clusterable.cluster._lloyd import MemberSums, lloyd


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
    # Averaged over seeds on both sides: one seed's best of 10 restarts varies by about 2 % on
    # either side.
    x, _ = make_blobs(n, d, centers=k, cluster_std=3.0, random_state=0)
    seeds = range(4)
    ours = np.mean(
        [inertia(x, kmeans(x, k, seed=s, n_init=10, init="k-means++", max_iter=300)) for s in seeds]
    )
    theirs = np.mean([KMeans(k, n_init=10, random_state=s).fit(x).inertia_ for s in seeds])
    assert ours <= theirs * 1.01


@pytest.mark.parametrize("seed", range(5))
def test_kmeans_plusplus_puts_one_seed_in_each_far_group(seed):
    # Eight tight groups far apart: a draw in proportion to squared distance lands in a group
    # that holds no seed yet with probability above 1 - 1e-6. Uniform draws would cover all
    # eight in 0.24 % of seeds.
    rng = np.random.default_rng(seed)
    centres = 100.0 * rng.standard_normal((8, 5))
    x = (np.repeat(centres, 40, axis=0) + rng.standard_normal((320, 5))).astype(np.float32)
    rows = greedy_kmeans_plusplus(x, 8, np.random.default_rng(seed), (x * x).sum(1))
    assert sorted(rows // 40) == list(range(8))


def test_kmeans_plusplus_never_draws_a_duplicate_of_a_seed_while_others_are_left():
    x = np.repeat(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32), 10, axis=0)
    for seed in range(10):
        rows = greedy_kmeans_plusplus(x, 3, np.random.default_rng(seed), (x * x).sum(1))
        assert len({tuple(p) for p in x[rows]}) == 3


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


# Twenty copies of one point and one copy each of five others: six distinct points.
DUPLICATED = np.repeat(np.random.default_rng(0).normal(size=(6, 3)), [20, 1, 1, 1, 1, 1], axis=0)


@pytest.mark.parametrize("init", ["random", "k-means++"])
@pytest.mark.parametrize("seed", range(6))
def test_duplicated_points_give_k_clusters_without_a_warning(init, seed):
    # Random seeds land on copies of one point; its twin centroid must move, not stay empty.
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClusterCountWarning)
        labels = kmeans(DUPLICATED, 6, seed=seed, init=init, n_init=1)
    assert np.unique(labels).size == 6


def test_fewer_distinct_points_than_k_warns_naming_them():
    with pytest.warns(ClusterCountWarning, match="returned 6 clusters, not 7: .* only 6 distinct"):
        labels = kmeans(DUPLICATED, 7)
    assert np.unique(labels).size == 6


@pytest.mark.parametrize("exponent", [-30, -25, 0, 19, 30])
def test_float32_partition_does_not_depend_on_scale(exponent):
    # At 1e19 the float32 squared distances overflow (faiss aborted the process); at 1e-25 they
    # vanish (one cluster came back).
    rng = np.random.default_rng(0)
    x = (np.repeat(10.0 * np.eye(3, 4), 8, axis=0) + rng.normal(0.0, 0.3, (24, 4))).astype(
        np.float32
    )
    scaled = (x.astype(np.float64) * 10.0**exponent).astype(np.float32)
    assert adjusted_rand_score(kmeans(scaled, 3), np.repeat(np.arange(3), 8)) == 1.0


def test_far_from_the_origin_float64_is_clustered_like_at_the_origin():
    x, y = make_blobs(300, 8, centers=5, cluster_std=0.5, random_state=0)
    assert adjusted_rand_score(kmeans(x + 1e9, 5), y) == 1.0


@pytest.mark.parametrize("init", ["random", "k-means++"])
def test_result_is_a_lloyd_fixed_point(init):
    # Stopped because no assignment changed: each point is nearest its own cluster's mean.
    x, _ = make_blobs(800, 16, centers=40, cluster_std=2.0, random_state=2)
    labels = kmeans(x, 40, seed=0, init=init, n_init=1, max_iter=500)
    means = np.stack([x[labels == c].mean(0) for c in range(40)])
    nearest = ((x[:, None, :] - means[None]) ** 2).sum(-1).argmin(1)
    assert np.array_equal(nearest, labels)


def test_one_random_restart_is_as_good_as_pml_faiss_kmeans():
    # The evaluation's k-means (one random restart, 20 iterations at most) against
    # pytorch-metric-learning's faiss.Kmeans(niter=20), on many small clusters.
    faiss = pytest.importorskip("faiss")
    x, _ = make_blobs(3000, 32, centers=300, cluster_std=2.0, random_state=0)
    x = x.astype(np.float32)
    ours = inertia(x, kmeans(x, 300, seed=0, init="random", n_init=1, max_iter=20))
    reference = faiss.Kmeans(32, 300, niter=20, seed=1234)
    reference.train(x)
    theirs = inertia(x, reference.index.search(x, 1)[1][:, 0])
    assert ours <= theirs * 1.01


@pytest.mark.cuda
def test_kmeans_on_the_gpu_equals_the_cpu():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 16))[rng.integers(0, 8, 600)] * 4 + rng.standard_normal((600, 16))
    on_device = kmeans(x.astype(np.float32), 8, seed=1, device="cuda")
    on_cpu = kmeans(x.astype(np.float32), 8, seed=1, device="cpu")
    from clusterable.evaluate import nmi

    assert nmi(on_cpu, on_device) > 0.99


def test_torch_back_end_gives_the_faiss_partition():
    # The code path a GPU takes, run on the CPU.
    x, _ = make_blobs(500, 8, centers=10, cluster_std=1.0, random_state=0)
    labels = kmeans(x, 10, seed=0, n_init=1)
    import torch

    frame = KMeansFrame(np.asarray(x, dtype=np.float32))
    seeds, _ = initial_centroids(frame, 10, "k-means++", np.random.default_rng(0))
    via_torch, _ = lloyd(frame, seeds, 50, torch.device("cpu"), backend="torch")
    assert adjusted_rand_score(labels, via_torch) == 1.0


@pytest.mark.parametrize("backend", ["torch", *(["faiss"] if installed("faiss") else [])])
def test_bounded_assignments_give_the_full_search_partition(monkeypatch, backend):
    # Many clusters, so assignments keep bounds and search only where they must; the labels and
    # the inertia must be those of searching every centroid at every iteration.
    import torch

    x, _ = make_blobs(3000, 8, centers=60, cluster_std=2.0, random_state=1)
    x[2900:] = x[:100]  # duplicates
    frame = KMeansFrame(np.asarray(x, dtype=np.float32))
    seeds, _ = initial_centroids(frame, 300, "random", np.random.default_rng(0))
    calls = []
    search_all = _kmeans_assignments.nearest_centroids
    monkeypatch.setattr(
        _kmeans_assignments,
        "nearest_centroids",
        lambda *a: calls.append(a[4] is None) or search_all(*a),
    )
    cpu = torch.device("cpu")
    bounded, bounded_inertia = lloyd(frame, seeds.copy(), 50, cpu, backend)
    assert len(calls) > 3 and not all(calls)  # some assignments searched only some points
    monkeypatch.setattr(_kmeans_assignments, "BOUNDED_MIN_CLUSTERS", 10**9)
    full, full_inertia = lloyd(frame, seeds.copy(), 50, cpu, backend)
    np.testing.assert_array_equal(bounded, full)
    assert bounded_inertia == pytest.approx(full_inertia, rel=1e-5)


@pytest.mark.parametrize("k", [40, 400])
def test_starting_from_neighbour_lists_gives_the_same_partition(k):
    # Each point's nearest seed read off its kNN list instead of searched among all seeds.
    from clusterable.evaluate import knn_search

    # No duplicate points: two seeds on one spot tie, and a search and a list break it apart.
    x, _ = make_blobs(2000, 16, centers=50, cluster_std=3.0, random_state=2)
    neighbours = knn_search(x, 32)[1]
    plain = kmeans(x, k, seed=3, n_init=2, init="random", max_iter=30)
    started = kmeans(x, k, seed=3, n_init=2, init="random", max_iter=30, neighbours=neighbours)
    np.testing.assert_array_equal(started, plain)


@pytest.mark.parametrize("backend", ["torch", *(["faiss"] if installed("faiss") else [])])
def test_the_first_assignment_reads_the_nearest_seed_off_the_lists(monkeypatch, backend):
    import torch

    from clusterable.evaluate import knn_search

    x = make_blobs(1500, 8, centers=30, cluster_std=2.0, random_state=4)[0].astype(np.float32)
    frame = KMeansFrame(x)
    seeds, rows = initial_centroids(frame, 60, "random", np.random.default_rng(0))
    neighbours = knn_search(x, 16)[1]
    searched = []
    search_all = _kmeans_assignments.nearest_centroids
    monkeypatch.setattr(
        _kmeans_assignments, "nearest_centroids", lambda *a: searched.append(a[4]) or search_all(*a)
    )
    assign = Assignments(frame, 60, torch.device("cpu"), backend)
    assign.start_from(rows, neighbours)
    labels, squared = assign(seeds)
    squared_to_seeds = ((x[:, None, :].astype(np.float64) - seeds[None]) ** 2).sum(-1)  # (n, k)
    np.testing.assert_array_equal(labels, squared_to_seeds.argmin(axis=1))
    np.testing.assert_allclose(squared, squared_to_seeds.min(axis=1), rtol=1e-5, atol=1e-6)
    # Only the points that are no seed and list none searched.
    listed = np.isin(neighbours, rows).any(axis=1) | np.isin(np.arange(x.shape[0]), rows)
    assert 0 < (~listed).sum() < x.shape[0]
    np.testing.assert_array_equal(searched[0], np.flatnonzero(~listed))


@pytest.mark.parametrize(
    "neighbours, match",
    [(np.zeros((5, 3), dtype=np.int64), r"\(n, m\)"), (np.full((20, 3), 20), r"\[0, 20\)")],
)
def test_bad_neighbour_lists_are_refused(neighbours, match):
    x = np.random.default_rng(0).standard_normal((20, 2))
    with pytest.raises(ValueError, match=match):
        kmeans(x, 3, neighbours=neighbours)


def test_member_sums_follow_the_labels_that_changed():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((500, 6)).astype(np.float32)
    members = MemberSums(KMeansFrame(x), 7)
    labels = rng.integers(0, 7, 500)
    for _ in range(4):
        means, counts = members.means(labels)
        expected_counts = np.bincount(labels, minlength=7)
        np.testing.assert_array_equal(counts, expected_counts)
        for c in range(7):
            np.testing.assert_allclose(means[c], x[labels == c].mean(axis=0), rtol=1e-5, atol=1e-6)
        changed = rng.random(500) < 0.1  # a few points move, as in late Lloyd iterations
        labels = np.where(changed, rng.integers(0, 7, 500), labels)
