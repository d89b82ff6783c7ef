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
