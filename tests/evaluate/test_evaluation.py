"""evaluate_embeddings returns an Evaluation: the dict of scores, and the partition they were
computed on; the distance is ``distance=``; k-means runs by the rule ``cluster`` shares; no device
is read from anywhere but the arguments."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterable import cluster
from clusterable.evaluate import (
    Evaluation,
    EvaluationOptions,
    ScoredPartition,
    describe_kmeans,
    evaluate_embeddings,
    iter_knn,
    kmeans_rule,
    knn_accuracy,
    knn_search,
    map_at_r,
    precision_at_1,
    r_precision,
    recall_at_k,
    silhouette,
)


def blobs(seed=0, n=200, classes=4, d=6, spread=8.0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), n // classes)
    return rng.standard_normal((classes, d))[y] * spread + rng.standard_normal((n, d)), y


def test_an_evaluation_is_the_dict_of_scores_of_before():
    x, y = blobs()
    table = evaluate_embeddings(x, y, ks=(1, 4))
    assert isinstance(table, Evaluation) and isinstance(table, dict)
    plain = dict(table)
    assert table == plain and plain == table and list(table) == list(plain)
    assert json.loads(json.dumps(dict(table))) == pytest.approx(plain)
    assert json.loads(json.dumps(table)) == pytest.approx(plain)
    assert table["nmi"] == plain["nmi"] and set(table) >= {"recall@1", "map@r", "silhouette"}


def test_its_partition_is_the_fitted_clusterer_the_scores_were_computed_on():
    x, y = blobs()
    table = evaluate_embeddings(x, y, ks=(1,))
    found = table.partition
    assert isinstance(found, ScoredPartition) and found.method == "kmeans"
    assert found.labels_.shape == (len(y),) and found.labels_.dtype == np.int64
    assert found.n_clusters == 4 and found.asked == 4 and found.noise == 0
    assert found.estimator is not None and found.estimator.n_init == 10
    # The same scores from its labels: whoever shows the partition need not cluster again.
    again = evaluate_embeddings(x, y, ks=(1,), clustering=found.labels_)
    assert again == table
    assert again.partition.method == "given"
    np.testing.assert_array_equal(again.partition.labels_, found.labels_)


def test_the_count_auto_chose_and_a_method_that_finds_its_own():
    x, y = blobs(classes=3, n=150)
    chosen = evaluate_embeddings(x, y, metrics=["nmi"], n_clusters="auto").partition
    assert chosen.asked == "auto" and chosen.n_clusters == chosen.estimator.chosen_n_clusters_
    assert chosen.n_clusters == 3
    own = evaluate_embeddings(x, y, metrics=["nmi"], clustering="aas").partition
    assert own.asked is None and own.method == "aas" and own.n_clusters >= 1
    assert own.rule == ""


def test_no_partition_metric_no_partition_and_given_ids_as_given():
    x, y = blobs()
    assert evaluate_embeddings(x, y, metrics=["map@r"]).partition is None
    ids = y.copy()
    ids[:5] = -1  # noise stays -1 in the partition, a singleton each in the scores
    given = evaluate_embeddings(x, y, metrics=["nmi"], clustering=ids).partition
    np.testing.assert_array_equal(given.labels_, ids)
    assert given.noise == 5 and given.n_clusters == 4 and given.estimator is None


def test_an_evaluation_pickles_with_its_partition():
    import pickle

    x, y = blobs()
    table = evaluate_embeddings(x, y, metrics=["nmi"])
    back = pickle.loads(pickle.dumps(table))
    assert back == table and back.partition.n_clusters == table.partition.n_clusters


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda x, y: evaluate_embeddings(x, y, metric="cosine"), "evaluate_embeddings"),
        (lambda x, y: silhouette(x, y, metric="cosine"), "silhouette"),
        (lambda x, y: knn_search(x, 1, metric="cosine"), "knn_search"),
        (lambda x, y: iter_knn(x, 1, metric="cosine"), "iter_knn"),
        (lambda x, y: recall_at_k(x, y, metric="cosine"), "recall_at_k"),
        (lambda x, y: precision_at_1(x, y, metric="cosine"), "precision_at_1"),
        (lambda x, y: map_at_r(x, y, metric="cosine"), "map_at_r"),
        (lambda x, y: r_precision(x, y, metric="cosine"), "r_precision"),
        (lambda x, y: knn_accuracy(x, y, metric="cosine"), "knn_accuracy"),
    ],
)
def test_the_old_metric_keyword_is_refused_naming_distance(call, name):
    x, y = blobs()
    with pytest.raises(TypeError) as error:
        call(x, y)
    message = str(error.value)
    assert message == (
        f"{name}() takes distance= now, not metric=: write {name}(..., distance='cosine')"
    )
    assert "\n" not in message


@pytest.mark.parametrize("value", [["map@r", "nmi"], "nmi"])
def test_metric_of_score_names_is_refused_naming_metrics(value):
    """metric=["map@r"] said to write distance=["map@r"]: the old name of the distance, where
    the scores (metrics=, one letter away) were meant."""
    x, y = blobs()
    with pytest.raises(TypeError) as error:
        evaluate_embeddings(x, y, metric=value)
    assert str(error.value) == (
        "evaluate_embeddings() takes no metric=: the scores to compute are metrics=, write "
        f"evaluate_embeddings(..., metrics={value!r}) (the distance is distance=)"
    )


def test_the_keywords_moved_into_options_say_where():
    x, y = blobs()
    with pytest.raises(TypeError, match=r"options=EvaluationOptions\(cluster_kwargs=\{'n_init'"):
        evaluate_embeddings(x, y, cluster_kwargs={"n_init": 3})
    with pytest.raises(TypeError, match=r"options=EvaluationOptions\(silhouette_sample=500\)"):
        evaluate_embeddings(x, y, silhouette_sample=500)
    table = evaluate_embeddings(
        x, y, metrics=["nmi"], options=EvaluationOptions(cluster_kwargs={"n_init": 3})
    )
    assert table.partition.options["n_init"] == 3 and table.partition.estimator.n_init == 3


def test_the_k_means_rule_falls_with_the_count_and_says_what_it_did():
    assert kmeans_rule(10) == {"init": "k-means++", "n_init": 10, "max_iter": 20}
    assert kmeans_rule(2)["n_init"] == 10 and kmeans_rule(20)["n_init"] == 5
    assert kmeans_rule(64) == {"init": "k-means++", "n_init": 1, "max_iter": 20}
    assert kmeans_rule(100) == {"init": "random", "n_init": 1, "max_iter": 20}
    assert kmeans_rule("auto")["n_init"] == 5
    x, y = blobs()
    rule = evaluate_embeddings(x, y, metrics=["nmi"]).partition.rule
    assert rule == "k-means++ seeding, 10 restarts of at most 20 iterations, best inertia"


def test_spectral_clustering_states_how_its_k_means_step_ran():
    """DSCL's Algorithm 2 ends in k-means on the projected rows: the heading says how, as the
    projection then that k-means give the partition scored."""
    from clusterable.cluster.spectral import KMEANS_STEP

    x, y = blobs()
    scored = evaluate_embeddings(x, y, metrics=["nmi"], clustering="spectral")
    expected = f"k-means of the spectral rows: {describe_kmeans(KMEANS_STEP)}"
    assert scored.partition.rule == expected
    assert expected.endswith("best inertia") and "k-means++ seeding" in expected
    assert evaluate_embeddings(x, y, metrics=["nmi"], clustering="gmm").partition.rule == ""


def test_evaluate_and_cluster_find_the_same_partition_by_the_one_rule():
    x, y = blobs(seed=3, classes=6, n=300, spread=3.0)
    scored = evaluate_embeddings(x, y, metrics=["nmi", "accuracy"], seed=2)
    fitted = cluster.fit(x, "kmeans", 6, seed=2, **kmeans_rule(6))
    np.testing.assert_array_equal(scored.partition.labels_, fitted.labels_)


def test_hard_blobs_score_the_same_whatever_the_seed():
    # Ten groups, some of them close: one k-means++ restart lands in other local optima with
    # some seeds; the rule's ten restarts find the same partition from every seed.
    rng = np.random.default_rng(5)
    centres = rng.standard_normal((10, 8)) * 2.2
    y = np.repeat(np.arange(10), 60)
    x = centres[y] + rng.standard_normal((600, 8))
    old = EvaluationOptions(cluster_kwargs={"n_init": 1})
    single = {
        evaluate_embeddings(x, y, metrics=["accuracy"], seed=s, options=old)["accuracy"]
        for s in range(5)
    }
    rule = [evaluate_embeddings(x, y, metrics=["accuracy"], seed=s)["accuracy"] for s in range(5)]
    assert max(rule) - min(rule) <= 0.01
    assert max(single) - min(single) > max(rule) - min(rule)


def test_the_device_given_reaches_the_clusterer():
    x, y = blobs()
    table = evaluate_embeddings(x, y, metrics=["nmi"], device="cpu")
    assert str(table.partition.estimator.device) == "cpu"


def test_the_cpu_named_is_used_where_torch_would_detect_a_gpu(monkeypatch):
    # torch is made to say it has a GPU this machine may lack: a search or a k-means step that
    # read "auto" instead of the device handed down would try CUDA, and fail or move.
    import torch

    from clusterable.evaluate import neighbors

    x, y = blobs()
    expected = evaluate_embeddings(x, y, ks=(1,), device="cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert neighbors.search_device_of("auto") == torch.device("cuda")  # "auto": the detection
    assert neighbors.search_device_of("auto", "cpu") in (None, torch.device("cpu"))
    table = evaluate_embeddings(x, y, ks=(1,), device="cpu")
    assert str(table.partition.estimator.device) == "cpu"
    for key in ("recall@1", "map@r", "nmi", "f1"):
        assert table[key] == expected[key]
