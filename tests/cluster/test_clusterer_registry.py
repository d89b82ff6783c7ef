"""One name and one call for every partition algorithm: run_clustering, aliases, clear refusals."""

from __future__ import annotations

import numpy as np
import pytest

from clusterable import cluster
from clusterable.cli import build_parser
from clusterable.cluster import available_clusterings, run_clustering

POINTS = np.concatenate(
    [np.random.default_rng(0).normal(c, 0.2, (12, 3)) for c in (0.0, 6.0, 12.0)]
)


def test_every_algorithm_is_registered_and_called_as_its_own_function():
    assert available_clusterings() == ["aas", "affinity_propagation", "gmm", "kmeans", "spectral"]
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


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: run_clustering(POINTS, "dbscan", 3), "unknown clustering 'dbscan'; choose one of"),
        (lambda: run_clustering(POINTS, "kmeans"), "kmeans needs n_clusters"),
        (lambda: run_clustering(POINTS, "aas", 3), "aas finds its own number of clusters"),
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
        cluster.register_clusterer("kmeans")(lambda x, k, seed=0: np.zeros(len(x)))
