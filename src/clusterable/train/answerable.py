"""What a small evaluated set can answer, and a note for what it cannot.

:func:`~clusterable.evaluate.evaluate_embeddings` refuses a Recall@K whose K exceeds the
candidate neighbours, and retrieval metrics where no class has two items (it must not silently
report a different table). A training run asks for the usual ``(1, 2, 4, 8)`` whatever the size of
its validation or test split; on a folder of a few photos it leaves out what the split cannot
answer instead, and says so under the table, rather than fail after the training is done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from clusterable.evaluate.registry import METRICS, available_metrics, select_metrics


def ks_within(
    ks: Sequence[int], candidates: int, name: str = "Recall@K"
) -> tuple[tuple[int, ...], str | None]:
    """The ``ks`` not above ``candidates``, and a note naming the ones left out (None if none).

    Parameters
    ----------
    ks : sequence of int
        The neighbour counts asked for.
    candidates : int
        Neighbours a query can have: ``n - 1`` for a leave-one-out search of ``n`` items, the
        reference set's size for a k-NN classifier.
    name : str
        How the note names the metric.

    Examples
    --------
    >>> ks_within((1, 2, 4, 8), 3)
    ((1, 2), 'Recall@K for K = 4, 8 left out: only 3 candidate neighbour(s) per query')
    """
    kept = tuple(k for k in ks if k <= candidates)
    dropped = [k for k in ks if k > candidates]
    if not dropped:
        return kept, None
    shown = ", ".join(str(k) for k in dropped)
    note = f"{name} for K = {shown} left out: only {candidates} candidate neighbour(s) per query"
    return kept, note


@dataclass(frozen=True)
class Answerable:
    """The arguments of :func:`~clusterable.evaluate.evaluate_embeddings` a set can answer."""

    metrics: list[str] | None  # None: the default table
    ks: tuple[int, ...]
    notes: list[str] = field(default_factory=list)


def answerable_table(
    labels: np.ndarray, ks: Sequence[int] = (1, 2, 4, 8), candidates: int | None = None
) -> Answerable:
    """The table of the labelled items ``labels`` ``(n,)`` (no -1) without what they cannot
    answer: Recall@K beyond ``candidates`` neighbours (``n - 1`` by default, the gallery's size
    where queries rank a gallery), retrieval where no class has two items."""
    kept, note = ks_within(ks, len(labels) - 1 if candidates is None else candidates)
    notes = [note] if note is not None else []
    silhouette_note = _silhouette_left_out(labels)
    if np.bincount(labels).max(initial=0) >= 2:
        if silhouette_note is None:
            return Answerable(None, kept or (1,), notes)
        table = [name for name in select_metrics(None) if name != "silhouette"]
        return Answerable(table, kept or (1,), [*notes, silhouette_note])
    clustering = [
        name
        for name in available_metrics()
        if METRICS[name].default
        and METRICS[name].needs == {"partition"}
        and not (name == "silhouette" and silhouette_note)
    ]
    notes = ["retrieval metrics left out: no class has two items to retrieve"]
    return Answerable(clustering, (1,), notes + ([silhouette_note] if silhouette_note else []))


def _silhouette_left_out(labels: np.ndarray) -> str | None:
    """The note for a silhouette the table's partition (k-means, k = the classes) cannot have:
    it needs between 2 and n - 1 clusters of the ``n`` items; None where it can."""
    n, k = len(labels), len(np.unique(labels))
    if 2 <= k <= n - 1:
        return None
    return (
        f"silhouette left out: {k} cluster(s) of {n} item(s), and a silhouette needs between 2 "
        "and n - 1 clusters"
    )
