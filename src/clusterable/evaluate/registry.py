"""Every score of the evaluation table under one name, with the shared artefacts it reads.

A metric's own module registers it with :func:`register_metric`, saying what it reads besides the
embeddings and labels:

- ``"neighbours"``: the per-query scores of the one leave-one-out kNN search, ``max(ks)`` deep;
- ``"neighbours_at_r"``: the same search, deep enough for ``R`` = the query's class size - 1;
- ``"partition"``: the clustering and its one sparse contingency table.

`clusterable.evaluate.evaluate_embeddings` builds the union of what the selected metrics read,
once, and nothing else: a selection without partition metrics never clusters, one without
neighbour metrics never searches. A new metric is one decorated function in one module (and its
test); the names a user can select are :func:`available_metrics`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from clusterable._register import register_once
from clusterable.evaluate._inputs import Metric

if TYPE_CHECKING:
    from clusterable.evaluate.partition_metrics import Contingency

Need = Literal["neighbours", "neighbours_at_r", "partition"]
NEEDS: tuple[Need, ...] = ("neighbours", "neighbours_at_r", "partition")


@dataclass
class Artefacts:
    """What the metrics of one evaluation share, each computed once (None when none asked).

    Attributes
    ----------
    points : numpy.ndarray
        ``(n, d)`` validated embeddings, rows l2-normalised under ``metric="cosine"``.
    codes : numpy.ndarray
        ``(n,)`` int64 class codes ``0 .. C-1``.
    ks : tuple of int
        The K of Recall@K (validated when the neighbours are needed).
    metric, seed, silhouette_sample
        The evaluation's distance, seed and silhouette sample (see `evaluate_embeddings`).
    per_query : dict of str to numpy.ndarray, optional
        ``(n,)`` per-query retrieval scores (``"neighbours"``; with ``map@r`` and
        ``r_precision`` under ``"neighbours_at_r"``), NaN for lone queries.
    clusters : numpy.ndarray, optional
        ``(n,)`` int64 cluster codes, noise as singletons (``"partition"``).
    table : Contingency, optional
        Classes against ``clusters`` (``"partition"``).
    """

    points: np.ndarray
    codes: np.ndarray
    ks: tuple[int, ...]
    metric: Metric
    seed: int
    silhouette_sample: int | Literal["auto"] | None
    per_query: dict[str, np.ndarray] | None = None
    clusters: np.ndarray | None = None
    table: Contingency | None = None


#: ``score(artefacts)``: one float (the key is the metric's name) or several keyed floats.
Score = Callable[[Artefacts], "float | dict[str, float]"]


@dataclass(frozen=True)
class TableMetric:
    """A registered score: what it reads, and whether the default table shows it."""

    score: Score
    needs: frozenset[Need]
    default: bool


METRICS: dict[str, TableMetric] = {}


def register_metric(
    name: str, *, needs: Iterable[Need], default: bool = True
) -> Callable[[Score], Score]:
    """Function decorator: make ``score(artefacts)`` the metric ``name`` of the table.

    Parameters
    ----------
    name : str
        The key of the table (a metric returning several keys, such as ``recall@k``, names them
        itself).
    needs : iterable of {"neighbours", "neighbours_at_r", "partition"}
        The artefacts ``score`` reads; the others are None when it runs.
    default : bool
        Whether ``evaluate_embeddings(metrics=None)`` computes it.
    """
    wanted = frozenset(needs)
    unknown = wanted - set(NEEDS)
    if unknown:
        raise ValueError(f"metric {name!r} needs {sorted(unknown)}; known needs: {NEEDS}")

    def add(score: Score) -> Score:
        register_once(METRICS, name, TableMetric(score, wanted, default), "metric")
        return score

    return add


def _reads_neighbours(name: str) -> bool:
    return bool(METRICS[name].needs & {"neighbours", "neighbours_at_r"})


def available_metrics() -> list[str]:
    """Every name ``evaluate_embeddings(metrics=...)`` accepts, in table order: the neighbour
    metrics first, then the partition metrics, each in the order their modules register them."""
    return sorted(METRICS, key=lambda name: not _reads_neighbours(name))


def select_metrics(metrics: Sequence[str] | None) -> list[str]:
    """The names to compute, in table order: the default set for None.

    Raises
    ------
    ValueError
        For an empty selection, a name that is not a string, or a name nobody registered.
    """
    if metrics is None:
        return [name for name in available_metrics() if METRICS[name].default]
    if isinstance(metrics, str):
        metrics = [metrics]
    names = list(metrics)
    if not names:
        raise ValueError(
            f"metrics is empty; pass None for the default table or names among "
            f"{', '.join(available_metrics())}."
        )
    unknown = [name for name in names if name not in METRICS]
    if unknown:
        raise ValueError(
            f"unknown metric(s) {', '.join(map(repr, unknown))}; choose among "
            f"{', '.join(available_metrics())}."
        )
    return [name for name in available_metrics() if name in names]


def needs_of(names: Iterable[str]) -> frozenset[Need]:
    """The artefacts the metrics ``names`` read, together."""
    return frozenset().union(*(METRICS[name].needs for name in names))
