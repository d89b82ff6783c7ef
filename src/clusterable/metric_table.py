"""Metric tables people can read: each score named for what it is, under a heading that says what
was measured (which items, which clustering, which k, how k-means ran), values in %."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from clusterable.evaluate.registry import label_of_key

if TYPE_CHECKING:
    from clusterable.evaluate.clustering import ScoredPartition

#: How the keys that are not metrics of the registry are shown (the registered metrics carry their
#: labels from registration: ``register_metric(..., label=...)``).
OTHER_LABELS = {
    "subclass_nmi": "sub-class NMI (clusters vs fine classes)",
    "subclass_accuracy": "sub-class Hungarian accuracy",
    "subclass_f1": "sub-class pairwise F1",
    "classification_accuracy": "classification accuracy (the loss's own classifier)",
}


def metric_label(name: str) -> str:
    """The readable name of a key of :func:`clusterable.evaluate.evaluate_embeddings` (the
    label its metric was registered with) or of the run's other scores."""
    label = label_of_key(name)
    if label is not None:
        return label
    if name in OTHER_LABELS:
        return OTHER_LABELS[name]
    if name.startswith("knn@"):
        return f"{name[4:]}-NN accuracy (from training items)"
    return name


def clustering_heading(
    method: str, k: int | str | None, found: int, n: int, what: str, rule: str = "", noise: int = 0
) -> str:
    """``"evaluated: 539 items; clustering: k-means, k = 10, 10 clusters found (k-means++
    seeding, 10 restarts of at most 20 iterations, best inertia)"``: ``rule`` says how the
    clusterer ran (`clusterable.evaluate.describe_clustering`), in brackets at the end; ``noise``
    items marked -1 are counted after the clusters (``"13 clusters found, 149 items noise"``)."""
    if method == "given":
        return f"{what}: {n} items; clustering: the cluster ids given, {found} clusters"
    from clusterable.cluster import clusterer_info  # the label given at registration

    info = clusterer_info(method)
    asked = f", k = {k}" if k is not None else ""
    own = "" if info.takes_n_clusters else " (chooses its own number of clusters)"
    marked = f", {noise} items noise" if noise else ""
    how = f" ({rule})" if rule else ""
    return (
        f"{what}: {n} items; clustering: {info.label}{own}{asked}, {found} clusters found"
        f"{marked}{how}"
    )


def partition_heading(partition: ScoredPartition, n: int, what: str) -> str:
    """`clustering_heading` of the partition an evaluation scored (``Evaluation.partition``)."""
    return clustering_heading(
        partition.method,
        partition.asked,
        partition.n_clusters,
        n,
        what,
        partition.rule,
        partition.noise,
    )


def format_metric_table(
    table: Mapping[str, float],
    heading: str,
    notes: Sequence[str] = (),
    beside: tuple[str, str, Mapping[str, float]] | None = None,
) -> str:
    """The heading, then one labelled line per metric, values in %, then each note (a metric
    left out, and why) on a line of its own.

    ``beside``: ``(title of the table's column, title of another, its table)``, a second
    column of the same metrics under a line of the two titles (a metric the other table lacks
    shows ``-``): the run's test table beside the one before training."""
    labels = {name: metric_label(name) for name in table}
    width = max(len(label) for label in labels.values())
    rows = [f"  {labels[name]:<{width}}  {100 * value:6.2f} %" for name, value in table.items()]
    if beside is not None:
        title, other_title, other = beside
        first, second = max(len(title), 8), max(len(other_title), 8)  # 8: "100.00 %"
        rows = [f"  {'':<{width}}  {title:>{first}}  {other_title:>{second}}"] + [
            f"  {labels[name]:<{width}}  {f'{100 * value:6.2f} %':>{first}}  "
            + f"{f'{100 * other[name]:6.2f} %' if name in other else '-':>{second}}"
            for name, value in table.items()
        ]
    return "\n".join([heading, *rows, *(f"  note: {note}" for note in notes)])
