"""The whole evaluation table from one kNN search and one partition, for any set of metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from clusterable.device import DeviceSpec, device_scope, search_device
from clusterable.evaluate._inputs import (
    Metric,
    as_clusters,
    as_embeddings,
    as_labels,
    as_points,
    check_ks,
    require_classes,
    to_numpy,
)
from clusterable.evaluate._pools import blas_on_one_thread
from clusterable.evaluate.neighbors import shard_rows
from clusterable.evaluate.partition_metrics import contingency_from_codes
from clusterable.evaluate.registry import METRICS, Artefacts, needs_of, select_metrics
from clusterable.evaluate.retrieval import query_gallery_per_query, retrieval_per_query
from clusterable.evaluate.sharded import combine_rows, gather_shards, group_shape
from clusterable.evaluate.silhouette import (
    check_sample_size,
    scores_every_item,
    silhouette_distances,
)

#: k-means settings of the evaluation, chosen by measurement (``benchmarks/README.md``): one
#: restart of at most 20 Lloyd iterations (the work pytorch-metric-learning's evaluation does),
#: stopped when no assignment changes, seeded on ``k`` distinct random points, where the
#: package's device rule says (the GPU when there is one).
EVALUATION_KMEANS = {"init": "random", "n_init": 1, "max_iter": 20, "device": "auto"}

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

#: Up to this many clusters the evaluation seeds k-means with greedy k-means++ instead: random
#: seeds often put two centroids in one of a few well-separated groups and none in another,
#: which Lloyd iterations cannot undo, while k-means++ seeding costs at most a few iterations'
#: work here. Above, random seeds gave as good a partition at every size of the sweep, while
#: k-means++ seeding takes ``k`` sequential steps (measured: see benchmarks/README.md).
KMEANS_PP_MAX_CLUSTERS = 64


def partition(
    x: np.ndarray,
    clustering: str,
    n_clusters: int | Literal["auto"] | None,
    seed: int,
    cluster_kwargs: Mapping[str, Any] | None = None,
    neighbours: np.ndarray | None = None,
    *,
    n_classes: int | None = None,
) -> np.ndarray:
    """Cluster ``x`` with the registered clusterer ``clustering`` (`clusterable.cluster`), its
    count decided by `clusterable.cluster.resolve_n_clusters`.

    ``n_clusters``: with ``n_classes`` given, the user's request (an int, ``"auto"`` or None:
    the class count); without it, the count to ask a method that takes one (the class count, as
    `evaluate_embeddings` passes it, or ``"auto"``), which a method that finds its own count
    (AAS, HDBSCAN) does not take. ``neighbours``: each point's nearest other points, from the
    table's kNN search, which k-means starts from (`clusterable.cluster.kmeans`).
    """
    # Imported here: clustering is optional for the retrieval metrics and pulls in faiss/sklearn.
    from clusterable.cluster import canonical_clustering, resolve_n_clusters, run_clustering

    name = canonical_clustering(clustering)
    if n_classes is None and isinstance(n_clusters, int):
        n_clusters, n_classes = None, n_clusters
    count = resolve_n_clusters(name, n_clusters, n_classes=n_classes)
    options = dict(cluster_kwargs or {})
    if name == "kmeans":
        few = not isinstance(count, int) or count <= KMEANS_PP_MAX_CLUSTERS  # "auto": <= 20
        options = {**EVALUATION_KMEANS, "init": "k-means++" if few else "random", **options}
        if neighbours is not None:
            options.setdefault("neighbours", neighbours)
    return run_clustering(x, name, count, seed=seed, **options)


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


def evaluate_embeddings(
    emb: Any,
    labels: Any,
    *,
    metrics: Sequence[str] | None = None,
    clustering: str | Any = "kmeans",
    n_clusters: int | None = None,
    ks: Sequence[int] = (1, 2, 4, 8),
    seed: int = 0,
    per_class: bool = False,
    metric: Metric = "euclidean",
    silhouette_sample: int | Literal["auto"] | None = "auto",
    cluster_kwargs: Mapping[str, Any] | None = None,
    process_group: Any = None,
    device: DeviceSpec = "auto",
    queries: Any = None,
) -> dict[str, Any]:
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
        ``silhouette``. None: all but ``v_measure``, which equals ``nmi``. The table lists them in
        that order whatever the order asked.
    clustering : str or array-like
        A registered clusterer (`clusterable.cluster.available_clusterings`: ``"kmeans"``,
        ``"spectral"``, ``"gmm"``, ``"affinity_propagation"`` (or ``"ap"``), ``"aas"``,
        ``"hdbscan"``, or one a user registered), or precomputed ``(n,)`` cluster ids. AAS and
        HDBSCAN choose their own number of clusters and mark noise -1; every noise item counts as
        its own singleton cluster in every partition metric (so noise never raises pairwise
        precision for free).
    n_clusters : int or "auto", optional
        Clusters to ask for; the number of classes in ``labels`` by default (the papers'
        protocol); ``"auto"`` for a method that can choose (`clusterable.cluster.
        resolve_n_clusters`, the one rule); refused for a method that finds its own.
    ks : sequence of int
        K values of Recall@K, each at most ``n - 1``; read only when Recall@K is among the
        ``metrics`` (so that they neither deepen the search nor add ``per_class`` columns).
    seed : int
        Seed of the clustering and of the silhouette sample.
    per_class : bool
        Also return per-class results under the key ``"per_class"``.
    metric : {"euclidean", "cosine"}
        Distance of the kNN search and silhouette. With ``"cosine"`` the partition is computed on
        l2-normalised embeddings.
    silhouette_sample : int, "auto" or None
        Items whose silhouette is averaged (see `clusterable.evaluate.silhouette`); ``"auto"`` is
        exact up to 2,236 items and samples a budget of distances above; ``None`` for all items.
    process_group : torch.distributed.ProcessGroup or True, optional
        Evaluate the set whose shards the ranks of this group hold (``True``: the default
        group): ``emb`` and ``labels`` are this rank's shard, the set is the shards in rank order,
        and every rank returns the table of the whole set, exactly the single-process one. The
        kNN search is split between the ranks (see `clusterable.evaluate.sharded`).
    cluster_kwargs : mapping, optional
        Extra keyword arguments for the clustering function; for k-means they update
        `EVALUATION_KMEANS` (e.g. ``{"init": "k-means++", "n_init": 10}``).
    device : str or torch.device
        Where the kNN search and k-means run (:func:`clusterable.device.search_device`): a CUDA
        device, or the CPU (faiss); ``"auto"`` follows the package's device rule.
    queries : array-like of bool, optional
        ``(n,)`` True for query items, False for gallery items: the retrieval metrics then rank
        the gallery for each query instead of all other items (In-Shop's protocol; see
        `clusterable.evaluate.retrieval.query_gallery_per_query`), each K at most the gallery's
        size, and are averaged over the queries; the partition metrics and the silhouette still
        cover every item. None: leave-one-out over every item. With ``process_group``, the
        flags of the whole set (the shards in rank order), whose search every rank then runs.

    Returns
    -------
    dict
        The selected metrics; by default ``recall@K`` for each K, ``precision@1``, ``map@r``,
        ``r_precision``, ``nmi``, ``precision``, ``recall``, ``f1``, ``accuracy``, ``ari``,
        ``silhouette``: floats, in [0, 1] except ``ari`` (can dip below 0) and ``silhouette`` (in
        [-1, 1]; NaN with a warning when the partition has one cluster or only singletons).
        Retrieval means skip queries whose class has no other item. With ``per_class``,
        ``"per_class"`` maps ``class``, ``count``, each retrieval score computed and, when a
        partition was, ``accuracy`` (share of the class in its Hungarian-matched cluster) to
        ``(C,)`` arrays.

    Raises
    ------
    ValueError
        For input an evaluation cannot score (with what to do), and for a metric name nobody
        registered (with the names that exist).

    References
    ----------
    Musgrave, Belongie and Lim, "A Metric Learning Reality Check", ECCV 2020 (MAP@R, R-precision).
    Roth et al., "Revisiting Training Strategies and Generalization Performance in Deep Metric
    Learning", ICML 2020 (computing each shared artefact once).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0], [9.0, 0.0], [9.1, 0.0]])
    >>> table = evaluate_embeddings(x, [0, 0, 1, 1, 2, 2], clustering=[0, 0, 1, 1, 2, 2], ks=(1,))
    >>> table["recall@1"], table["nmi"], table["f1"]
    (1.0, 1.0, 1.0)
    """
    shard = (0, 1)
    if process_group is not None:
        shard = group_shape(process_group)
        emb, labels = gather_shards(emb, labels, process_group)
    x = as_embeddings(emb)
    n = x.shape[0]
    codes, classes = as_labels(labels, n)
    require_classes(codes, 2, "evaluate_embeddings")
    selected = select_metrics(metrics)
    needs = needs_of(selected)
    searched = bool(needs & {"neighbours", "neighbours_at_r"})
    is_query = None if queries is None else _query_flags(queries, n)
    candidates = n - 1 if is_query is None else int((~is_query).sum())
    given_clusters = None
    if not isinstance(clustering, str):
        given_clusters = as_clusters(to_numpy(clustering, "clustering"), n, "clustering")
    a = Artefacts(
        points=as_points(x, metric),
        codes=codes,
        ks=check_ks(ks, candidates)
        if any(METRICS.metadata(m).get("per_k") for m in selected)
        else (),
        metric=metric,
        seed=seed,
        silhouette_sample=check_sample_size(silhouette_sample),
    )
    # numpy's BLAS on one thread for small products (see ONE_THREAD_PRODUCT).
    one_thread = n * classes.size * x.shape[1] < ONE_THREAD_PRODUCT
    blocks = None
    if (
        searched
        and is_query is None
        and "silhouette" in selected
        and shard[1] == 1
        and a.points.dtype == np.float32
        and n * n <= SHARED_DISTANCES_MAX
        and scores_every_item(n, a.silhouette_sample)
    ):
        # The silhouette reads every distance: computed once, first, for the search to read too.
        with blas_on_one_thread(one_thread):
            a.silhouette_distances = silhouette_distances(
                a.points, metric, a.silhouette_sample, seed
            )
        if not a.silhouette_distances.centred:
            blocks = a.silhouette_distances.blocks
    neighbours = None
    if (
        searched
        and is_query is None
        and shard[1] == 1
        and "partition" in needs
        and given_clusters is None
    ):
        neighbours = np.empty((n, min(NEIGHBOURS_KEPT, n - 1)), dtype=np.int32)
    with device_scope(search_device(device)):
        if searched and is_query is not None:
            a.per_query = query_gallery_per_query(
                a.points, codes, is_query, a.ks, at_r="neighbours_at_r" in needs, metric=metric
            )
        elif searched:
            at_r = "neighbours_at_r" in needs
            a.per_query = retrieval_per_query(
                a.points,
                codes,
                a.ks,
                at_r=at_r,
                metric=metric,
                shard=shard,
                neighbours=neighbours,
                blocks=blocks,
            )
            if process_group is not None:
                combine_rows(a.per_query, shard_rows(n, n, shard), process_group)
        with blas_on_one_thread(one_thread):
            if "partition" in needs:
                a.clusters = given_clusters
                if a.clusters is None:
                    found = partition(
                        a.points,
                        clustering,
                        n_clusters,
                        seed,
                        cluster_kwargs,
                        neighbours,
                        n_classes=classes.size,
                    )
                    a.clusters = as_clusters(found, n, "clustering")
                a.table = contingency_from_codes(codes, a.clusters)
    out: dict[str, Any] = {}
    with blas_on_one_thread(one_thread):
        for name in selected:
            score = METRICS[name].score(a)
            out.update(score if isinstance(score, dict) else {name: float(score)})
    if per_class:
        out["per_class"] = _per_class(codes, classes, a)
    return out
