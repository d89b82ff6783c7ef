"""The whole evaluation table from one kNN search and one partition, for any set of metrics.

`evaluate_embeddings` validates its inputs once (`_Plan`), computes what the selected metrics read
(the silhouette's distances where the search can share them, `_share_distances`; the kNN search,
`_search`; the partition, `_partition`), each once, then scores every metric from those
artefacts (`_score`). It returns an `Evaluation`: the scores, and the partition they were
computed on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from clusterable._ranges import check_seed
from clusterable.device import DeviceSpec
from clusterable.evaluate._inputs import Metric as Distance
from clusterable.evaluate._inputs import (
    as_clusters,
    as_embeddings,
    as_labels,
    as_points,
    check_ks,
    require_classes,
    to_numpy,
)
from clusterable.evaluate._keywords import refuse_metric_meaning_metrics, refuse_renamed
from clusterable.evaluate._pools import blas_on_one_thread
from clusterable.evaluate.clustering import (
    KMEANS_PP_MAX_CLUSTERS,
    PartitionRequest,
    ScoredPartition,
    kmeans_rule,
    partition,
    partition_request,
)
from clusterable.evaluate.neighbors import shard_rows
from clusterable.evaluate.pair_metrics import pair_artefact
from clusterable.evaluate.partition_metrics import contingency_from_codes
from clusterable.evaluate.registry import (
    METRICS,
    Artefacts,
    needs_of,
    requested_values,
    select_metrics,
)
from clusterable.evaluate.retrieval import query_gallery_per_query, retrieval_per_query
from clusterable.evaluate.sharded import combine_rows, gather_shards, group_shape
from clusterable.evaluate.silhouette import (
    check_sample_size,
    scores_every_item,
    silhouette_distances,
)

__all__ = [
    "KMEANS_PP_MAX_CLUSTERS",
    "Evaluation",
    "EvaluationOptions",
    "evaluate_embeddings",
    "kmeans_rule",
    "partition",
]

#: Neighbours of each item kept from the table's kNN search for k-means to start from: its
#: first assignment reads each item's nearest seed off this list (a list of 32 holds one of
#: 11,316 seeds among 60,502 items for all but 0.1 % of them), ``n * 32`` int32 in memory.
NEIGHBOURS_KEPT = 32

#: Largest ``n * n`` (32 MB of float32) for which a silhouette that scores every item (up to
#: 2,236 items under ``silhouette_sample="auto"``) computes its distance matrix before the kNN
#: search, which reads it instead of computing its own products: 2,000 x 64, 126 candidates
#: per row, took 16 ms this way against 21 ms for ``faiss.knn`` (29 against 41 ms on one
#: thread), and the silhouette then computes no products (benchmarks/README.md, "Evaluation").
SHARED_DISTANCES_MAX = 1 << 23

#: Below this many multiply-adds in k-means' product of the points with its centroids
#: (``n x classes x d``), numpy's BLAS computes the evaluation's products (k-means, silhouette)
#: on one thread: a second gains little on such products, and its worker then spins for 0.1 s
#: after each, beside the next faiss search (a training run's next step, or the next
#: evaluation) on a 2-core machine. Whole table after a warm-up evaluation, median of 4 pairs:
#: 4,000 x 128, 100 classes (51 M): 125 ms against 184 ms with two threads; 2,000 x 64, 20
#: classes: 68 against 83 ms; 5,924 x 512, 100 classes (303 M): 528 against 496 ms, so two
#: (benchmarks/README.md, "Evaluation").
ONE_THREAD_PRODUCT = 1 << 27


@dataclass(frozen=True)
class EvaluationOptions:
    """The settings of `evaluate_embeddings` that few calls change.

    Attributes
    ----------
    silhouette_sample : int, "auto" or None
        Items whose silhouette is averaged (see `clusterable.evaluate.silhouette`); ``"auto"`` is
        exact up to 2,236 items and samples a budget of distances above; ``None`` for all items.
    cluster_kwargs : mapping, optional
        Extra keyword arguments for the clusterer; for k-means they update its rule
        (`clusterable.evaluate.clustering.kmeans_rule`, e.g. ``{"n_init": 20}``).
    """

    silhouette_sample: int | Literal["auto"] | None = "auto"
    cluster_kwargs: Mapping[str, Any] | None = None


class Evaluation(dict[str, Any]):
    """The scores of one evaluation, a dict as before (``table["nmi"]``, iteration, ``dict(table)``
    for JSON, equality with a dict), and the partition they were computed on.

    Attributes
    ----------
    partition : ScoredPartition or None
        The partition of the evaluated items that the partition metrics scored: the fitted
        clusterer (``partition.estimator``), ``partition.labels_``, ``partition.n_clusters``
        (the count ``"auto"`` chose included) and ``partition.rule`` (k-means' seeding and
        restarts, for a heading); ``method="given"`` for cluster ids passed in; None when no
        partition metric was asked for.
    """

    def __init__(
        self, scores: Mapping[str, Any] | None = None, partition: ScoredPartition | None = None
    ) -> None:
        super().__init__(scores or {})
        self.partition = partition

    def __repr__(self) -> str:
        found = None if self.partition is None else self.partition.n_clusters
        return f"Evaluation({dict.__repr__(self)}, clusters found: {found})"


@dataclass
class _Plan:
    """What one evaluation computes, decided once from its validated inputs."""

    selected: list[str]
    needs: frozenset[str]
    shard: tuple[int, int]  # (rank, world)
    is_query: np.ndarray | None
    given_clusters: np.ndarray | None  # (n,) codes of the cluster ids given, noise as singletons
    given_ids: np.ndarray | None  # (n,) those ids as given
    one_thread: bool  # numpy's BLAS on one thread (see ONE_THREAD_PRODUCT)

    @property
    def searched(self) -> bool:
        return bool(self.needs & {"neighbours", "neighbours_at_r"})

    @property
    def clusters(self) -> bool:
        """Whether a clusterer runs: a partition metric and no cluster ids given."""
        return "partition" in self.needs and self.given_clusters is None

    @property
    def leave_one_out(self) -> bool:
        """A search of every item against the others, in one process."""
        return self.searched and self.is_query is None and self.shard[1] == 1


@refuse_metric_meaning_metrics(Distance)
@refuse_renamed(
    metric="distance",
    silhouette_sample="options=EvaluationOptions(silhouette_sample={value})",
    cluster_kwargs="options=EvaluationOptions(cluster_kwargs={value})",
)
def evaluate_embeddings(
    emb: Any,
    labels: Any,
    *,
    metrics: Sequence[str] | None = None,
    clustering: str | Any = "kmeans",
    n_clusters: int | Literal["auto"] | None = None,
    ks: Sequence[int] = (1, 2, 4, 8),
    seed: int = 0,
    per_class: bool = False,
    distance: Distance = "euclidean",
    queries: Any = None,
    device: DeviceSpec = "auto",
    process_group: Any = None,
    options: EvaluationOptions | None = None,
) -> Evaluation:
    """The retrieval and clustering metrics of an embedding, each expensive step done once.

    The inputs are validated once, here. One leave-one-out kNN search at ``max(max(ks), R_max)``
    neighbours (``R_max`` = largest class size - 1, for MAP@R; ``ks`` only when Recall@K is among
    the ``metrics``) serves Recall@K, precision@1, MAP@R and R-precision (with large classes, at
    ``R_max`` and a second search for the queries Recall@K must look deeper for; see
    `retrieval_per_query`); it is consumed chunk by chunk, so memory stays ``O(n (len(ks) + 4) +
    chunk * k)``. One partition and one sparse contingency table serve NMI,
    pairwise precision/recall/F1, Hungarian accuracy, ARI and V-measure. Silhouette averages a
    seeded sample of items, each scored against the whole set. Only what the selected ``metrics``
    read is computed: without a partition metric nothing is clustered, without a neighbour metric
    nothing is searched.

    Parameters
    ----------
    emb : array-like
        ``(n, d)`` embeddings, numpy or torch.
    labels : array-like
        ``(n,)`` class labels; at least two classes.
    metrics : sequence of str, optional
        Names of the metrics to compute (`clusterable.evaluate.available_metrics`): ``recall@k``
        (one key per K of ``ks``), ``precision@1``, ``map@r``, ``r_precision``, ``nmi``,
        ``precision``, ``recall``, ``f1`` (pairwise), ``accuracy``, ``ari``, ``v_measure``,
        ``silhouette``, ``roc_auc`` and ``fnmr@fmr=EPS`` (over every pair, or every query x
        gallery pair: `clusterable.evaluate.pair_metrics`; ``fnmr@fmr`` alone is EPS = 0.001;
        the key is spelled ``fnmr@fmr=0.001``). None: all but ``v_measure``, which equals
        ``nmi``, and the pair metrics, which cost two passes over every pair. The table lists
        them in that order whatever the order asked.
    clustering : str or array-like
        A registered clusterer (`clusterable.cluster.available_clusterings`: ``"kmeans"``,
        ``"spectral"``, ``"gmm"``, ``"affinity_propagation"`` (or ``"ap"``), ``"aas"``,
        ``"hdbscan"``, or one a user registered), or precomputed ``(n,)`` cluster ids. AAS and
        HDBSCAN choose their own number of clusters and mark noise -1; every noise item counts as
        its own singleton cluster in every partition metric (so noise never raises pairwise
        precision for free). k-means runs by the rule the command line's ``cluster`` uses
        (`clusterable.evaluate.clustering.kmeans_rule`: k-means++ seeding, the best inertia of
        ``min(10, 100 // k)`` restarts of at most 20 iterations).
    n_clusters : int or "auto", optional
        Clusters to ask for; the number of classes in ``labels`` by default (the papers'
        protocol); ``"auto"`` for a method that can choose (`clusterable.cluster.
        resolve_n_clusters`, the one rule); refused for a method that finds its own.
    ks : sequence of int
        K values of Recall@K, each at most ``n - 1``; read only when Recall@K is among the
        ``metrics`` (so that they neither deepen the search nor add ``per_class`` columns).
    seed : int
        Seed of the clustering and of the silhouette sample, in ``[0, 2**32 - 1]``.
    per_class : bool
        Also return per-class results under the key ``"per_class"``.
    distance : {"euclidean", "cosine"}
        Distance of the kNN search and silhouette. With ``"cosine"`` the partition is computed on
        l2-normalised embeddings. (Formerly ``metric``, a name now refused: ``metrics`` selects
        the scores.)
    queries : array-like of bool, optional
        ``(n,)`` True for query items, False for gallery items: the retrieval metrics then rank
        the gallery for each query instead of all other items (In-Shop's protocol; see
        `clusterable.evaluate.retrieval.query_gallery_per_query`), each K at most the gallery's
        size, and are averaged over the queries; the partition metrics and the silhouette still
        cover every item. None: leave-one-out over every item. With ``process_group``, the
        flags of the whole set (the shards in rank order), whose search every rank then runs.
    device : str or torch.device
        Where the kNN search and k-means run: a CUDA device, or the CPU (faiss); ``"auto"``: a
        GPU when torch sees one (`clusterable.device.search_device`; no device chosen
        elsewhere is read).
    process_group : torch.distributed.ProcessGroup or True, optional
        Evaluate the set whose shards the ranks of this group hold (``True``: the default
        group): ``emb`` and ``labels`` are this rank's shard, the set is the shards in rank order,
        and every rank returns the table of the whole set, exactly the single-process one. The
        kNN search is split between the ranks (see `clusterable.evaluate.sharded`).
    options : EvaluationOptions, optional
        The silhouette's sample and the clusterer's extra keywords.

    Returns
    -------
    Evaluation
        A dict of the selected metrics; by default ``recall@K`` for each K, ``precision@1``,
        ``map@r``, ``r_precision``, ``nmi``, ``precision``, ``recall``, ``f1``, ``accuracy``,
        ``ari``, ``silhouette``: floats, in [0, 1] except ``ari`` (can dip below 0) and
        ``silhouette`` (in [-1, 1]; NaN with a warning when the partition has one cluster or
        only singletons). Retrieval means skip queries whose class has no other item. With
        ``per_class``, ``"per_class"`` maps ``class``, ``count``, each retrieval score computed
        and, when a partition was, ``accuracy`` (share of the class in its Hungarian-matched
        cluster) to ``(C,)`` arrays. Its ``partition`` is the partition the scores were computed
        on (a `ScoredPartition`; None without a partition metric).

    Raises
    ------
    ValueError
        For input an evaluation cannot score (with what to do), for a metric name nobody
        registered (with the names that exist), and for a clustering, count, seed or clusterer
        option the clustering would refuse, before the kNN search starts.
    TypeError
        For the keywords renamed (``metric``: ``distance``) or moved into ``options``
        (``silhouette_sample``, ``cluster_kwargs``), naming the new one; for ``metric=`` of
        something other than a distance's name, naming ``metrics``.

    References
    ----------
    Musgrave, Belongie and Lim, "A Metric Learning Reality Check", ECCV 2020 (MAP@R, R-precision).
    Roth et al., "Revisiting Training Strategies and Generalization Performance in Deep Metric
    Learning", ICML 2020 (computing each shared artefact once).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0], [9.0, 0.0], [9.1, 0.0]])
    >>> table = evaluate_embeddings(x, [0, 0, 1, 1, 2, 2], ks=(1,))
    >>> table["recall@1"], table["nmi"], table["f1"]
    (1.0, 1.0, 1.0)
    >>> table.partition.n_clusters, bool(table.partition.labels_[0] == table.partition.labels_[1])
    (3, True)
    """
    options = options or EvaluationOptions()
    check_seed(seed, "evaluate_embeddings")
    shard = (0, 1)
    if process_group is not None:
        shard = group_shape(process_group)
        emb, labels = gather_shards(emb, labels, process_group)
    x = as_embeddings(emb)
    codes, classes = as_labels(labels, x.shape[0])
    require_classes(codes, 2, "evaluate_embeddings")
    plan = _plan(x, codes, classes.size, metrics, clustering, queries, shard)
    a = Artefacts(
        points=as_points(x, distance),
        codes=codes,
        ks=_checked_ks(ks, plan, x.shape[0]),
        distance=distance,
        seed=seed,
        silhouette_sample=check_sample_size(options.silhouette_sample),
        values=requested_values(metrics),
    )
    request = None
    if plan.clusters:  # the clustering asked for is checked before the search
        request = partition_request(
            a.points,
            clustering,
            n_clusters,
            seed,
            options.cluster_kwargs,
            n_classes=classes.size,
            device=device,
        )
    blocks = _share_distances(a, plan)
    neighbours = None
    if plan.leave_one_out and plan.clusters:
        neighbours = np.empty((x.shape[0], min(NEIGHBOURS_KEPT, x.shape[0] - 1)), np.int32)
    _search(a, plan, device, neighbours, blocks, process_group)
    if "pairs" in plan.needs:
        a.pairs = pair_artefact(a, plan.is_query, plan.selected, device)
    found = None
    if "partition" in plan.needs:
        found = _partition(a, plan, request, neighbours, device)
    out = Evaluation(_score(a, plan), found)
    if per_class:
        out["per_class"] = _per_class(codes, classes, a)
    return out


def _plan(
    x: np.ndarray,
    codes: np.ndarray,
    n_classes: int,
    metrics: Sequence[str] | None,
    clustering: Any,
    queries: Any,
    shard: tuple[int, int],
) -> _Plan:
    """The metrics selected, what they read, and the inputs they read it from, checked."""
    n = x.shape[0]
    selected = select_metrics(metrics)
    ids = given = None
    if not isinstance(clustering, str):
        ids = to_numpy(clustering, "clustering")
        given = as_clusters(ids, n, "clustering")
    return _Plan(
        selected=selected,
        needs=needs_of(selected),
        shard=shard,
        is_query=None if queries is None else _query_flags(queries, n),
        given_clusters=given,
        given_ids=None if ids is None else ids.reshape(-1).astype(np.int64),
        one_thread=n * n_classes * x.shape[1] < ONE_THREAD_PRODUCT,
    )


def _checked_ks(ks: Sequence[int], plan: _Plan, n: int) -> tuple[int, ...]:
    """``ks`` checked against the candidates of a query where Recall@K is selected; else ()."""
    if not any(METRICS.metadata(m).get("per_k") for m in plan.selected):
        return ()
    candidates = n - 1 if plan.is_query is None else int((~plan.is_query).sum())
    return check_ks(ks, candidates)


def _share_distances(a: Artefacts, plan: _Plan) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Where a silhouette of every item reads the whole distance matrix anyway, compute it first
    (`SHARED_DISTANCES_MAX`), keep it in ``a``, and return its blocks for the search to read
    (None where the search cannot: centred points, or no such silhouette)."""
    n = a.points.shape[0]
    if not (
        plan.leave_one_out
        and "silhouette" in plan.selected
        and a.points.dtype == np.float32
        and n * n <= SHARED_DISTANCES_MAX
        and scores_every_item(n, a.silhouette_sample)
    ):
        return None
    with blas_on_one_thread(plan.one_thread):
        a.silhouette_distances = silhouette_distances(
            a.points, a.distance, a.silhouette_sample, a.seed
        )
    return None if a.silhouette_distances.centred else a.silhouette_distances.blocks


def _search(
    a: Artefacts,
    plan: _Plan,
    device: DeviceSpec,
    neighbours: np.ndarray | None,
    blocks: list[tuple[np.ndarray, np.ndarray]] | None,
    process_group: Any,
) -> None:
    """The one kNN search, its per-query scores kept in ``a`` (and the first ``neighbours`` of
    each item filled, for k-means to start from); the ranks of ``process_group`` share it."""
    if not plan.searched:
        return
    at_r = "neighbours_at_r" in plan.needs
    if plan.is_query is not None:
        a.per_query = query_gallery_per_query(
            a.points, a.codes, plan.is_query, a.ks, at_r=at_r, distance=a.distance, device=device
        )
        return
    a.per_query = retrieval_per_query(
        a.points,
        a.codes,
        a.ks,
        at_r=at_r,
        distance=a.distance,
        device=device,
        shard=plan.shard,
        neighbours=neighbours,
        blocks=blocks,
    )
    if process_group is not None:
        n = a.points.shape[0]
        combine_rows(a.per_query, shard_rows(n, n, plan.shard, device=device), process_group)


def _partition(
    a: Artefacts,
    plan: _Plan,
    request: PartitionRequest | None,
    neighbours: np.ndarray | None,
    device: DeviceSpec,
) -> ScoredPartition:
    """The partition the metrics score, its clusters and contingency table kept in ``a``:
    the given ids, or the clusterer's (``request``, checked before the search)."""
    if plan.given_clusters is not None and plan.given_ids is not None:  # given together
        a.clusters = plan.given_clusters
        found = ScoredPartition("given", plan.given_ids)
    else:
        assert request is not None  # made whenever a clusterer runs
        with blas_on_one_thread(plan.one_thread):
            found = partition(a.points, request, a.seed, neighbours, device=device)
        a.clusters = as_clusters(found.labels_, a.points.shape[0], "clustering")
    with blas_on_one_thread(plan.one_thread):
        a.table = contingency_from_codes(a.codes, a.clusters)
    return found


def _score(a: Artefacts, plan: _Plan) -> dict[str, Any]:
    """Every selected metric from the artefacts, in table order."""
    out: dict[str, Any] = {}
    with blas_on_one_thread(plan.one_thread):
        for name in plan.selected:
            score = METRICS[name].score(a)
            out.update(score if isinstance(score, dict) else {name: float(score)})
    return out


def _query_flags(queries: Any, n: int) -> np.ndarray:
    """``(n,)`` bool query flags of `evaluate_embeddings`' ``queries``, checked."""
    flags = to_numpy(queries, "queries")
    if flags.dtype != bool or flags.shape != (n,):
        raise ValueError(
            f"queries must be ({n},) booleans, one per item (True: query, False: gallery); "
            f"got {flags.dtype} of shape {flags.shape}"
        )
    if flags.all() or not flags.any():
        raise ValueError(
            f"a query/gallery evaluation needs both: {int(flags.sum())} queries and "
            f"{int((~flags).sum())} gallery items were flagged; flag some items as queries and "
            "the rest as the gallery"
        )
    return flags


def _per_class(codes: np.ndarray, classes: np.ndarray, a: Artefacts) -> dict[str, np.ndarray]:
    sizes = np.bincount(codes)
    out: dict[str, np.ndarray] = {"class": classes, "count": sizes}
    for name, values in (a.per_query or {}).items():
        # Mean over the class's scored queries: NaN marks lone queries and gallery items.
        scored = ~np.isnan(values)
        total = np.bincount(codes, weights=np.where(scored, values, 0.0), minlength=sizes.size)
        count = np.bincount(codes[scored], minlength=sizes.size)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[name] = np.where(count > 0, total / count, np.nan)
    if a.table is not None:
        matched_classes, _, shared = a.table.matching
        accuracy = np.zeros(sizes.size)
        accuracy[matched_classes] = shared / sizes[matched_classes]
        out["accuracy"] = accuracy
    return out
