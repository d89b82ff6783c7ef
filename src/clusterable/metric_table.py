"""Metric tables people can read: each score named for what it is, under a heading that says what
was measured (which items, which clustering, which k), values in %."""

from __future__ import annotations

from collections.abc import Mapping

CLUSTERING_NAMES = {
    "kmeans": "k-means",
    "spectral": "DSCL spectral clustering",
    "aas": "AAS (chooses its own number of clusters)",
    "ap": "affinity propagation",
    "affinity_propagation": "affinity propagation",
    "gmm": "Gaussian mixture",
}

#: How each metric key is shown: the partition scores are named so that pairwise precision and
#: recall cannot be read as precision@1 or Recall@1.
METRIC_LABELS = {
    "precision@1": "precision@1 (retrieval)",
    "map@r": "MAP@R (retrieval)",
    "r_precision": "R-precision (retrieval)",
    "nmi": "NMI (clusters)",
    "precision": "pairwise precision (clusters)",
    "recall": "pairwise recall (clusters)",
    "f1": "pairwise F1 (clusters)",
    "accuracy": "Hungarian accuracy (clusters)",
    "ari": "ARI (clusters)",
    "v_measure": "V-measure (clusters)",
    "silhouette": "silhouette (clusters)",
    "subclass_nmi": "sub-class NMI (clusters vs fine classes)",
    "subclass_accuracy": "sub-class Hungarian accuracy",
    "subclass_f1": "sub-class pairwise F1",
    "classification_accuracy": "classification accuracy (the loss's own classifier)",
}


def metric_label(name: str) -> str:
    """The readable name of a key of :func:`clusterable.evaluate.evaluate_embeddings`."""
    if name in METRIC_LABELS:
        return METRIC_LABELS[name]
    if name.startswith("recall@"):
        return f"{name} (retrieval)"
    if name.startswith("knn@"):
        return f"{name[4:]}-NN accuracy (from training items)"
    return name


def clustering_heading(method: str, k: int | None, found: int, n: int, what: str) -> str:
    """``"evaluated: 539 items; clustering: k-means, k = 10, 10 clusters found"``."""
    asked = "" if k is None else f", k = {k}"
    name = CLUSTERING_NAMES.get(method, method)
    return f"{what}: {n} items; clustering: {name}{asked}, {found} clusters found"


def format_metric_table(table: Mapping[str, float], heading: str) -> str:
    """The heading, then one labelled line per metric, values in %."""
    labels = {name: metric_label(name) for name in table}
    width = max(len(label) for label in labels.values())
    rows = [f"  {labels[name]:<{width}}  {100 * value:6.2f} %" for name, value in table.items()]
    return "\n".join([heading, *rows])
