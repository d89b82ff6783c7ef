"""The partition an evaluation scores, and the one k-means rule of ``evaluate`` and ``cluster``.

`partition_request` checks the clustering asked for, before any work, and `partition` clusters the
evaluated points with that registered clusterer (`clusterable.cluster`), its count decided by
`clusterable.cluster.resolve_n_clusters`, and returns a `ScoredPartition`:
the fitted clusterer, its labels and the count it found (the one ``"auto"`` chose included), so
that whoever shows the scores shows the partition they were computed on, without clustering
again.

k-means runs by `kmeans_rule`, which the command line's ``cluster`` uses too: k-means++ seeding
(random seeds above `KMEANS_PP_MAX_CLUSTERS` clusters), the lowest-inertia of several restarts,
each of at most `KMEANS_MAX_ITER` Lloyd iterations. One restart's local optimum that merges two
classes and splits another moves about ``1/k`` of the items, so a few clusters need restarts to
give the same scores whatever the seed, and many clusters average such moves out: the restarts
fall with the count, ``min(10, 100 // k)`` (10 up to 10 clusters, one from 51), which keeps the
k-means work of every count at most that of one restart at 100 clusters. Measured on Fashion-MNIST
embeddings (benchmarks/README.md, "k-means rule"): one restart moved Hungarian accuracy by up to
9 points with the seed, this rule by less than 0.1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from clusterable.device import DeviceSpec

if TYPE_CHECKING:
    from clusterable.cluster import Clusterer

#: Restarts of the k-means rule at most (at up to 10 clusters), and the restarts x clusters the
#: rule spends at most: one restart from 51 clusters, the evaluation's speed at retrieval test
#: sets (100 classes and more) unchanged (see the module docstring).
KMEANS_MAX_RESTARTS = 10
KMEANS_RESTART_BUDGET = 100

#: Lloyd iterations per restart at most (pytorch-metric-learning's evaluation runs one faiss
#: k-means of 20); a restart stops earlier when no assignment changes.
KMEANS_MAX_ITER = 20

#: Up to this many clusters k-means is seeded with greedy k-means++: random seeds often put two
#: centroids in one of a few well-separated groups and none in another, which Lloyd iterations
#: cannot undo, while k-means++ seeding costs at most a few iterations' work here. Above, random
#: seeds gave as good a partition at every size of the sweep, while k-means++ seeding takes ``k``
#: sequential steps (measured: see benchmarks/README.md).
KMEANS_PP_MAX_CLUSTERS = 64


def kmeans_rule(n_clusters: int | Literal["auto"]) -> dict[str, Any]:
    """The k-means settings of ``evaluate`` and ``cluster`` for ``n_clusters`` clusters:
    ``{"init", "n_init", "max_iter"}`` (see the module docstring).

    Examples
    --------
    >>> kmeans_rule(10)
    {'init': 'k-means++', 'n_init': 10, 'max_iter': 20}
    >>> kmeans_rule(100)
    {'init': 'random', 'n_init': 1, 'max_iter': 20}
    """
    if n_clusters == "auto":
        from clusterable.cluster.auto import AUTO_MAX_CLUSTERS

        count = AUTO_MAX_CLUSTERS  # planned for the largest count k-means then tries
    else:
        count = max(1, int(n_clusters))
    restarts = max(1, min(KMEANS_MAX_RESTARTS, KMEANS_RESTART_BUDGET // count))
    init = "k-means++" if count <= KMEANS_PP_MAX_CLUSTERS else "random"
    return {"init": init, "n_init": restarts, "max_iter": KMEANS_MAX_ITER}


def describe_kmeans(options: Mapping[str, Any]) -> str:
    """How k-means ran, for a table's heading: ``"k-means++ seeding, 10 restarts of at most 20
    iterations, best inertia"``; the library's defaults (`clusterable.cluster.kmeans`) for a
    setting ``options`` leaves out."""
    from clusterable.cluster.kmeans import MAX_ITER, N_INIT

    restarts = int(options.get("n_init", N_INIT))
    iterations = int(options.get("max_iter", MAX_ITER))
    runs = f"{restarts} restarts" if restarts > 1 else "1 restart"
    best = ", best inertia" if restarts > 1 else ""
    seeding = options.get("init", "k-means++")
    return f"{seeding} seeding, {runs} of at most {iterations} iterations{best}"


def describe_clustering(method: str, options: Mapping[str, Any]) -> str:
    """How clusterer ``method`` ran with ``options``, for a heading: `describe_kmeans` of
    k-means; the options given to any other (``"eps 0.3, k_graph 20"``, the device and kNN
    lists left out), and for DSCL spectral clustering how its k-means step ran; ``""`` for a
    method run with its defaults."""
    if method == "kmeans":
        return describe_kmeans(options)
    given = [f"{key} {value}" for key, value in options.items() if key not in NOT_SETTINGS]
    if method == "spectral":
        from clusterable.cluster.spectral import KMEANS_STEP

        given.append(f"k-means of the spectral rows: {describe_kmeans(KMEANS_STEP)}")
    return ", ".join(given)


#: Options of a clusterer that say where it ran or what it started from, not how it clustered.
NOT_SETTINGS = ("device", "neighbours")


@dataclass(frozen=True)
class ScoredPartition:
    """The partition an evaluation's partition metrics were computed on.

    Attributes
    ----------
    method : str
        The registered clusterer (`clusterable.cluster.available_clusterings`), or ``"given"``
        for cluster ids passed in.
    labels_ : numpy.ndarray
        ``(n,)`` int64 cluster ids of the evaluated items, in their order (-1: noise, for AAS
        and HDBSCAN).
    asked : int, "auto" or None
        The count the clusterer was asked for (`clusterable.cluster.resolve_n_clusters`: the
        class count by default, None for a method that finds its own).
    options : dict
        The clusterer's settings (for k-means the rule's ``init``, ``n_init``, ``max_iter``);
        the device and the kNN lists it started from are left out.
    estimator : clusterable.cluster.Clusterer, optional
        The fitted clusterer (after ``"auto"``: ``chosen_n_clusters_``, and in ``selection_``
        what the criterion measured); None for given ids.
    """

    method: str
    labels_: np.ndarray
    asked: int | Literal["auto"] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    estimator: Clusterer | None = None

    @property
    def n_clusters(self) -> int:
        """Clusters found, noise not counted: for ``"auto"``, the count chosen."""
        return int(np.unique(self.labels_[self.labels_ >= 0]).size)

    @property
    def noise(self) -> int:
        """Items marked as noise (-1)."""
        return int((self.labels_ < 0).sum())

    @property
    def rule(self) -> str:
        """How the clusterer ran, for a heading (`describe_clustering`); ``""`` for given ids
        and for a method run with its defaults."""
        return "" if self.method == "given" else describe_clustering(self.method, self.options)


@dataclass(frozen=True)
class PartitionRequest:
    """The clustering an evaluation asks for, checked by `partition_request` before any work.

    Attributes
    ----------
    method : str
        The registered clusterer's name.
    asked : int, "auto" or None
        The count to ask it for (`clusterable.cluster.resolve_n_clusters`).
    options : dict
        Its settings (for k-means the rule's, `kmeans_rule`, updated by the caller's).
    """

    method: str
    asked: int | Literal["auto"] | None
    options: dict[str, Any]


def partition_request(
    x: np.ndarray,
    clustering: str,
    n_clusters: int | Literal["auto"] | None,
    seed: int,
    cluster_kwargs: Mapping[str, Any] | None = None,
    *,
    n_classes: int | None = None,
    device: DeviceSpec = "auto",
) -> PartitionRequest:
    """The clusterer ``clustering`` for the points ``x``, its count decided by
    `clusterable.cluster.resolve_n_clusters`, and its settings (k-means by `kmeans_rule`), with
    every check the clustering makes (the name, the count against the points, the seed, the
    clusterer's keywords) done now, so that a mistake is refused before the evaluation's search.

    ``n_clusters``: with ``n_classes`` given, the user's request (an int, ``"auto"`` or None:
    the class count); without it, the count to ask a method that takes one (the class count, as
    `evaluate_embeddings` passes it, or ``"auto"``), which a method that finds its own (AAS,
    HDBSCAN) does not take. ``cluster_kwargs``: the clusterer's own options (for k-means they
    update the rule). ``device``: where a clusterer that can use a GPU runs.
    """
    # Imported here: clustering is optional for the retrieval metrics and pulls in faiss/sklearn.
    from clusterable.cluster import canonical_clustering, resolve_n_clusters
    from clusterable.cluster.registry import _prepare

    name = canonical_clustering(clustering)
    if n_classes is None and isinstance(n_clusters, int):
        n_clusters, n_classes = None, n_clusters
    count = resolve_n_clusters(name, n_clusters, n_classes=n_classes)
    options = dict(cluster_kwargs or {})
    if name == "kmeans":
        options = {**kmeans_rule(count), **options}  # type: ignore[arg-type]
    _prepare(x, name, count, seed, device, options)  # the clusterer's own checks, nothing run
    return PartitionRequest(name, count, options)


def partition(
    x: np.ndarray,
    request: PartitionRequest,
    seed: int,
    neighbours: np.ndarray | None = None,
    *,
    device: DeviceSpec = "auto",
) -> ScoredPartition:
    """Cluster ``x`` as ``request`` (from `partition_request`) says, with the registered
    clusterer (`clusterable.cluster`). ``neighbours``: each point's nearest other points, from
    the table's kNN search, which k-means starts from (`clusterable.cluster.kmeans`).
    ``device``: where a clusterer that can use a GPU runs (``"auto"``: the detection).
    """
    from clusterable.cluster.registry import _prepare

    options = dict(request.options)
    if request.method == "kmeans" and neighbours is not None:
        options.setdefault("neighbours", neighbours)
    _, estimator, points, _ = _prepare(x, request.method, request.asked, seed, device, options)
    labels = np.asarray(estimator.cluster(points), dtype=np.int64)
    # What the partition reports: the settings, without the device or the kNN lists.
    return ScoredPartition(request.method, labels, request.asked, dict(request.options), estimator)
