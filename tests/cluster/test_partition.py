"""Persistent partitions: new points follow each built-in method's own rule (checked against
brute force or the library it uses), at any scale; damaged files and bad calls are refused.
What every registered clusterer must do (predict == labels_, seeds, save/load) is in
test_contract.py; here, also where a nearest-neighbour search rounds (a fitted point given again is
found bit for bit, `identical_rows`)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture
from sklearn.neighbors import NearestNeighbors

from clusterable.cli import main
from clusterable.cluster import (
    Partition,
    affinity_propagation,
    fit,
    kmeans,
    spectral_embedding,
)
from clusterable.cluster._validation import Rescaling
from clusterable.cluster.gmm import RELATIVE_REG_COVAR
from clusterable.cluster.partition import VOTE_NEIGHBOURS, NeighbourVotePartition, identical_rows

#: The built-in methods whose clusters are the four blobs at these settings.
METHODS = ("kmeans", "spectral", "gmm", "affinity_propagation", "aas")

CENTRES = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 1.0], [0.0, 8.0, -1.0], [8.0, 8.0, 0.0]])


def blobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = np.arange(n) % len(CENTRES)
    return CENTRES[truth] + rng.normal(scale=0.7, size=(n, 3)), truth


def float32_digits() -> np.ndarray:
    """``(539, 64)`` float32 digit images: the nearest-neighbour search (``|a|^2 + |b|^2 - 2ab``)
    puts many of them a small nonzero distance from themselves."""
    return load_digits().data[:539].astype(np.float32)


def fitted(method: str, x: np.ndarray) -> Partition:
    if method == "aas":
        return fit(x, "aas", k_graph=39, eps=0.5, gamma=10.0)
    return fit(x, method, n_clusters=len(CENTRES), seed=0)


@pytest.mark.parametrize("method", METHODS)
def test_new_points_join_their_blobs_cluster(method):
    x, truth = blobs(160, seed=0)
    new, new_truth = blobs(80, seed=1)
    partition = fitted(method, x)
    assert adjusted_rand_score(truth, partition.labels_) == 1.0
    assigned = partition.predict(new)
    # Each new point lands in the cluster that holds its blob's fitted points.
    blob_cluster = {t: partition.labels_[truth == t][0] for t in range(len(CENTRES))}
    np.testing.assert_array_equal(assigned, [blob_cluster[t] for t in new_truth])


def test_kmeans_assigns_to_the_nearest_member_mean():
    x, _ = blobs(200, seed=2)
    partition = fit(x, "kmeans", n_clusters=4, seed=3)
    assert adjusted_rand_score(kmeans(x, 4, seed=3), partition.labels_) == 1.0
    means = np.stack([x[partition.labels_ == c].mean(axis=0) for c in range(4)])
    new = np.random.default_rng(4).uniform(-3, 11, size=(500, 3))
    brute = np.argmin(((new[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_array_equal(partition.predict(new), brute)


def test_spectral_projects_new_points_like_algorithm_2():
    x, _ = blobs(120, seed=5)
    partition = fit(x, "spectral", n_clusters=4, rank=None)
    # The stored projection maps the fitted points onto spectral_embedding's T.
    t_rows = spectral_embedding(x, rank=None)
    u = partition.rescaling.apply(x) @ partition.projection
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    np.testing.assert_allclose(np.abs(u), np.abs(t_rows), atol=1e-9)
    np.testing.assert_allclose(u * t_rows, np.abs(u * t_rows), atol=1e-9)  # same signs per column


def test_gmm_predicts_with_the_fitted_mixture():
    x, _ = blobs(200, seed=6)
    partition = fit(x, "gmm", n_clusters=4, seed=1)
    z = partition.rescaling.apply(x)
    reg_covar = RELATIVE_REG_COVAR * z.var(axis=0).mean()
    mixture = GaussianMixture(4, covariance_type="diag", reg_covar=reg_covar, random_state=1)
    mixture.fit(z)
    new = np.random.default_rng(7).uniform(-3, 11, size=(300, 3))
    want = mixture.predict(partition.rescaling.apply(new))
    np.testing.assert_array_equal(partition.predict(new), want)


def test_affinity_propagation_assigns_to_the_nearest_exemplar():
    x, _ = blobs(80, seed=8)
    partition = fit(x, "affinity_propagation", n_clusters=4)
    assert adjusted_rand_score(affinity_propagation(x, 4), partition.labels_) == 1.0
    # The stored centres are fitted points: find their rows, then assign by brute force.
    z = partition.rescaling.apply(x)
    rows = np.array([np.flatnonzero((z == centre).all(axis=1))[0] for centre in partition.centres])
    new = np.random.default_rng(9).uniform(-3, 11, size=(300, 3))
    brute = np.argmin(((new[:, None, :] - x[rows][None]) ** 2).sum(-1), axis=1)
    np.testing.assert_array_equal(partition.predict(new), partition.labels_[rows][brute])


def test_aas_calls_far_points_and_copies_of_noise_noise():
    x, _ = blobs(160, seed=0)
    outlier = np.array([[40.0, -30.0, 5.0]])
    data = np.concatenate([x, outlier])
    partition = fit(data, "aas", k_graph=39, eps=0.5, gamma=10.0, theta_min=1.0)
    assert partition.labels_[-1] == -1
    far = np.array([[200.0, 200.0, 200.0]])
    assert partition.predict(far).tolist() == [-1]
    assert partition.predict(outlier).tolist() == [-1]
    near_first = x[:1] + 0.01
    assert partition.predict(near_first).tolist() == partition.labels_[:1].tolist()


@pytest.mark.parametrize("method", ["hdbscan", "aas"])
def test_the_fitted_points_get_their_labels_back_though_the_search_rounds(method, tmp_path):
    x = float32_digits()
    partition = fit(x, method)
    z = partition.rescaling.apply(x)
    searched = NearestNeighbors(n_neighbors=1).fit(partition.reference).kneighbors(z)[0]
    assert (searched > 0.0).any()  # some points are not at distance 0 from themselves
    np.testing.assert_array_equal(partition.predict(x), partition.labels_)
    np.testing.assert_array_equal(partition.predict(x.astype(np.float64)), partition.labels_)
    loaded = Partition.load(partition.save(tmp_path / "p.npz"))
    np.testing.assert_array_equal(loaded.predict(x), partition.labels_)


@pytest.mark.parametrize("method", ["hdbscan", "aas"])
def test_assign_on_the_clustered_embeddings_gives_their_clusters_back(method, tmp_path, capsys):
    embeddings, clusters = str(tmp_path / "emb.npy"), str(tmp_path / "clusters.npy")
    np.save(embeddings, float32_digits())
    argv = ["cluster", embeddings, "--clustering", method, "--out", clusters]
    assert main([*argv, "--save", str(tmp_path / "p.npz")]) == 0
    assigned = str(tmp_path / "assigned.npy")
    assert main(["assign", str(tmp_path / "p.npz"), embeddings, "--out", assigned]) == 0
    np.testing.assert_array_equal(np.load(assigned), np.load(clusters))


def test_aas_votes_on_a_point_moved_off_a_fitted_point():
    x, _ = blobs(160, seed=0)
    partition = fitted("aas", x)
    z = partition.rescaling.apply(x + 1e-3)  # (160, 3), no longer fitted points
    squared = ((z[:, None] - partition.reference[None]) ** 2).sum(-1)  # (160, 160)
    assert np.sqrt(squared.min(axis=1)).max() <= partition.reach
    voters = partition.labels_[np.argsort(squared, axis=1)[:, :VOTE_NEIGHBOURS]]  # nearest first
    want = []
    for row in voters.tolist():
        counts = Counter(row)
        want.append(next(c for c in row if counts[c] == max(counts.values())))  # tie: nearest
    np.testing.assert_array_equal(partition.predict(x + 1e-3), want)


def test_identical_rows_are_equal_bit_for_bit_and_the_first_of_copies():
    reference = np.array([[0.0, 1.0], [2.0, 3.0], [0.0, 1.0], [4.0, 5.0], [0.0, 2.0]])
    nudged = [np.nextafter(2.0, 3.0), 3.0]
    queries = np.array([[0.0, 1.0], [4.0, 5.0], nudged, [9.0, 9.0], [0.0, 2.0], [0.0, 3.0]])
    assert identical_rows(reference, queries).tolist() == [0, 3, -1, -1, 4, -1]
    assert identical_rows(reference, reference[:0]).tolist() == []


def test_a_copy_of_a_repeated_fitted_point_takes_the_first_copys_vote():
    x = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [5.0, 5.0]])
    frame = Rescaling.of(x)
    partition = NeighbourVotePartition(
        labels_=np.array([0, 1, 1, -1, 2]),
        rescaling=frame,
        reference=frame.apply(x),
        vote_neighbours=1,
    )
    assert partition.predict(x).tolist() == [0, 1, 0, 1, 2]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("scale", [1e-25, 1e25])
def test_assignment_does_not_depend_on_scale(method, scale):
    x, _ = blobs(160, seed=0)
    new, _ = blobs(40, seed=1)
    at_unit = fitted(method, x).predict(new)
    at_scale = fitted(method, x * scale + 3 * scale).predict(new * scale + 3 * scale)
    assert adjusted_rand_score(at_unit, at_scale) == 1.0


@pytest.mark.parametrize("points", ["blobs", "digits"])
def test_a_partition_knows_its_fitted_points_again(points, tmp_path):
    """`fitted_among` finds the fitted points among others (a subset of them, and new points),
    moved by the rounding of the same items embedded again in other batches (relative 1e-6), in
    3 dimensions (the coordinates) and in 64 (projections); after save and load too."""
    x = blobs(160, seed=0)[0].astype(np.float32) if points == "blobs" else float32_digits()
    fitted_rows, new = x[:100], x[100:]
    saved = fit(fitted_rows, "kmeans", n_clusters=4, seed=0).save(tmp_path / "p.npz")
    partition = Partition.load(saved)
    again = fitted_rows[::3] * np.float32(1 + 1e-6)  # (34, d)
    among = partition.fitted_among(np.concatenate([again, new]))
    assert among.tolist() == [True] * len(again) + [False] * len(new)
    partition.fitted_keys = None  # a partition saved before it kept them: unknown
    assert partition.fitted_among(fitted_rows) is None


def test_a_damaged_partition_file_is_refused(tmp_path):
    path = fit(blobs(40, 0)[0], "kmeans", n_clusters=2).save(tmp_path / "p.npz")
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["centres"] = arrays["centres"] + 1.0
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="damaged: its 'centres' array"):
        Partition.load(path)


def test_bad_calls_get_clear_errors():
    x, _ = blobs(40, 0)
    with pytest.raises(ValueError, match="gmm needs n_clusters"):
        fit(x, "gmm")
    with pytest.raises(ValueError, match="aas finds its own number of clusters"):
        fit(x, "aas", n_clusters=3)
    with pytest.raises(ValueError, match="unknown clustering 'dbscan'"):
        fit(x, "dbscan", n_clusters=3)
    partition = fit(x, "kmeans", n_clusters=2)
    with pytest.raises(ValueError, match="fitted on 3-dimensional points, got 5"):
        partition.predict(np.ones((2, 5)))
    with pytest.raises(ValueError, match="NaN or infinite"):
        partition.predict(np.array([[np.nan, 0.0, 0.0]]))


@pytest.mark.parametrize("method", ["kmeans", "spectral", "gmm", "affinity_propagation"])
def test_one_cluster_takes_every_point(method):
    x, _ = blobs(30, 0)
    partition = fit(x, method, n_clusters=1)
    assert partition.labels_.tolist() == [0] * 30
    assert partition.predict(x[:5] * 3).tolist() == [0] * 5
