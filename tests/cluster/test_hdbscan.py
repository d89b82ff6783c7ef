"""HDBSCAN: scikit-learn's labels, the nearest-core-point rule for new points, and how the metrics
count its noise."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import HDBSCAN
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from clusterable.cluster import fit, hdbscan
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
    # Brute force: the nearest clustered fitted point, and its distance to its 5th nearest point
    # (itself counted), in the units of x: the rule is invariant to the rescaling.
    distances = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    core = np.sort(distances, axis=1)[:, 4]
    clustered = np.flatnonzero(labels >= 0)
    to_new = np.sqrt(((new[:, None] - x[None, clustered]) ** 2).sum(-1))
    nearest = clustered[to_new.argmin(axis=1)]
    inside = to_new.min(axis=1) <= core[nearest]
    want = np.where(inside, labels[nearest], -1)
    np.testing.assert_array_equal(partition.predict(new), want)
    assert 0 < inside.sum() < new.shape[0]  # both branches taken
    # Points on the fitted ones keep their labels, noise included.
    np.testing.assert_array_equal(partition.predict(x), labels)
    assert (labels == -1).any()


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
