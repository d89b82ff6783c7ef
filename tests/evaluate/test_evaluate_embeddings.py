"""evaluate_embeddings: keys, agreement with the single metrics, clustering hooks, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from clusterable.evaluate import (
    EvaluationOptions,
    ari,
    cluster_accuracy,
    evaluate_embeddings,
    knn_search,
    map_at_r,
    nmi,
    pairwise_f1,
    r_precision,
    recall_at_k,
    silhouette,
    v_measure,
)
from clusterable.evaluate import (
    table as evaluation_table,
)
from clusterable.evaluate.clustering import ScoredPartition, kmeans_rule

KEYS = [
    "recall@1",
    "recall@2",
    "recall@4",
    "recall@8",
    "precision@1",
    "map@r",
    "r_precision",
    "nmi",
    "precision",
    "recall",
    "f1",
    "accuracy",
    "ari",
    "silhouette",
]


def blobs(seed=0, n=240, classes=8, d=10):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    return (rng.standard_normal((classes, d))[y] * 1.5 + rng.standard_normal((n, d))), y


def test_keys_and_agreement_with_single_metrics():
    x, y = blobs()
    c = np.random.default_rng(1).integers(0, 8, len(y))
    table = evaluate_embeddings(x, y, clustering=c, metrics=[*KEYS[4:], "recall@k", "v_measure"])
    assert list(table) == [*KEYS[:-1], "v_measure", "silhouette"]
    assert evaluate_embeddings(x, y, clustering=c) == {k: table[k] for k in KEYS}
    recall = recall_at_k(x, y, (1, 2, 4, 8))
    for k in (1, 2, 4, 8):
        assert table[f"recall@{k}"] == recall[k]
    assert table["precision@1"] == recall[1]
    assert table["map@r"] == map_at_r(x, y)
    assert table["r_precision"] == r_precision(x, y)
    assert table["nmi"] == nmi(y, c)
    assert (table["precision"], table["recall"], table["f1"]) == pairwise_f1(y, c)
    assert table["accuracy"] == cluster_accuracy(y, c)
    assert table["ari"] == ari(y, c)
    assert table["v_measure"] == v_measure(y, c)
    assert table["silhouette"] == silhouette(x, c)
    assert all(0.0 <= table[k] <= 1.0 for k in KEYS if k not in ("ari", "silhouette"))


def test_named_clustering_called_once_with_class_count(monkeypatch):
    x, y = blobs()
    calls = []

    def fake_partition(points, request, seed, neighbours, device):
        calls.append((request.method, request.asked, seed, request.options))
        lists.append(neighbours)
        return ScoredPartition(request.method, y.copy())

    lists = []
    monkeypatch.setattr(evaluation_table, "partition", fake_partition)
    table = evaluate_embeddings(torch.from_numpy(x), torch.from_numpy(y), seed=5, ks=(1,))
    # No n_clusters: the 8 classes decide, and k-means runs by the table's rule.
    assert calls == [("kmeans", 8, 5, kmeans_rule(8))]
    # The kNN search's first neighbours go to the clustering, for k-means to start from.
    kept = min(evaluation_table.NEIGHBOURS_KEPT, x.shape[0] - 1)
    np.testing.assert_array_equal(lists[0], knn_search(x, kept)[1])
    assert table["nmi"] == table["accuracy"] == table["f1"] == 1.0
    evaluate_embeddings(x, y, clustering="gmm", n_clusters=3, ks=(1,))
    assert calls[-1][:2] == ("gmm", 3)


def test_kmeans_from_cluster_module_recovers_blobs():
    pytest.importorskip("clusterable.cluster")
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 200)
    x = rng.standard_normal((4, 6))[y] * 10 + rng.standard_normal((200, 6))  # well separated
    table = evaluate_embeddings(x, y, ks=(1, 5), seed=0)
    assert table["nmi"] > 0.95 and table["accuracy"] > 0.95


def test_aas_noise_is_scored_as_singletons(monkeypatch):
    x, y = blobs()
    noisy = y.copy()
    noisy[::10] = -1
    monkeypatch.setattr(
        evaluation_table, "partition", lambda *a, **kw: ScoredPartition("aas", noisy)
    )
    table = evaluate_embeddings(x, y, clustering="aas", ks=(1,))
    assert table["nmi"] == nmi(y, noisy) < 1.0
    assert table["precision"] == 1.0 and table["recall"] < 1.0


def test_per_class():
    x, y = blobs()
    y = y.copy()
    y[0] = 99  # a lone class: NaN retrieval, still counted by the partition
    c = y.copy()
    table = evaluate_embeddings(x, y, clustering=c, ks=(1, 4), per_class=True)
    pc = table["per_class"]
    assert pc["class"].tolist() == sorted(set(y.tolist()))
    assert pc["count"].sum() == len(y)
    assert np.isnan(pc["map@r"][-1]) and np.isnan(pc["recall@1"][-1])
    np.testing.assert_allclose(pc["accuracy"], 1.0)
    weights = pc["count"][:-1]
    assert np.average(pc["recall@4"][:-1], weights=weights) == pytest.approx(table["recall@4"])


def test_cosine_metric_partition_on_normalised(monkeypatch):
    x, y = blobs()
    seen = []
    monkeypatch.setattr(
        evaluation_table,
        "partition",
        lambda pts, *a, **kw: seen.append(pts) or ScoredPartition("kmeans", y),
    )
    evaluate_embeddings(x, y, ks=(1,), distance="cosine")
    np.testing.assert_allclose(np.linalg.norm(seen[0], axis=1), 1.0, rtol=1e-5)


def test_degenerate_partition_gives_nan_silhouette_with_warning():
    x, y = blobs()
    with pytest.warns(RuntimeWarning, match="silhouette"):
        table = evaluate_embeddings(x, y, clustering=np.zeros(len(y), dtype=int), ks=(1,))
    assert np.isnan(table["silhouette"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"labels": np.zeros(240, dtype=int)}, "at least 2 classes"),
        ({"labels": np.zeros(10, dtype=int)}, "10 entries"),
        ({"ks": (1, 240)}, "at most 239"),
        ({"clustering": "dbscan"}, "unknown clustering"),
        ({"clustering": np.zeros(5, dtype=int)}, "one cluster id per item"),
    ],
)
def test_bad_input(kwargs, match):
    x, y = blobs()
    args = {"labels": y, **kwargs}
    labels = args.pop("labels")
    with pytest.raises(ValueError, match=match):
        evaluate_embeddings(x, labels, **args)


def test_inputs_are_validated_once_at_the_edge(monkeypatch):
    from clusterable.evaluate import _inputs, neighbors, partition_metrics, retrieval
    from clusterable.evaluate import silhouette as silhouette_module

    calls = []

    def counted(real):
        def wrapper(*args, **kwargs):
            calls.append(real.__name__)
            return real(*args, **kwargs)

        return wrapper

    for name in ("as_embeddings", "as_labels", "as_clusters", "as_points"):
        real = getattr(_inputs, name)
        for module in (
            evaluation_table,
            neighbors,
            partition_metrics,
            retrieval,
            silhouette_module,
        ):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, counted(real))
    x, y = blobs()
    evaluate_embeddings(x, y, clustering=np.random.default_rng(1).integers(0, 8, len(y)))
    assert sorted(calls) == ["as_clusters", "as_embeddings", "as_labels", "as_points"]


def test_a_count_for_a_method_that_finds_its_own_is_refused_not_ignored():
    x, y = blobs()
    with pytest.raises(ValueError, match="aas finds its own number of clusters"):
        evaluate_embeddings(x, y, clustering="aas", n_clusters=5, metrics=["nmi"])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"clustering": "kmeanz"}, "unknown clustering 'kmeanz'"),
        ({"n_clusters": 0}, "cannot make 0 clusters"),
        ({"n_clusters": 2.5}, "must be an integer or 'auto'"),
        ({"n_clusters": 500}, "cannot make 500 clusters from 240 points"),
        ({"clustering": "aas", "n_clusters": 3}, "aas finds its own number of clusters"),
        ({"seed": "a"}, r"evaluate_embeddings seed='a' is not a number"),
        ({"seed": -1}, r"evaluate_embeddings seed=-1 must be an integer in \[0, "),
        ({"seed": None}, r"evaluate_embeddings seed=None is not a number: it must be an integer"),
        (
            {"options": EvaluationOptions(cluster_kwargs={"k_graph": 5})},
            "'kmeans' takes no argument k_graph",
        ),
    ],
)
def test_a_clustering_request_it_would_refuse_is_refused_before_the_search(
    monkeypatch, arguments, message
):
    """These were found only after the whole kNN search (10 s for 20,000 items), a string seed
    surfaced as NumPy's own TypeError, and seed=None clustered with a fresh seed every call."""
    x, y = blobs()

    def no_search(*args, **kwargs):
        raise AssertionError("searched before checking the clustering request")

    monkeypatch.setattr(evaluation_table, "_search", no_search)
    with pytest.raises(ValueError, match=message):
        evaluate_embeddings(x, y, **arguments)
