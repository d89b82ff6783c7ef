"""HDBSCAN: scikit-learn's labels, the nearest-core-point rule for new points (a fitted point given
again keeps its label, noise included), and how the metrics count its noise."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import HDBSCAN
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.neighbors import NearestNeighbors

from clusterable.cluster import fit, hdbscan
from clusterable.cluster._validation import Rescaling
from clusterable.cluster.hdbscan import NearestCorePointPartition
from clusterable.evaluate import EvaluationOptions, evaluate_embeddings, nmi, pairwise_f1


def blobs_and_noise(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three blobs of different spread and 30 uniform points; labels -1 for the uniform ones."""
    rng = np.random.default_rng(seed)
    x = np.concatenate(
        [
            rng.normal((0, 0), 0.3, (80, 2)),
            rng.normal((6, 0), 0.6, (60, 2)),
            rng.normal((0, 7), 0.4, (50, 2)),
            rng.uniform(-4, 10, (30, 2)),
        ]
    )
    return x, np.repeat([0, 1, 2, -1], [80, 60, 50, 30])


def blobs_and_noise_in_32d(seed: int = 0) -> np.ndarray:
    """Three blobs and 50 uniform points in 32 dimensions, ``(200, 32)`` float32. The
    nearest-neighbour search is brute force there (``|a|^2 + |b|^2 - 2ab``), whose rounding puts
    some points a small nonzero distance from themselves."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 4, (3, 32))
    blobs = centres[np.arange(150) % 3] + rng.normal(0, 1, (150, 32))
    return np.concatenate([blobs, rng.uniform(-5, 5, (50, 32))]).astype(np.float32)


def nearest_core_point_rule(
    x: np.ndarray, labels: np.ndarray, new: np.ndarray, min_samples: int
) -> tuple[np.ndarray, np.ndarray]:
    """Brute force, in float64 and the units of ``x``: the cluster of each new point's nearest
    clustered fitted point when within that point's core distance (its ``min_samples``-th
    nearest point, itself counted), else -1; and by how much it is within (< 0: outside). The
    rule is invariant to the rescaling."""
    x, new = x.astype(np.float64), new.astype(np.float64)
    distances = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    core = np.sort(distances, axis=1)[:, min_samples - 1]
    clustered = np.flatnonzero(labels >= 0)
    to_new = np.sqrt(((new[:, None] - x[None, clustered]) ** 2).sum(-1))
    nearest = clustered[to_new.argmin(axis=1)]
    slack = core[nearest] - to_new.min(axis=1)
    return np.where(slack >= 0, labels[nearest], -1), slack


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"min_cluster_size": 15, "min_samples": 5},
        {"min_cluster_size": 10, "cluster_selection_method": "leaf"},
        {"min_cluster_size": 10, "cluster_selection_epsilon": 0.5},
    ],
)
def test_labels_are_scikit_learns(options):
    x, _ = blobs_and_noise()
    want = HDBSCAN(**options, copy=True).fit(x).labels_
    np.testing.assert_array_equal(hdbscan(x, **options), want)
    np.testing.assert_array_equal(fit(x, "hdbscan", **options).labels_, want)


def test_an_unknown_number_of_clusters_is_found_and_noise_is_minus_one():
    x, truth = blobs_and_noise()
    labels = hdbscan(x, min_cluster_size=15)
    assert len(set(labels.tolist()) - {-1}) == 3
    kept = truth >= 0
    assert adjusted_rand_score(truth[kept][labels[kept] >= 0], labels[kept][labels[kept] >= 0]) == 1
    assert (labels[~kept] == -1).mean() > 0.5  # most uniform points are noise


def test_epsilon_keeps_the_units_of_the_points_at_any_scale():
    x, _ = blobs_and_noise(1)
    options = {"min_cluster_size": 10, "cluster_selection_epsilon": 2.0}
    want = HDBSCAN(**options, copy=True).fit(x).labels_
    scaled = {**options, "cluster_selection_epsilon": 2.0e-30}
    np.testing.assert_array_equal(hdbscan(x * 1e-30 + 5e-30, **scaled), want)
    np.testing.assert_array_equal(
        hdbscan(x * 1e200, **{**options, "cluster_selection_epsilon": 2e200}), want
    )


def test_a_new_point_joins_its_nearest_core_points_cluster_or_is_noise():
    x, _ = blobs_and_noise()
    partition = fit(x, "hdbscan", min_cluster_size=15, min_samples=5)
    labels = partition.labels_
    new = np.random.default_rng(5).uniform(-4, 10, (400, 2))
    want, _ = nearest_core_point_rule(x, labels, new, min_samples=5)
    np.testing.assert_array_equal(partition.predict(new), want)
    assert 0 < (want >= 0).sum() < new.shape[0]  # both branches taken
    # Points on the fitted ones keep their labels, noise included.
    np.testing.assert_array_equal(partition.predict(x), labels)
    assert (labels == -1).any()


def test_the_fitted_points_get_their_labels_back_though_the_search_rounds():
    x = blobs_and_noise_in_32d()
    partition = fit(x, "hdbscan", min_cluster_size=15, min_samples=15)
    labels = partition.labels_
    z = partition.rescaling.apply(x)
    searched = NearestNeighbors(n_neighbors=1).fit(partition.reference).kneighbors(z)[0]
    assert (searched > 0.0).any()  # some points are not at distance 0 from themselves
    rule, _ = nearest_core_point_rule(x, labels, x, min_samples=15)
    assert (rule[labels == -1] >= 0).any()  # noise points the rule alone would put in a cluster
    np.testing.assert_array_equal(partition.predict(x), labels)


def test_a_point_moved_off_a_fitted_point_follows_the_nearest_core_point_rule():
    x = blobs_and_noise_in_32d()
    partition = fit(x, "hdbscan", min_cluster_size=15, min_samples=15)
    labels = partition.labels_
    # Moved by 1e-3, and by one float32 step: neither is a fitted point any more.
    for new in (x + np.float32(1e-3), np.nextafter(x, np.float32(np.inf))):
        want, slack = nearest_core_point_rule(x, labels, new, min_samples=15)
        clear = np.abs(slack) > 1e-6  # not on the edge of a core distance, where rounding decides
        assert clear.mean() > 0.9
        np.testing.assert_array_equal(partition.predict(new)[clear], want[clear])
        assert (want[clear & (labels == -1)] >= 0).any()  # moved noise that joins a cluster


def test_a_copy_of_a_repeated_fitted_point_takes_the_first_copys_label():
    x = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    frame = Rescaling.of(x)
    partition = NearestCorePointPartition(
        labels_=np.array([-1, 0, 0, 1]),
        rescaling=frame,
        reference=frame.apply(x),
        core_distances=np.full(4, 0.5),
    )
    assert partition.predict(x).tolist() == [-1, 0, -1, 0]


def test_too_few_points_is_a_clear_error():
    with pytest.raises(ValueError, match="at least min_samples = 5 points, got 3"):
        hdbscan(np.eye(3))


def test_the_metrics_count_each_noise_point_as_a_cluster_of_its_own():
    x, truth = blobs_and_noise()
    truth = np.where(truth < 0, 3, truth)  # the uniform points as a fourth class
    labels = hdbscan(x, min_cluster_size=15)
    noise = labels == -1
    assert noise.sum() >= 5
    singletons = labels.copy()
    singletons[noise] = labels.max() + 1 + np.arange(noise.sum())
    table = evaluate_embeddings(
        x,
        truth,
        clustering="hdbscan",
        options=EvaluationOptions(cluster_kwargs={"min_cluster_size": 15}),
    )
    assert table["nmi"] == pytest.approx(normalized_mutual_info_score(truth, singletons))
    assert table["nmi"] == pytest.approx(nmi(truth, labels))
    assert table["f1"] == pytest.approx(pairwise_f1(truth, singletons)[2])
    assert table["ari"] == pytest.approx(adjusted_rand_score(truth, singletons))
    # Not one "noise cluster": that would score otherwise.
    assert table["nmi"] != pytest.approx(normalized_mutual_info_score(truth, labels))
