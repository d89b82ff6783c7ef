"""Open-set assignment: the distance of an item to each cluster of a partition, by the rule of
each method, the calibration pairs, and "none of these" beyond a chosen distance."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from clusterable import cluster
from clusterable.cluster.partition import member_means
from clusterable.open_set import (
    assign_within,
    calibration_pairs,
    choose_max_distance,
    cluster_distances,
)


def blobs(n_per_class: int, classes: int, seed: int, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(scale=8.0, size=(classes, 6))
    labels = np.repeat(np.arange(classes), n_per_class)
    points = (centres[labels] + rng.normal(size=(len(labels), 6))) * scale
    return points.astype(np.float32), labels


@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_kmeans_and_gmm_distances_are_to_the_centres_in_the_embeddings_units(scale):
    points, _ = blobs(40, 3, seed=0, scale=scale)
    queries, _ = blobs(5, 3, seed=1, scale=scale)
    kmeans = cluster.fit(points, "kmeans", 3, seed=0)
    want = cdist(queries, member_means(points, kmeans.labels_))
    np.testing.assert_allclose(cluster_distances(kmeans, queries), want, rtol=1e-6)
    gmm = cluster.fit(points, "gmm", 3, seed=0)
    means = gmm.means * gmm.rescaling.spread * gmm.rescaling.peak  # back from the fitted frame
    means = means + gmm.rescaling.centre * gmm.rescaling.peak
    np.testing.assert_allclose(cluster_distances(gmm, queries), cdist(queries, means), rtol=1e-6)


@pytest.mark.parametrize("method", ["aas", "hdbscan"])
def test_point_rules_measure_to_the_clusters_nearest_fitted_point(method):
    points, _ = blobs(40, 3, seed=0)
    queries, _ = blobs(5, 3, seed=1)
    partition = cluster.fit(points, method, None, seed=0)
    got = cluster_distances(partition, queries)
    for c in np.unique(partition.labels_[partition.labels_ >= 0]):
        members = points[partition.labels_ == c]
        np.testing.assert_allclose(got[:, c], cdist(queries, members).min(axis=1), rtol=1e-4)


def test_spectral_distances_are_in_its_projection_of_unit_rows():
    points, _ = blobs(40, 3, seed=0)
    partition = cluster.fit(points, "spectral", 3, seed=0)
    got = cluster_distances(partition, points)
    assert got.shape == (120, 3) and (got >= 0).all() and (got <= 2 + 1e-9).all()
    np.testing.assert_array_equal(got.argmin(axis=1), partition.labels_)


def test_calibration_pairs_follow_the_documented_rule():
    """Clusters at 0 and 10 on a line; items of class 0 (near 0), class 1 (near 10) and class 2
    (no cluster of its own): own-cluster distances are positives, nearest other-class ones
    negatives; class 2 gives only a negative."""
    fitted = np.array([[-1.0], [1.0], [9.0], [11.0]], dtype=np.float32)
    partition = cluster.fit(fitted, "kmeans", 2, seed=0)
    items = np.array([[1.0], [8.0], [30.0]], dtype=np.float32)
    distances, same = calibration_pairs(partition, items, ["zero", "one", "two"])
    order = np.argsort(distances)
    np.testing.assert_allclose(distances[order], [1.0, 2.0, 8.0, 9.0, 20.0])
    assert same[order].tolist() == [True, True, False, False, False]


def test_assign_within_a_chosen_distance_sends_an_unseen_class_to_none():
    points, labels = blobs(50, 5, seed=0)
    known = labels < 4
    partition = cluster.fit(points[known], "kmeans", 4, seed=0)
    held_out, held_labels = blobs(20, 4, seed=1)
    choice = choose_max_distance(partition, held_out, held_labels, "balanced_accuracy")
    new, new_labels = blobs(30, 5, seed=2)
    clusters, beyond = assign_within(partition, new, choice.threshold)
    unseen = new_labels == 4
    assert (clusters[unseen] == -1).mean() >= 0.9
    assert (clusters[~unseen] == partition.predict(new[~unseen])).mean() >= 0.95
    np.testing.assert_array_equal(beyond, clusters == -1)  # k-means marks no noise
    one_cluster = cluster.fit(points[known], "kmeans", 1, seed=0)
    with pytest.raises(ValueError, match="no other-class distance"):
        choose_max_distance(one_cluster, held_out, held_labels * 0, "f1")


@pytest.mark.parametrize("method", ["aas", "hdbscan"])
def test_neighbour_rules_measure_to_each_clusters_nearest_fitted_point(method):
    points, _ = blobs(40, 3, seed=0)
    queries, _ = blobs(5, 3, seed=1)
    options = {"eps": 0.9} if method == "aas" else {}  # AAS: many small clusters
    partition = cluster.fit(points, method, **options)
    labels = partition.labels_
    pairs = cdist(queries.astype(np.float64), points.astype(np.float64))  # (m, n)
    want = np.stack([pairs[:, labels == c].min(axis=1) for c in range(labels.max() + 1)], axis=1)
    np.testing.assert_allclose(cluster_distances(partition, queries), want, rtol=1e-5)
