"""The metric registry: selection by name, nothing computed that no selected metric reads."""

from __future__ import annotations

import numpy as np
import pytest

from clusterable.cluster import register_clusterer
from clusterable.cluster.registry import CLUSTERERS
from clusterable.evaluate import (
    available_metrics,
    evaluate_embeddings,
    metric_of_key,
    register_metric,
    table_keys,
)
from clusterable.evaluate import table as evaluation_table
from clusterable.evaluate.registry import METRICS, select_metrics
from clusterable.metric_table import format_metric_table, metric_label

RETRIEVAL = ["recall@k", "precision@1", "map@r", "r_precision"]
PARTITION = ["nmi", "precision", "recall", "f1", "accuracy", "ari", "v_measure", "silhouette"]
PAIRS = ["roc_auc", "fnmr@fmr"]


def blobs(seed=0, n=120, classes=4, d=5):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    return rng.standard_normal((classes, d))[y] * 3 + rng.standard_normal((n, d)), y


@pytest.fixture
def kmeans_calls(monkeypatch):
    """Every call of the registered k-means, which still clusters (by the true labels)."""
    calls = []

    def fake_kmeans(x, n_clusters, seed=0, **options):
        calls.append(n_clusters)
        return np.arange(len(x)) % n_clusters

    kept = {name: entry for name, entry in CLUSTERERS._entries.items() if name != "kmeans"}
    monkeypatch.setattr(CLUSTERERS, "_entries", kept)  # this test's k-means replaces the real one
    register_clusterer("kmeans")(fake_kmeans)
    return calls


def test_every_name_is_registered_in_table_order():
    assert available_metrics() == RETRIEVAL + PARTITION + PAIRS
    assert select_metrics(None) == [m for m in RETRIEVAL + PARTITION if m != "v_measure"]
    assert select_metrics(["silhouette", "nmi", "recall@k"]) == ["recall@k", "nmi", "silhouette"]


def test_a_retrieval_selection_never_clusters(kmeans_calls, monkeypatch):
    x, y = blobs()
    monkeypatch.setattr(evaluation_table, "contingency_from_codes", pytest.fail)
    table = evaluate_embeddings(x, y, metrics=["recall@k", "map@r"], ks=(1, 2))
    assert kmeans_calls == []
    assert list(table) == ["recall@1", "recall@2", "map@r"]
    evaluate_embeddings(x, y, metrics=["precision@1"], clustering=np.zeros(len(y), dtype=int))
    assert kmeans_calls == []


def test_a_partition_selection_never_searches(kmeans_calls, monkeypatch):
    x, y = blobs()
    monkeypatch.setattr(evaluation_table, "retrieval_per_query", pytest.fail)
    # ks beyond the set would fail a search; nothing is searched, so they are not even checked.
    table = evaluate_embeddings(x, y, metrics=["f1", "nmi"], ks=(10_000,))
    assert kmeans_calls == [4]
    assert list(table) == ["nmi", "f1"]


def test_the_search_goes_to_r_only_for_the_metrics_at_r(monkeypatch):
    x, y = blobs()
    depths = []
    real = evaluation_table.retrieval_per_query

    def spy(points, codes, ks, **kwargs):
        depths.append(kwargs["at_r"])
        return real(points, codes, ks, **kwargs)

    monkeypatch.setattr(evaluation_table, "retrieval_per_query", spy)
    evaluate_embeddings(x, y, metrics=["recall@k", "precision@1"], ks=(1,))
    evaluate_embeddings(x, y, metrics=["r_precision"], ks=(1,))
    assert depths == [False, True]


def test_default_table_clusters_once_and_selected_values_equal_the_default_ones(kmeans_calls):
    x, y = blobs()
    full = evaluate_embeddings(x, y, ks=(1, 4))
    assert kmeans_calls == [4]
    part = evaluate_embeddings(x, y, ks=(1, 4), metrics=["ari", "recall@k", "silhouette"])
    assert part == {k: full[k] for k in ("recall@1", "recall@4", "ari", "silhouette")}
    assert "v_measure" not in full


def test_v_measure_by_name_equals_nmi():
    x, y = blobs()
    c = np.random.default_rng(3).integers(0, 5, len(y))
    table = evaluate_embeddings(x, y, clustering=c, metrics=["v_measure", "nmi"])
    assert table["v_measure"] == pytest.approx(table["nmi"], abs=1e-12)


def test_ks_neither_deepen_the_search_nor_add_columns_without_recall(monkeypatch):
    from clusterable.evaluate import retrieval

    depths = []

    def counted(search):
        def knn_chunks(points, k, *args, **kwargs):
            depths.append(k)
            return search(points, k, *args, **kwargs)

        return knn_chunks

    # The host's search, or the device's where the search runs on a GPU.
    for name in ("knn_chunks", "knn_chunks_on_device"):
        monkeypatch.setattr(retrieval, name, counted(getattr(retrieval, name)))
    x, y = blobs()
    r_max = int(np.bincount(y).max()) - 1
    table = evaluate_embeddings(x, y, metrics=["map@r"], ks=(1, 100), per_class=True)
    assert depths == [r_max] and set(table) == {"map@r", "per_class"}
    assert set(table["per_class"]) == {"class", "count", "precision@1", "map@r", "r_precision"}
    with_recall = evaluate_embeddings(x, y, metrics=["map@r", "recall@k"], ks=(1, 100))
    assert depths[1] == 100 and with_recall["map@r"] == table["map@r"]


def test_per_class_holds_what_was_computed():
    x, y = blobs()
    retrieval = evaluate_embeddings(x, y, metrics=["map@r"], per_class=True)["per_class"]
    assert "map@r" in retrieval and "accuracy" not in retrieval
    partition = evaluate_embeddings(x, y, clustering=y, metrics=["nmi"], per_class=True)
    assert set(partition["per_class"]) == {"class", "count", "accuracy"}
    np.testing.assert_allclose(partition["per_class"]["accuracy"], 1.0)


@pytest.mark.parametrize("metrics", [["nmi", "mAP"], "recall@0", ["mAP"]])
def test_an_unknown_name_lists_the_known_ones(metrics):
    x, y = blobs()
    with pytest.raises(ValueError, match=r"unknown metric.*choose among recall@k, precision@1"):
        evaluate_embeddings(x, y, metrics=metrics)


@pytest.mark.parametrize(
    ("asked", "meant"),
    [
        ("recal@k", "'recall@k'"),
        ("nmii", "'nmi'"),
        ("MAP@R", "'map@r'"),
        ("Recall@4", "'recall@k' with ks=(4,)"),
    ],
)
def test_a_misspelled_name_gets_a_did_you_mean(asked, meant):
    """A typo, or a name in capitals as papers print it, was only "unknown metric(s) 'MAP@R';
    choose among ..." with fourteen names to compare by eye."""
    x, y = blobs()
    with pytest.raises(ValueError) as error:
        evaluate_embeddings(x, y, metrics=["nmi", asked])
    message = str(error.value)
    assert message.startswith(f"unknown metric(s) {asked!r} (did you mean {meant}?); choose among")
    assert "\n" not in message


@pytest.mark.parametrize("metrics", ["recall@5", ["nmi", "recall@5"]])
def test_a_key_of_the_table_names_its_metric_and_k(metrics):
    """metrics=["recall@5"], the key the table prints, was "unknown metric(s) 'recall@5'; choose
    among recall@k, ...", which did not say where the 5 goes."""
    x, y = blobs()
    with pytest.raises(ValueError) as error:
        evaluate_embeddings(x, y, metrics=metrics)
    assert str(error.value) == (
        "'recall@5' is the table's key of recall@k at K = 5: ask for 'recall@k' with ks=(5,) "
        "(each K of ks gives its key)"
    )
    table = evaluate_embeddings(x, y, metrics=["recall@k"], ks=(5,))
    assert list(table) == ["recall@5"]


def test_an_empty_selection_says_what_to_pass():
    x, y = blobs()
    with pytest.raises(ValueError, match="metrics is empty; pass None for the default table"):
        evaluate_embeddings(x, y, metrics=[])


def test_a_registered_metric_is_computed_from_the_shared_artefacts():
    x, y = blobs()
    seen = []

    def largest_cluster_share(a):
        seen.append(a.per_query)
        return float(a.table.cluster_sizes.max() / a.table.n)

    with METRICS.scratch():
        register_metric("largest_cluster_share", needs={"partition"}, default=False)(
            largest_cluster_share
        )
        assert "largest_cluster_share" in available_metrics()
        assert "largest_cluster_share" not in evaluate_embeddings(x, y, clustering=y, ks=(1,))
        table = evaluate_embeddings(x, y, clustering=y, metrics=["largest_cluster_share"])
        assert table == {"largest_cluster_share": np.bincount(y).max() / len(y)}
        assert seen == [None]  # no search was needed, so none was made
        with pytest.raises(RuntimeError, match="registered twice"):
            register_metric("largest_cluster_share", needs={"partition"})(largest_cluster_share)
    assert "largest_cluster_share" not in available_metrics()


def test_every_metric_is_shown_under_the_label_it_was_registered_with():
    assert METRICS.label("nmi") == "NMI (clusters)" == metric_label("nmi")
    assert metric_label("recall@4") == "recall@4 (retrieval)"
    assert metric_label("precision") == "pairwise precision (clusters)"  # not precision@1
    assert all(METRICS.label(name) != name for name in available_metrics())
    assert metric_label("fnmr@fmr=0.0001") == "FNMR at FMR = 0.0001 (all pairs)"
    assert table_keys() == [
        "recall@K",
        "precision@1",
        "map@r",
        "r_precision",
        *PARTITION,
        "roc_auc",
        "fnmr@fmr=EPS",
    ]


def test_a_registered_metric_has_its_label_in_the_printed_table():
    x, y = blobs()
    with METRICS.scratch():

        @register_metric("largest_cluster_share", needs={"partition"}, label="largest cluster")
        def largest_cluster_share(a):
            return float(a.table.cluster_sizes.max() / a.table.n)

        table = evaluate_embeddings(x, y, clustering=y, metrics=["largest_cluster_share", "nmi"])
        printed = format_metric_table(table, "blobs").splitlines()
        assert printed[1:] == [
            f"  NMI (clusters)   {100 * table['nmi']:6.2f} %",
            f"  largest cluster  {100 * table['largest_cluster_share']:6.2f} %",
        ]
        assert "largest_cluster_share" in table_keys()


def test_a_per_k_metric_has_a_key_and_a_label_for_each_k():
    with METRICS.scratch():

        @register_metric("hits@k", needs={"neighbours"}, per_k=True, label="{k} hits (retrieval)")
        def hits_at_k(a):
            return {f"hits@{k}": float(k) / 10 for k in a.ks}

        assert metric_of_key("hits@3") == "hits@k" and metric_of_key("hits@k") is None
        assert metric_of_key("hits@0") is None and metric_of_key("hits@x") is None
        assert "hits@K" in table_keys()
        printed = format_metric_table({"hits@3": 0.3}, "heading")
        assert printed == "heading\n  3 hits (retrieval)   30.00 %"
    assert metric_of_key("hits@3") is None and metric_of_key("nmi") == "nmi"
    with pytest.raises(ValueError, match="a per-K metric is named PREFIX@k"):
        register_metric("hits", needs={"neighbours"}, per_k=True)


def test_an_unknown_need_is_refused():
    with pytest.raises(ValueError, match="known needs"):
        register_metric("odd", needs={"gpu"})
