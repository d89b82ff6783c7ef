"""Every score of the evaluation table under one name, with the shared artefacts it reads.

A metric's own module registers it with :func:`register_metric`, saying what it reads besides the
embeddings and labels:

- ``"neighbours"``: the per-query scores of the one leave-one-out kNN search, ``max(ks)`` deep;
- ``"neighbours_at_r"``: the same search, deep enough for ``R`` = the query's class size - 1;
- ``"partition"``: the clustering and its one sparse contingency table;
- ``"pairs"``: the counting passes over every pair (`clusterable.evaluate.pair_metrics`).

A metric registered with a ``parameter`` is asked for as ``NAME=VALUE`` (``fnmr@fmr=1e-3``;
the bare name takes the registered default) and writes the key ``NAME=VALUE`` with ``VALUE``
spelled as Python's ``repr(float)`` (``fnmr@fmr=0.001``), the one spelling of each value.

`clusterable.evaluate.evaluate_embeddings` builds the union of what the selected metrics read,
once, and nothing else: a selection without partition metrics never clusters, one without
neighbour metrics never searches. A new metric is one decorated function in one module (and its
test); the names a user can select are :func:`available_metrics`, the keys a table holds (and
``clusterable tune`` can maximise) :func:`table_keys`, those that score a partition alone
:func:`partition_metric_names` (``cluster --labels``, the clustering report), each shown under the
label it was registered with (``clusterable.metric_table``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from clusterable._register import Registry
from clusterable.evaluate._inputs import Metric as Distance

if TYPE_CHECKING:
    from clusterable.evaluate.pair_metrics import PairScores
    from clusterable.evaluate.partition_metrics import Contingency
    from clusterable.evaluate.silhouette import SilhouetteDistances

Need = Literal["neighbours", "neighbours_at_r", "partition", "pairs"]
NEEDS: tuple[Need, ...] = ("neighbours", "neighbours_at_r", "partition", "pairs")


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
    values : dict of str to tuple of float
        The values asked of each selected metric registered with a ``parameter``.
    pairs : PairScores, optional
        The scores over every pair (``"pairs"``).
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
    values: dict[str, tuple[float, ...]] = field(default_factory=dict)
    pairs: PairScores | None = None


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
    parameter: float | None = None,
    **metadata: Any,
) -> Callable[[Score], Score]:
    """Function decorator: make ``score(artefacts)`` the metric ``name`` of the table.

    Parameters
    ----------
    name : str
        The key of the table (a ``per_k`` metric names its keys itself).
    needs : iterable of {"neighbours", "neighbours_at_r", "partition", "pairs"}
        The artefacts ``score`` reads; the others are None when it runs.
    default : bool
        Whether ``evaluate_embeddings(metrics=None)`` computes it.
    label : str, optional
        How tables show it, saying what it measures (``"NMI (clusters)"``); a ``per_k``
        metric's label holds ``{k}``. Default: the name.
    per_k : bool
        ``score`` returns one key for each K of the evaluation's ``ks``: the name, ``PREFIX@k``,
        with K for ``k`` (``recall@k`` gives ``recall@1``, ``recall@2``, ...).
    parameter : float, optional
        The metric takes a number in [0, 1], asked as ``NAME=VALUE`` (this default for the bare
        name); ``score`` reads the values asked from ``artefacts.values[name]`` and returns one
        key ``NAME=repr(VALUE)`` for each. Its label may hold ``{value}``.
    **metadata
        Anything else to keep with the entry (``METRICS.metadata(name)``), e.g.
        ``better="lower"`` for an error rate (`lower_is_better`).
    """
    wanted = frozenset(needs)
    unknown = wanted - set(NEEDS)
    if unknown:
        raise ValueError(f"metric {name!r} needs {sorted(unknown)}; known needs: {NEEDS}")
    if per_k and not name.endswith("@k"):
        raise ValueError(f"a per-K metric is named PREFIX@k (its keys PREFIX@1, ...), got {name!r}")
    if parameter is not None:
        metadata["parameter"] = _checked_value(name, parameter)
    if label is not None:
        metadata["label"] = label

    def add(score: Score) -> Score:
        METRICS.add(name, TableMetric(score, wanted, default), per_k=per_k, **metadata)
        return score

    return add


def _per_k(name: str) -> bool:
    return bool(METRICS.metadata(name).get("per_k"))


def _parameterised(name: str) -> bool:
    return name in METRICS and METRICS.metadata(name).get("parameter") is not None


def _checked_value(name: str, value: Any) -> float:
    number = float(value)  # ValueError for text that is no number
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{name}={value} is outside [0, 1]; give a fraction, e.g. {name}=0.001")
    return number


def parse_metric(text: str) -> tuple[str, float | None]:
    """``(registered name, value)`` of a metric as asked: ``("fnmr@fmr", 0.001)`` for
    ``fnmr@fmr=1e-3`` or ``fnmr@fmr`` (its default), ``("nmi", None)`` for ``nmi``.

    Raises
    ------
    ValueError
        For a name nobody registered, a value given to a metric that takes none, or a value that
        is not a number in [0, 1].
    """
    name, equals, value = text.partition("=")
    per_k = metric_of_key(text)
    if per_k is not None and per_k != text:  # a table's key, "recall@4": recall@k at K = 4
        k = text.rpartition("@")[2]
        raise ValueError(
            f"{text!r} is the table's key of {per_k} at K = {k}: ask for {per_k!r} with "
            f"ks=({k},) (each K of ks gives its key)"
        )
    if name not in METRICS or (equals and not _parameterised(name)):
        raise ValueError(
            f"unknown metric(s) {text!r}{_did_you_mean(name)}; choose among "
            f"{', '.join(available_metrics())}."
        )
    if not _parameterised(name):
        return name, None
    if not equals:
        return name, float(METRICS.metadata(name)["parameter"])
    try:
        return name, _checked_value(name, value)
    except ValueError:
        raise ValueError(
            f"{text!r}: {name} takes a number in [0, 1] after '=', e.g. {name}=0.001"
        ) from None


def _did_you_mean(name: str) -> str:
    """`` (did you mean NAME?)`` for the registered metric ``name`` was likely meant as: the same
    name in other case (``MAP@R``), a table key's metric (``Recall@4``: ``recall@k`` with
    ``ks=(4,)``), else the closest spelling (``nmii``); empty where none is close."""
    lower = name.lower()
    per_k = metric_of_key(lower)
    if per_k is not None and per_k != lower:
        return f" (did you mean {per_k!r} with ks=({lower.rpartition('@')[2]},)?)"
    close = difflib.get_close_matches(lower, available_metrics(), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def metric_key(name: str, value: float) -> str:
    """The table key of a parameterised metric at ``value``: ``fnmr@fmr=0.001``."""
    return f"{name}={float(value)!r}"


def metric_of_key(key: str) -> str | None:
    """The registered metric whose score a table holds under ``key`` (``nmi`` -> ``nmi``,
    ``recall@4`` -> ``recall@k``); a parameterised metric's key is its own name, in its one
    spelling (``fnmr@fmr=0.001``); None for a key no registered metric writes (``knn@5``, a
    per-K name without its K, ``fnmr@fmr=1e-3``)."""
    if key in METRICS:
        return None if _per_k(key) or _parameterised(key) else key
    name, equals, value = key.partition("=")
    if equals and _parameterised(name):
        try:
            return key if key == metric_key(name, _checked_value(name, value)) else None
        except ValueError:
            return None
    prefix, at, k = key.rpartition("@")
    name = f"{prefix}@k"
    if at and k.isdigit() and int(k) >= 1 and name in METRICS and _per_k(name):
        return name
    return None


def label_of_key(key: str) -> str | None:
    """The label of the metric that writes ``key``, its K or value filled in; None for a key
    no registered metric writes."""
    metric = metric_of_key(key)
    if metric is None:
        return None
    name, _, value = metric.partition("=")
    if _parameterised(name):
        return METRICS.label(name).replace("{value}", f"{float(value):g}")
    return METRICS.label(metric).replace("{k}", key.rpartition("@")[2])


def lower_is_better(key: str) -> bool:
    """Whether the score under ``key`` is an error (FNMR): smaller is better."""
    metric = metric_of_key(key)
    name = None if metric is None else metric.partition("=")[0]
    return name is not None and METRICS.metadata(name).get("better") == "lower"


def table_keys() -> list[str]:
    """The keys a table can hold, in table order; a per-K metric's as ``PREFIX@K``
    (``recall@K``, ``precision@1``, ``map@r``, ...), a parameterised one's as ``NAME=EPS``."""
    return [
        name[:-1] + "K" if _per_k(name) else f"{name}=EPS" if _parameterised(name) else name
        for name in available_metrics()
    ]


def _table_group(name: str) -> int:
    """0 for a metric that reads the kNN search, 2 for one that reads the pairs, 1 otherwise."""
    needs = METRICS[name].needs
    return 0 if needs & {"neighbours", "neighbours_at_r"} else 2 if "pairs" in needs else 1


def available_metrics() -> list[str]:
    """Every name ``evaluate_embeddings(metrics=...)`` accepts, in table order: the neighbour
    metrics first, then the partition metrics, then the pair metrics, each in the order their
    modules register them."""
    return sorted(METRICS.names(), key=_table_group)


def select_metrics(metrics: Sequence[str] | None) -> list[str]:
    """The names to compute, in table order: the default set for None.

    Raises
    ------
    ValueError
        For an empty selection, a name nobody registered, or a parameterised metric's value
        outside [0, 1] (`parse_metric`).
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
    chosen = {parse_metric(name)[0] for name in names}
    return [name for name in available_metrics() if name in chosen]


def requested_values(metrics: Sequence[str] | None) -> dict[str, tuple[float, ...]]:
    """The values asked of each parameterised metric among ``metrics``, in increasing order
    (``{"fnmr@fmr": (0.0001, 0.001)}``); names checked as `select_metrics` does."""
    values: dict[str, set[float]] = {}
    for text in [metrics] if isinstance(metrics, str) else metrics or ():
        name, value = parse_metric(text)
        if value is not None:
            values.setdefault(name, set()).add(value)
    return {name: tuple(sorted(found)) for name, found in values.items()}


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
