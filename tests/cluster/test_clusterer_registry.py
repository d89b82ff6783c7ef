"""One registry of clusterers: names, metadata, the one number-of-clusters rule, clear refusals,
and a clusterer registered by a user running everywhere (fit, run_clustering, the evaluation),
never replaced by k-means."""

from __future__ import annotations

import numpy as np
import pytest

from clusterable import cluster
from clusterable.cli import build_parser
from clusterable.cluster import (
    Clusterer,
    Partition,
    available_clusterings,
    clusterer_info,
    fit,
    register_clusterer,
    resolve_n_clusters,
    run_clustering,
    takes_n_clusters,
)
from clusterable.cluster.registry import CLUSTERERS
from clusterable.evaluate import EvaluationOptions, evaluate_embeddings, nmi
from clusterable.evaluate.clustering import partition_request
from clusterable.evaluate.table import partition as evaluation_partition

POINTS = np.concatenate(
    [np.random.default_rng(0).normal(c, 0.2, (12, 3)) for c in (0.0, 6.0, 12.0)]
)


def test_every_algorithm_is_registered_and_its_function_is_the_dispatcher():
    assert available_clusterings() == [
        "aas",
        "affinity_propagation",
        "gmm",
        "hdbscan",
        "kmeans",
        "spectral",
    ]
    for name in ("kmeans", "spectral", "gmm"):
        np.testing.assert_array_equal(
            run_clustering(POINTS, name, 3, seed=4), getattr(cluster, name)(POINTS, 3, seed=4)
        )
    np.testing.assert_array_equal(
        run_clustering(POINTS, "ap", 3), cluster.affinity_propagation(POINTS, 3)
    )
    np.testing.assert_array_equal(
        run_clustering(POINTS, "aas", k_graph=8), cluster.aas(POINTS, k_graph=8)
    )
    np.testing.assert_array_equal(
        run_clustering(POINTS, "hdbscan", min_cluster_size=4),
        cluster.hdbscan(POINTS, min_cluster_size=4),
    )


def test_the_metadata_travels_with_the_registration():
    info = {name: clusterer_info(name) for name in available_clusterings()}
    assert [n for n, i in info.items() if not i.takes_n_clusters] == ["aas", "hdbscan"]
    assert [n for n, i in info.items() if i.noise] == ["aas", "hdbscan"]
    assert {n: i.auto for n, i in info.items() if i.auto} == {
        "kmeans": "silhouette",
        "spectral": "eigengap",
    }
    assert [n for n, i in info.items() if i.memory == "quadratic"] == ["affinity_propagation"]
    assert [n for n, i in info.items() if not i.seeded] == [
        "aas",
        "affinity_propagation",
        "hdbscan",
    ]
    assert info["kmeans"].label == "k-means" and clusterer_info("ap").name == "affinity_propagation"


@pytest.mark.parametrize(
    ("method", "asked", "classes", "expected"),
    [
        ("kmeans", None, 7, 7),  # the caller's class count
        ("kmeans", None, None, "auto"),  # a method that can choose
        ("spectral", "auto", 7, "auto"),
        ("gmm", 3, 7, 3),  # an explicit count wins
        ("aas", None, 7, None),  # finds its own
        ("hdbscan", "auto", None, None),
    ],
)
def test_one_rule_decides_the_number_of_clusters(method, asked, classes, expected):
    assert resolve_n_clusters(method, asked, n_classes=classes) == expected


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: run_clustering(POINTS, "dbscan", 3), "unknown clustering 'dbscan'; choose one of"),
        (lambda: run_clustering(POINTS, "gmm"), "gmm needs n_clusters.*kmeans, spectral can"),
        (lambda: run_clustering(POINTS, "aas", 3), "aas finds its own number of clusters"),
        (lambda: fit(POINTS, "hdbscan", 3), "hdbscan finds its own number of clusters"),
        (lambda: fit(POINTS, "gmm", "auto"), "gmm cannot choose.*kmeans or spectral"),
        (lambda: fit(POINTS, "kmeans", 2.5), "must be an integer or 'auto'"),
        (lambda: fit(POINTS, "kmeans", 37), "cannot make 37 clusters from 36 points"),
        (lambda: fit(POINTS, "kmeans", 3, k_graph=5), "'kmeans' takes no argument k_graph"),
        (lambda: fit(POINTS, "hdbscan", min_cluster_size=1), "min_cluster_size must be"),
    ],
)
def test_a_wrong_call_says_what_to_do(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_command_line_offers_exactly_the_registered_names():
    verbs = build_parser()._subparsers._group_actions[0].choices
    offered = [
        next(a for a in verbs[verb]._actions if "--clustering" in a.option_strings).choices
        for verb in ("cluster", "evaluate")
    ]
    assert list(offered[0]) == list(offered[1]) == available_clusterings(aliases=True)


def test_a_name_registered_twice_is_refused():
    with pytest.raises(RuntimeError, match="registered twice"):
        register_clusterer("kmeans")(lambda x, k, seed=0: np.zeros(len(x)))


@pytest.fixture
def registry(monkeypatch):
    """The clusterer registry, restored after the test."""
    monkeypatch.setattr(CLUSTERERS, "_entries", dict(CLUSTERERS._entries))
    return CLUSTERERS


def round_robin(x, n_clusters, seed=0, *, offset=0):
    """A toy no real clusterer would match: row i goes to cluster (i + offset + seed) % k."""
    return (np.arange(len(x)) + offset + seed) % n_clusters


class Halves(Clusterer):
    """A toy estimator: the rows below the median of the first coordinate, and the others."""

    def __init__(self, n_clusters=None, seed=0, *, flip=False):
        super().__init__(n_clusters, seed)
        self.flip = flip

    def cluster(self, points):
        upper = points[:, 0] > np.median(points[:, 0])
        return (upper ^ self.flip).astype(np.int64)


@pytest.mark.parametrize("kind", ["function", "class"])
def test_a_clusterer_registered_by_a_user_runs_everywhere_without_a_kmeans_fallback(
    registry, tmp_path, kind
):
    labels = np.repeat([0, 1, 2], 12)  # the three groups of POINTS
    if kind == "function":
        register_clusterer("toy", label="round robin")(round_robin)
        want = round_robin(POINTS, 3, seed=1, offset=1)
        options = {"offset": 1}
    else:
        register_clusterer("toy", takes_n_clusters=False, seeded=False)(Halves)
        want = Halves(flip=True).cluster(POINTS)
        options = {"flip": True}
    assert "toy" in available_clusterings()
    np.testing.assert_array_equal(run_clustering(POINTS, "toy", seed=1, **options), want) if (
        kind == "class"
    ) else np.testing.assert_array_equal(run_clustering(POINTS, "toy", 3, seed=1, **options), want)
    count = resolve_n_clusters("toy", n_classes=3)
    partition = fit(POINTS, "toy", count, seed=1, **options)
    np.testing.assert_array_equal(partition.labels_, want)
    np.testing.assert_array_equal(partition.predict(POINTS), want)
    loaded = Partition.load(partition.save(tmp_path / "toy.npz"))
    np.testing.assert_array_equal(loaded.predict(POINTS + 0.01), partition.predict(POINTS + 0.01))
    # The evaluation runs it too, with the class count where it takes one.
    np.testing.assert_array_equal(
        evaluation_partition(POINTS, partition_request(POINTS, "toy", 3, 1, options), 1).labels_,
        want,
    )
    table = evaluate_embeddings(
        POINTS,
        labels,
        clustering="toy",
        metrics=["nmi"],
        seed=1,
        options=EvaluationOptions(cluster_kwargs=options),
    )
    assert table["nmi"] == pytest.approx(nmi(labels, want))
    assert table["nmi"] < 0.99  # k-means would have found the three groups
    with pytest.raises(ValueError, match="takes no argument"):
        fit(POINTS, "toy", count, wrong=1)


@pytest.mark.parametrize("name", available_clusterings())
@pytest.mark.parametrize(
    ("seed", "problem"),
    [("1", "is not a number"), (1.5, "is not an integer"), (-1, ""), (None, "is not a number")],
)
def test_a_seed_numpy_cannot_take_is_refused_where_it_enters(name, seed, problem):
    """A string seed reached NumPy's SeedSequence (k-means, spectral) or scikit-learn's
    random_state check (GMM) as their own TypeError, and was ignored by the others; None
    clustered with a fresh seed every call."""
    message = rf"^clustering {name!r} seed={seed!r} {problem}.*must be an integer in \[0, "
    with pytest.raises(ValueError, match=message):
        fit(POINTS, name, 3 if takes_n_clusters(name) else None, seed=seed)
