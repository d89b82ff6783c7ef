"""Odd labels and arguments get a ValueError that says what to do, never an error from numpy."""

from __future__ import annotations

import numpy as np
import pytest

from clusterable.evaluate import (
    ari,
    cluster_accuracy,
    evaluate_embeddings,
    knn_accuracy,
    map_at_r,
    nmi,
    pairwise_f1,
    precision_at_1,
    r_precision,
    recall_at_k,
    silhouette,
    v_measure,
)

# Three well-separated classes of four points each.
EMB = np.repeat(10.0 * np.eye(3, 2), 4, axis=0) + np.random.default_rng(0).normal(0, 0.1, (12, 2))
CLUSTERS = np.repeat([0, 1, 2], 4)

LABELLED = {
    "recall_at_k": lambda labels: recall_at_k(EMB, labels, ks=(1, 2)),
    "precision_at_1": lambda labels: precision_at_1(EMB, labels),
    "map_at_r": lambda labels: map_at_r(EMB, labels),
    "r_precision": lambda labels: r_precision(EMB, labels),
    "knn_accuracy": lambda labels: knn_accuracy(EMB, labels, k=1),
    "evaluate_embeddings": lambda labels: evaluate_embeddings(EMB, labels, ks=(1, 2)),
    "nmi": lambda labels: nmi(labels, CLUSTERS),
    "ari": lambda labels: ari(labels, CLUSTERS),
    "pairwise_f1": lambda labels: pairwise_f1(labels, CLUSTERS),
    "cluster_accuracy": lambda labels: cluster_accuracy(labels, CLUSTERS),
    "v_measure": lambda labels: v_measure(labels, CLUSTERS),
}


def object_labels(values: list) -> np.ndarray:
    labels = np.empty(len(values), dtype=object)
    labels[:] = values
    return labels


@pytest.mark.parametrize("metric", list(LABELLED))
@pytest.mark.parametrize("missing", [None, float("nan")])
def test_a_missing_label_names_its_row(metric, missing):
    values = ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    values[5] = missing
    with pytest.raises(ValueError, match=r"missing label.*first: row 5.*every item needs a label"):
        LABELLED[metric](object_labels(values))


@pytest.mark.parametrize("metric", list(LABELLED))
def test_ints_mixed_with_strings_name_both_and_the_fix(metric):
    values = [0] * 4 + [1] * 4 + ["cat"] * 4
    with pytest.raises(ValueError, match=r"int 0 \(row 0\), str 'cat' \(row 8\).*astype\(str\)"):
        LABELLED[metric](object_labels(values))


@pytest.mark.parametrize("metric", list(LABELLED))
def test_object_labels_of_one_type_score_as_typed_labels(metric):
    typed = np.repeat(["cat", "dog", "emu"], 4)
    assert LABELLED[metric](object_labels(typed.tolist())) == LABELLED[metric](typed)


@pytest.mark.parametrize("sample_size", [0, -3, 2.5, True, "all"])
def test_silhouette_sample_size_must_be_a_positive_count(sample_size):
    with pytest.raises(ValueError, match="sample_size must be a positive number of items"):
        silhouette(EMB, CLUSTERS, sample_size=sample_size)


@pytest.mark.parametrize(
    ("seed", "problem"),
    [(None, "is not a number"), ("1", "is not a number"), (1.5, "is not an integer"), (-1, "")],
)
def test_silhouette_seed_must_be_one_numpy_takes(seed, problem):
    """-1, "1" and 1.5 were NumPy's SeedSequence errors; None drew a fresh sample every call."""
    message = rf"^silhouette seed={seed!r} {problem}.*must be an integer in \[0, "
    with pytest.raises(ValueError, match=message):
        silhouette(EMB, CLUSTERS, sample_size=6, seed=seed)


def test_knn_labels_of_two_kinds_are_refused_not_compared_as_text():
    """Class ids 0/1 for training and their names for testing scored 0; ids against their
    spelling as text ("0", "1") scored 1 by string equality."""
    train, test = [[0.0], [1.0], [10.0], [11.0]], [[0.5], [10.5]]
    with pytest.raises(ValueError, match=r"^train_y holds numbers but test_y holds strings; give"):
        knn_accuracy(train, [0, 0, 1, 1], test, ["0", "1"], k=1)
    with pytest.raises(ValueError, match=r"^train_y holds strings but test_y holds numbers"):
        knn_accuracy(train, ["a", "a", "b", "b"], test, [0, 1], k=1)
    assert knn_accuracy(train, [0.0, 0.0, 1.0, 1.0], test, [0, 1], k=1) == 1.0  # 1.0 is 1


@pytest.mark.parametrize(
    ("k", "message"),
    [
        (1.0, r"^k must be a positive integer or a sequence of them, e\.g\. k=\(1, 2, 4, 8\); got"),
        ("1", r"^k must be a positive integer or a sequence of them"),
        ([1.5], r"^k must be a positive integer, got 1\.5"),
        ([], r"^k is empty; pass at least one k"),
    ],
)
def test_knn_a_k_that_is_no_count_is_refused_not_truncated(k, message):
    """k=1.0 was Python's "'float' object is not iterable"; k=[1.5] ran as k=1."""
    x, y = [[0.0], [1.0], [10.0], [11.0]], [0, 0, 1, 1]
    with pytest.raises(ValueError, match=message):
        knn_accuracy(x, y, k=k)


@pytest.mark.parametrize(
    "score",
    [
        lambda clusters: silhouette(EMB, clusters),
        lambda clusters: nmi(CLUSTERS, clusters),
        lambda clusters: evaluate_embeddings(EMB, CLUSTERS, clustering=clusters, metrics=["ari"]),
    ],
    ids=["silhouette", "nmi", "evaluate_embeddings"],
)
def test_cluster_ids_are_read_as_labels_are(score):
    """Cluster ids of shape (n, 1) were refused where labels of that shape are taken; a wrong
    count was measured against "labels", which silhouette has none of; named clusters got no
    hint of what to pass."""
    assert score(CLUSTERS[:, None]) == score(CLUSTERS)
    with pytest.raises(ValueError, match=r"has 5 entries but there are 12 items; pass one cluster"):
        score(CLUSTERS[:5])
    with pytest.raises(ValueError, match=r"-1 for noise\), got dtype <U\d+; number named clusters"):
        score(CLUSTERS.astype(str))
