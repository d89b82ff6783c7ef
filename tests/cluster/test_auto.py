"""n_clusters="auto": k-means by silhouette on a sample, DSCL spectral by the eigengap; what each
chose is kept with the partition, and measured on the bundled digits."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_blobs
from sklearn.metrics import silhouette_score

from clusterable.cluster import (
    ClusterCountWarning,
    Partition,
    fit,
    kmeans,
    run_clustering,
    spectral,
)
from clusterable.cluster.auto import by_eigengap, by_silhouette


@pytest.mark.parametrize("centres", [3, 5, 8])
def test_kmeans_finds_the_number_of_separated_blobs(centres):
    x, _ = make_blobs(400, 6, centers=centres, cluster_std=0.5, random_state=centres)
    partition = fit(x, "kmeans", "auto", seed=0, n_init=3)
    assert partition.options["chosen_n_clusters"] == partition.n_clusters == centres
    selection = partition.options["selection"]
    assert selection["criterion"] == "silhouette" and selection["candidates"] == list(range(2, 21))
    np.testing.assert_array_equal(kmeans(x, "auto", n_init=2), kmeans(x, None, n_init=2))


@pytest.mark.parametrize("centres", [3, 5, 8])
def test_spectral_finds_the_number_of_separated_blobs(centres):
    x, _ = make_blobs(400, 12, centers=centres, cluster_std=0.5, random_state=centres)
    partition = fit(x, "spectral", "auto", seed=0)
    assert partition.options["chosen_n_clusters"] == partition.n_clusters == centres
    assert partition.options["selection"]["criterion"] == "eigengap"
    np.testing.assert_array_equal(spectral(x, "auto"), run_clustering(x, "spectral", None))


def test_silhouette_choice_scores_one_sample_and_breaks_ties_low():
    x, _ = make_blobs(300, 2, centers=4, random_state=0)
    partitions = {k: kmeans(x, k, seed=0) for k in range(2, 7)}
    chosen, selection = by_silhouette(x, partitions.__getitem__, 6, 100, seed=2)
    sample = np.random.default_rng(2).permutation(300)[:100]
    want = [silhouette_score(x[sample], partitions[k][sample]) for k in range(2, 7)]
    np.testing.assert_allclose(selection["scores"], want)
    assert chosen == 2 + int(np.argmax(want))
    tied, _ = by_silhouette(x, lambda k: np.arange(300) % 2, 6, 100, seed=0)
    assert tied == 2


def test_eigengap_choice_reads_the_largest_ratio_below_the_rank():
    singular_values = np.sqrt([100.0, 90.0, 80.0, 2.0, 1.0])  # three large: four groups
    assert by_eigengap(singular_values, 20)[0] == 4
    assert by_eigengap(singular_values, 3)[0] == 3  # 4 is beyond max_clusters: 90 / 80 wins
    assert by_eigengap(np.ones(1), 20)[0] == 2


def test_auto_is_saved_with_the_partition(tmp_path):
    x, _ = make_blobs(200, 4, centers=3, random_state=1)
    partition = fit(x, "kmeans", "auto", max_clusters=6, sample_size=150)
    loaded = Partition.load(partition.save(tmp_path / "p.npz"))
    assert loaded.options["n_clusters"] == "auto"
    assert loaded.options["chosen_n_clusters"] == 3
    assert loaded.options["selection"]["candidates"] == [2, 3, 4, 5, 6]


@pytest.mark.parametrize("settings", [{"max_clusters": 1}, {"sample_size": 1}])
def test_bad_auto_settings_are_refused(settings):
    with pytest.raises(ValueError, match="must be an integer >= 2"):
        kmeans(np.zeros((5, 2)), "auto", **settings)


@pytest.mark.slow
def test_digits_measured_choice():
    # Measured (issue 30): k-means by silhouette chooses 9 of the 10 digit classes on the raw
    # pixels; spectral's eigengap 5.
    digits = load_digits()
    assert fit(digits.data, "kmeans", "auto", n_init=3).options["chosen_n_clusters"] == 9
    assert fit(digits.data, "spectral", "auto").options["chosen_n_clusters"] == 5


def test_auto_tries_no_more_clusters_than_distinct_points():
    # Each candidate above the distinct points warned that it returned fewer clusters: 15 lines.
    rng = np.random.default_rng(0)
    copies = np.repeat(rng.normal(size=(4, 3)), 5, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClusterCountWarning)
        partition = fit(copies, "kmeans", "auto")
        equal = fit(np.ones((10, 3)), "kmeans", "auto")
    assert partition.n_clusters == 4 and partition.options["selection"]["candidates"] == [2, 3, 4]
    assert equal.n_clusters == 1
