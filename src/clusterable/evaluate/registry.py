"""Every score of the evaluation table under one name, with the shared artefacts it reads.

A metric's own module registers it with :func:`register_metric`, saying what it reads besides the
embeddings and labels:

- ``"neighbours"``: the per-query scores of the one leave-one-out kNN search, ``max(ks)`` deep;
- ``"neighbours_at_r"``: the same search, deep enough for ``R`` = the query's class size - 1;
- ``"partition"``: the clustering and its one sparse contingency table.

`clusterable.evaluate.evaluate_embeddings` builds the union of what the selected metrics read,
once, and nothing else: a selection without partition metrics never clusters, one without
neighbour metrics never searches. A new metric is one decorated function in one module (and its
test); the names a user can select are :func:`available_metrics`, the keys a table holds (and
``clusterable tune`` can maximise) :func:`table_keys`, those that score a partition alone
:func:`partition_metric_names` (``cluster --labels``, the clustering report), each shown under the
label it was registered with (``clusterable.metric_table``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from clusterable._register import Registry
from clusterable.evaluate._inputs import Metric as Distance

if TYPE_CHECKING:
    from clusterable.evaluate.partition_metrics import Contingency
    from clusterable.evaluate.silhouette import SilhouetteDistances

Need = Literal["neighbours", "neighbours_at_r", "partition"]
NEEDS: tuple[Need, ...] = ("neighbours", "neighbours_at_r", "partition")


@dataclass
class Artefacts:
    """What the metrics of one evaluation share, each computed once (None when none asked).

    Attributes
    ----------
    points : numpy.ndarray
        ``(n, d)`` validated embeddings, rows l2-normalised under ``distance="cosine"``.
    codes : numpy.ndarray
        ``(n,)`` int64 class codes ``0 .. C-1``.
    ks : tuple of int
        The K of Recall@K (validated when the neighbours are needed).
    distance, seed, silhouette_sample
        The evaluation's distance, seed and silhouette sample (see `evaluate_embeddings`).
    per_query : dict of str to numpy.ndarray, optional
        ``(n,)`` per-query retrieval scores (``"neighbours"``; with ``map@r`` and
        ``r_precision`` under ``"neighbours_at_r"``), NaN for lone queries (and for the gallery
        items of a query/gallery evaluation).
    clusters : numpy.ndarray, optional
        ``(n,)`` int64 cluster codes, noise as singletons (``"partition"``).
    table : Contingency, optional
        Classes against ``clusters`` (``"partition"``).
    silhouette_distances : SilhouetteDistances, optional
        The silhouette's distances, where they were computed ahead for the kNN search to read
        too (`clusterable.evaluate.silhouette.silhouette_distances`).
    """

    points: np.ndarray
    codes: np.ndarray
    ks: tuple[int, ...]
    distance: Distance
    seed: int
    silhouette_sample: int | Literal["auto"] | None
    per_query: dict[str, np.ndarray] | None = None
    clusters: np.ndarray | None = None
    table: Contingency | None = None
    silhouette_distances: SilhouetteDistances | None = None


#: ``score(artefacts)``: one float (the key is the metric's name) or several keyed floats.
Score = Callable[[Artefacts], "float | dict[str, float]"]


@dataclass(frozen=True)
class TableMetric:
    """A registered score: what it reads, and whether the default table shows it."""

    score: Score
    needs: frozenset[Need]
    default: bool


#: Every metric by name, in registration order, with its ``label`` and ``per_k`` metadata.
METRICS: Registry[TableMetric] = Registry("metric", sort=False)


def register_metric(
    name: str,
    *,
    needs: Iterable[Need],
    default: bool = True,
    label: str | None = None,
    per_k: bool = False,
    **metadata: Any,
) -> Callable[[Score], Score]:
    """Function decorator: make ``score(artefacts)`` the metric ``name`` of the table.

    Parameters
    ----------
    name : str
        The key of the table (a ``per_k`` metric names its keys itself).
    needs : iterable of {"neighbours", "neighbours_at_r", "partition"}
        The artefacts ``score`` reads; the others are None when it runs.
    default : bool
        Whether ``evaluate_embeddings(metrics=None)`` computes it.
    label : str, optional
        How tables show it, saying what it measures (``"NMI (clusters)"``); a ``per_k``
        metric's label holds ``{k}``. Default: the name.
    per_k : bool
        ``score`` returns one key for each K of the evaluation's ``ks``: the name, ``PREFIX@k``,
        with K for ``k`` (``recall@k`` gives ``recall@1``, ``recall@2``, ...).
    **metadata
        Anything else to keep with the entry (``METRICS.metadata(name)``).
    """
    wanted = frozenset(needs)
    unknown = wanted - set(NEEDS)
    if unknown:
        raise ValueError(f"metric {name!r} needs {sorted(unknown)}; known needs: {NEEDS}")
    if per_k and not name.endswith("@k"):
        raise ValueError(f"a per-K metric is named PREFIX@k (its keys PREFIX@1, ...), got {name!r}")
    if label is not None:
        metadata["label"] = label

    def add(score: Score) -> Score:
        METRICS.add(name, TableMetric(score, wanted, default), per_k=per_k, **metadata)
        return score

    return add


def _per_k(name: str) -> bool:
    return bool(METRICS.metadata(name).get("per_k"))


def metric_of_key(key: str) -> str | None:
    """The registered metric whose score a table holds under ``key`` (``nmi`` -> ``nmi``,
    ``recall@4`` -> ``recall@k``); None for a key no registered metric writes (``knn@5``, or a
    per-K name without its K)."""
    if key in METRICS:
        return None if _per_k(key) else key
    prefix, at, k = key.rpartition("@")
    name = f"{prefix}@k"
    if at and k.isdigit() and int(k) >= 1 and name in METRICS and _per_k(name):
        return name
    return None


def table_keys() -> list[str]:
    """The keys a table can hold, in table order; a per-K metric's as ``PREFIX@K``
    (``recall@K``, ``precision@1``, ``map@r``, ...)."""
    return [name[:-1] + "K" if _per_k(name) else name for name in available_metrics()]


def _reads_neighbours(name: str) -> bool:
    return bool(METRICS[name].needs & {"neighbours", "neighbours_at_r"})


def available_metrics() -> list[str]:
    """Every name ``evaluate_embeddings(metrics=...)`` accepts, in table order: the neighbour
    metrics first, then the partition metrics, each in the order their modules register them."""
    return sorted(METRICS.names(), key=lambda name: not _reads_neighbours(name))


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


def partition_metric_names(default_only: bool = True) -> list[str]:
    """The metrics that score a partition alone (they read it, and no kNN search), in table
    order: those of the default table, or with ``default_only=False`` every one (``v_measure``
    too). What ``cluster --labels``, the clustering report and the reports' partition panels
    show, so that a metric registered with ``needs={"partition"}`` reaches them all."""
    return [
        name
        for name in available_metrics()
        if METRICS[name].needs == {"partition"} and (METRICS[name].default or not default_only)
    ]


def needs_of(names: Iterable[str]) -> frozenset[Need]:
    """The artefacts the metrics ``names`` read, together."""
    return frozenset().union(*(METRICS[name].needs for name in names))
