"""Retrieval metrics from one k-nearest-neighbour search: Recall@K, precision@1, MAP@R and
R-precision (k-NN classification accuracy: `clusterable.evaluate.knn_classification`).

Conventions
-----------
- Leave-one-out: every item is a query against all the others; the query is removed from its own
  neighbours by index (see `clusterable.evaluate.neighbors`).
- A query whose class has no other item ("lone query") can retrieve nothing relevant; it is left
  out of every retrieval mean, as in pytorch-metric-learning's ``AccuracyCalculator``. R for MAP@R
  is the number of other items of the query's class.
- Means are over queries (not averaged per class first).
- Exact distance ties are ordered by reference index (lower first).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from clusterable.device import DeviceSpec
from clusterable.evaluate._inputs import Metric as Distance
from clusterable.evaluate._inputs import (
    as_embeddings,
    as_labels,
    as_points,
    check_ks,
)
from clusterable.evaluate._keywords import refuse_renamed
from clusterable.evaluate.neighbors import (
    Backend,
    DistanceBlocks,
    drop_self,
    knn_chunks,
    knn_chunks_on_device,
    search_device_of,
)
from clusterable.evaluate.registry import Artefacts, register_metric

#: Recall@K for a K deeper than the search must go for MAP@R (``R_max``) and for k-means' kNN
#: lists is settled by a second search of only the queries with no item of their class within
#: that depth, when ``R_max`` is at least this share of the deepest K: classes large next to K
#: leave few such queries, and the heaps of the whole search are the cost (Recall@100, 5,924 x
#: 512 with classes up to 81: 88 candidates instead of 108; benchmarks/README.md). With small
#: classes (Stanford Online Products) a quarter of the queries would need the second search.
SHALLOW_MIN_SHARE = 0.5


def _first_places(match: np.ndarray) -> np.ndarray:
    """``(c,)`` place of each row's first True in ``(c, k)`` ``match``, ``k`` where it has none."""
    return np.where(match.any(axis=1), match.argmax(axis=1), match.shape[1])


def _retrieval_chunk(
    match: np.ndarray, r: np.ndarray, r_max: int | None
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-query scores of one chunk from its ``(c, k)`` ``match`` (whether each neighbour shares
    the query's class), NaN where ``r == 0`` (lone query), and the ``(c,)`` place of the first
    item of the query's class (`_first_places`).

    ``r_max``: the largest ``R`` of the whole set, for MAP@R and R-precision (None: neither).
    They are summed over the first ``r_max`` places whatever the search's depth, so that their
    rounding does not depend on it.
    """
    lone = r == 0
    out = {"precision@1": np.where(lone, np.nan, match[:, 0])}
    if r_max is not None:
        ranks = np.arange(1, r_max + 1)
        relevant = match[:, :r_max] & (ranks <= r[:, None])  # hits in the first R places  (c, R)
        hits_so_far = np.cumsum(relevant, axis=1)  # (c, R)
        with np.errstate(invalid="ignore", divide="ignore"):
            # AP@R = (1/R) sum_{i<=R} P(i) rel(i)   (Musgrave et al. 2020)
            out["map@r"] = (hits_so_far * relevant / ranks).sum(axis=1) / r
            out["r_precision"] = relevant.sum(axis=1) / r
    return out, _first_places(match)


def _retrieval_chunk_on_device(
    match: torch.Tensor, r: torch.Tensor, r_max: int | None
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """`_retrieval_chunk` on the search's device, with ``(c,)`` float64 ``r``: the same values,
    MAP@R to within the order of its sum over the first ``R`` places (a few units in the last
    place)."""
    out = {"precision@1": match[:, 0].double().masked_fill(r == 0, torch.nan)}
    if r_max is not None:
        ranks = torch.arange(1, r_max + 1, dtype=torch.float64, device=match.device)
        relevant = match[:, :r_max] & (ranks <= r[:, None])  # hits in the first R places  (c, R)
        hits_so_far = relevant.cumsum(dim=1)  # (c, R)
        out["map@r"] = (hits_so_far * relevant / ranks).sum(dim=1) / r
        out["r_precision"] = relevant.sum(dim=1) / r
    places = torch.arange(match.shape[1], device=match.device)
    return out, torch.where(match, places, match.shape[1]).amin(dim=1)


class _HostArrays:
    """The arrays of `_scored_chunks` for faiss's search: numpy, the inputs as they are."""

    chunk_scores = staticmethod(_retrieval_chunk)

    @staticmethod
    def put(values: np.ndarray, dtype: str | None = None) -> np.ndarray:
        return values  # the counts stay integers: the same quotients

    @staticmethod
    def full(n: int, fill: float, dtype: str) -> np.ndarray:
        return np.full(n, fill, dtype=dtype)

    @staticmethod
    def get(values: np.ndarray) -> np.ndarray:
        return values


class _DeviceArrays:
    """The arrays of `_scored_chunks` for the torch back ends: tensors on the search's
    ``device``, brought to the host once, at the end."""

    chunk_scores = staticmethod(_retrieval_chunk_on_device)

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def put(self, values: np.ndarray, dtype: str | None = None) -> torch.Tensor:
        tensor = torch.from_numpy(values).to(self.device)
        return tensor if dtype is None else tensor.to(getattr(torch, dtype))

    def full(self, n: int, fill: float, dtype: str) -> torch.Tensor:
        return torch.full((n,), fill, dtype=getattr(torch, dtype), device=self.device)

    @staticmethod
    def get(values: torch.Tensor) -> np.ndarray:
        return values.cpu().numpy()


def _scored_chunks(
    points: np.ndarray,
    codes: np.ndarray,
    r_all: np.ndarray,
    k: int,
    r_max: int | None,
    search: dict[str, Any],
    neighbours: np.ndarray | None,
    blocks: DistanceBlocks | None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The chunk loop of `retrieval_per_query`, for every back end: each chunk's ``k`` neighbours
    scored where the search left them (numpy for faiss; the search's device for torch, whence
    only the ``(n,)`` scores, first places and kept ``neighbours`` come to the host, once)."""
    on = search_device_of(search["backend"], search["device"])
    arrays: Any  # _HostArrays or _DeviceArrays: numpy or torch, as the chunks hold them
    chunks: Iterator[tuple[int, Any, Any]]
    if on is None:
        arrays, chunks = _HostArrays(), knn_chunks(points, k, codes=codes, blocks=blocks, **search)
    else:
        arrays, chunks = _DeviceArrays(on), knn_chunks_on_device(points, k, codes=codes, **search)
    n = codes.shape[0]
    codes_x, r_x = arrays.put(codes), arrays.put(r_all, "float64")
    first_hit = arrays.full(n, -1, "int64")  # -1: another shard's row
    kept = None if neighbours is None else arrays.put(neighbours)
    out: dict[str, Any] = {}
    for start, _, idx in chunks:
        stop = start + idx.shape[0]
        if kept is not None:
            kept[start:stop] = idx[:, : kept.shape[1]]  # (c, m)
        match = codes_x[idx] == codes_x[start:stop, None]  # (c, k)
        part, first_hit[start:stop] = arrays.chunk_scores(match, r_x[start:stop], r_max)
        for name, values in part.items():
            if name not in out:
                out[name] = arrays.full(n, np.nan, "float64")
            out[name][start:stop] = values
    if neighbours is not None and kept is not neighbours:
        neighbours[:] = arrays.get(kept)
    return {name: arrays.get(values) for name, values in out.items()}, arrays.get(first_hit)


def _first_hits(
    points: np.ndarray,
    codes: np.ndarray,
    rows: np.ndarray,
    depth: int,
    search: dict[str, Any],
) -> np.ndarray:
    """``(m,)`` place of the first item of its class among the ``depth`` nearest others of each
    query row (leave-one-out), ``depth`` where none is: a search of those rows alone, with the
    ``search`` settings (``distance``, ``backend``, ``device``) of the whole one."""
    places = np.empty(rows.size, dtype=np.int64)
    kk = min(depth + 1, points.shape[0])  # the query itself is among the references
    settings = {key: search[key] for key in ("distance", "backend", "device")}
    for start, dist, idx in knn_chunks(points[rows], kk, points, **settings):
        own = rows[start : start + idx.shape[0]]
        _, others = drop_self(dist, idx, own)  # (c, kk - 1)
        match = codes[others[:, :depth]] == codes[own][:, None]  # (c, depth)
        places[start : start + idx.shape[0]] = _first_places(match)
    return places


def retrieval_per_query(
    points: np.ndarray,
    codes: np.ndarray,
    ks: Sequence[int] = (1,),
    *,
    at_r: bool = True,
    distance: Distance = "euclidean",
    backend: Backend = "auto",
    device: DeviceSpec = "auto",
    chunk_size: int | None = None,
    shard: tuple[int, int] = (0, 1),
    neighbours: np.ndarray | None = None,
    blocks: DistanceBlocks | None = None,
) -> dict[str, np.ndarray]:
    """Per-query retrieval scores from a single leave-one-out kNN search.

    The search runs once at ``max(max(ks), R_max)`` neighbours, ``R_max`` being the largest class
    size minus one, and is consumed chunk by chunk, so memory is ``O(n + chunk * k)``. Where
    ``R_max`` reaches `SHALLOW_MIN_SHARE` of ``max(ks)``, it stops at ``R_max`` (or the
    ``neighbours`` kept) instead, and the queries with no item of their class within it are
    searched again to ``max(ks)`` for their Recall@K: the same scores. On the torch back ends
    the search and the scores stay on the search's device, chunk after chunk, and only the
    ``(n,)`` scores (and the ``neighbours`` kept) come to the host.

    Parameters
    ----------
    points : numpy.ndarray
        ``(n, d)`` validated points (`as_points` of `as_embeddings`).
    codes : numpy.ndarray
        ``(n,)`` int64 class codes ``0 .. C-1`` (from `as_labels`).
    ks : sequence of int
        The K of Recall@K, already validated; empty for none.
    at_r : bool
        Also compute AP@R and R-precision (needs ``R_max`` neighbours).
    distance, backend, device, chunk_size, shard
        Passed to `knn_chunks` (``device``: where ``backend="auto"`` searches; ``"auto"``: a
        GPU when torch sees one).
    neighbours : numpy.ndarray, optional
        ``(n, m)`` integer array filled with each query's first ``m`` neighbours, nearest first
        (ties within float32 rounding between items of one kind in any order), for a k-means to
        start from (`clusterable.cluster.kmeans`); ``m < n``. The search reaches ``m`` at least.
    blocks : list of (numpy.ndarray, numpy.ndarray), optional
        The squared distance matrix of ``points`` in column blocks, already computed (the
        silhouette's), for the search to read (see `knn_chunks`).

    Returns
    -------
    dict of str to numpy.ndarray
        ``recall@K`` for each K, ``precision@1`` and, with ``at_r``, ``map@r`` and ``r_precision``:
        each ``(n,)`` float64, NaN for lone queries (and for the rows of other shards).
    """
    r_all = np.bincount(codes)[codes] - 1  # (n,) relevant items per query
    if not (r_all > 0).any():
        raise ValueError(
            "every class has a single item, so no query has anything relevant to "
            "retrieve; retrieval metrics need at least one class with two items."
        )
    deepest = max(ks, default=1)  # precision@1 alone needs the nearest
    r_max = int(r_all.max()) if at_r else None
    floor = max(r_max or 1, 0 if neighbours is None else neighbours.shape[1])
    # Classes large next to the deepest K leave few queries without a hit within R_max.
    shallow = r_max is not None and r_max >= SHALLOW_MIN_SHARE * deepest
    k = floor if shallow else max(deepest, floor)
    n = codes.shape[0]
    search = {
        "distance": distance,
        "backend": backend,
        "device": device,
        "chunk_size": chunk_size,
        "shard": shard,
    }
    out, first_hit = _scored_chunks(points, codes, r_all, k, r_max, search, neighbours, blocks)
    missed = np.flatnonzero((first_hit == k) & (r_all > 0))
    if deepest > k and missed.size:
        first_hit[missed] = _first_hits(points, codes, missed, deepest, search)
    unscored = (r_all == 0) | (first_hit < 0)  # lone queries, other shards' rows
    for kk in ks:
        out[f"recall@{kk}"] = np.where(unscored, np.nan, first_hit < kk)
    names = (
        [f"recall@{kk}" for kk in ks] + ["precision@1"] + (["map@r", "r_precision"] if at_r else [])
    )
    return {name: out.get(name, np.full(n, np.nan)) for name in names}  # a shard may own no chunk


def query_gallery_per_query(
    points: np.ndarray,
    codes: np.ndarray,
    is_query: np.ndarray,
    ks: Sequence[int] = (1,),
    *,
    at_r: bool = True,
    distance: Distance = "euclidean",
    backend: Backend = "auto",
    device: DeviceSpec = "auto",
) -> dict[str, np.ndarray]:
    """Per-query retrieval scores where each query ranks a gallery, not the other items.

    The protocol of In-Shop Clothes Retrieval (Liu et al., "DeepFashion", CVPR 2016) and of
    pytorch-metric-learning's ``AccuracyCalculator.get_accuracy(query, reference, ...,
    ref_includes_query=False)``: the items flagged ``is_query`` search the others (the gallery),
    once, at ``max(max(ks), R_max)`` neighbours; ``R`` of a query is the number of gallery items
    of its class, and a query whose class has none in the gallery is left out of every mean.
    Ties and float64 resolution as in `knn_chunks`.

    Parameters
    ----------
    points, codes
        ``(n, d)`` validated points and ``(n,)`` class codes of every item (as in
        `retrieval_per_query`).
    is_query : numpy.ndarray
        ``(n,)`` bool: True for a query, False for a gallery item; at least one of each.
    ks, at_r, distance, backend, device
        As in `retrieval_per_query`; each K at most the gallery's size.

    Returns
    -------
    dict of str to numpy.ndarray
        The keys of `retrieval_per_query`, each ``(n,)`` float64, NaN on gallery rows and for
        queries with nothing of their class in the gallery.
    """
    queries, gallery = np.flatnonzero(is_query), np.flatnonzero(~is_query)
    query_codes, gallery_codes = codes[queries], codes[gallery]  # (m,), (g,)
    r = np.bincount(gallery_codes, minlength=int(codes.max()) + 1)[query_codes]  # (m,)
    if not (r > 0).any():
        raise ValueError(
            "no query has an item of its class in the gallery, so nothing can be retrieved; "
            "check that queries and gallery share classes (In-Shop: the same item ids)"
        )
    deepest = max(ks, default=1)
    r_max = int(r.max()) if at_r else None
    k = max(deepest, r_max or 1)
    first_hit = np.empty(queries.size, dtype=np.int64)
    scores: dict[str, np.ndarray] = {}
    for start, _, idx in knn_chunks(
        points[queries], k, points[gallery], distance=distance, backend=backend, device=device
    ):
        stop = start + idx.shape[0]
        match = gallery_codes[idx] == query_codes[start:stop, None]  # (c, k)
        part, first_hit[start:stop] = _retrieval_chunk(match, r[start:stop], r_max)
        for name, values in part.items():
            scores.setdefault(name, np.empty(queries.size))[start:stop] = values
    for kk in ks:
        scores[f"recall@{kk}"] = np.where(r == 0, np.nan, first_hit < kk)
    names = [f"recall@{kk}" for kk in ks] + ["precision@1"] + (["map@r", "r_precision"] * at_r)
    out = {name: np.full(codes.shape[0], np.nan) for name in names}  # (n,) NaN: gallery rows
    for name in names:
        out[name][queries] = scores[name]
    return out


def _scores_of(a: Artefacts) -> dict[str, np.ndarray]:
    """The evaluation's per-query scores, which every metric that needs neighbours has."""
    assert a.per_query is not None, "a retrieval metric ran without the neighbours"
    return a.per_query


def _mean_over_queries(values: np.ndarray) -> float:
    return float(np.nanmean(values))


@register_metric("recall@k", needs={"neighbours"}, per_k=True, label="recall@{k} (retrieval)")
def _table_recall_at_k(a: Artefacts) -> dict[str, float]:
    """One key ``recall@K`` for each K of the evaluation's ``ks``."""
    return {f"recall@{k}": _mean_over_queries(_scores_of(a)[f"recall@{k}"]) for k in a.ks}


@register_metric("precision@1", needs={"neighbours"}, label="precision@1 (retrieval)")
def _table_precision_at_1(a: Artefacts) -> float:
    return _mean_over_queries(_scores_of(a)["precision@1"])


@register_metric("map@r", needs={"neighbours_at_r"}, label="MAP@R (retrieval)")
def _table_map_at_r(a: Artefacts) -> float:
    return _mean_over_queries(_scores_of(a)["map@r"])


@register_metric("r_precision", needs={"neighbours_at_r"}, label="R-precision (retrieval)")
def _table_r_precision(a: Artefacts) -> float:
    return _mean_over_queries(_scores_of(a)["r_precision"])


def _prepare(emb: Any, labels: Any, distance: Distance) -> tuple[np.ndarray, np.ndarray]:
    """The validation of every public retrieval metric: ``(points, codes)``."""
    x = as_embeddings(emb)
    codes, _ = as_labels(labels, x.shape[0])
    if x.shape[0] < 2:
        raise ValueError("retrieval needs at least two items; pass a larger set.")
    return as_points(x, distance), codes


@refuse_renamed(metric="distance")
def recall_at_k(
    emb: Any,
    labels: Any,
    ks: Sequence[int] | int = (1, 2, 4, 8),
    *,
    distance: Distance = "euclidean",
    device: DeviceSpec = "auto",
) -> dict[int, float]:
    """Recall@K as the deep-metric-learning papers define it.

    The share of queries that have at least one item of their own class among their K nearest
    neighbours, the query itself excluded. This is not information-retrieval recall.

    Parameters
    ----------
    emb : array-like
        ``(n, d)`` embeddings (numpy or torch).
    labels : array-like
        ``(n,)`` class labels.
    ks : sequence of int or int
        The values of K, each at most ``n - 1``.
    distance : {"euclidean", "cosine"}
        Distance used to rank neighbours.
    device : str or torch.device
        Where the search runs (a CUDA device, or the CPU); ``"auto"``: a GPU when torch sees one.

    Returns
    -------
    dict of int to float
        ``{K: recall}`` in [0, 1].

    References
    ----------
    Oh Song et al., "Deep Metric Learning via Lifted Structured Feature Embedding", CVPR 2016.

    Examples
    --------
    >>> recall_at_k([[0.0], [0.1], [5.0], [5.2]], [0, 0, 1, 1], ks=(1,))
    {1: 1.0}
    """
    x, codes = _prepare(emb, labels, distance)
    kk = check_ks(ks, x.shape[0] - 1)
    per_query = retrieval_per_query(x, codes, kk, at_r=False, distance=distance, device=device)
    return {k: _mean_over_queries(per_query[f"recall@{k}"]) for k in kk}


@refuse_renamed(metric="distance")
def precision_at_1(
    emb: Any, labels: Any, *, distance: Distance = "euclidean", device: DeviceSpec = "auto"
) -> float:
    """Share of queries whose nearest other item has the query's class (equals Recall@1);
    ``distance`` and ``device`` as in `recall_at_k`."""
    x, codes = _prepare(emb, labels, distance)
    per_query = retrieval_per_query(x, codes, (1,), at_r=False, distance=distance, device=device)
    return _mean_over_queries(per_query["precision@1"])


@refuse_renamed(metric="distance")
def map_at_r(
    emb: Any, labels: Any, *, distance: Distance = "euclidean", device: DeviceSpec = "auto"
) -> float:
    """Mean average precision at R (MAP@R).

    For a query with R other items of its class, ``AP@R = (1/R) sum_{i=1}^{R} P(i) rel(i)``, where
    ``rel(i)`` says whether the i-th neighbour is of the query's class and ``P(i)`` is the precision
    of the first i neighbours. MAP@R is the mean over queries with ``R >= 1``.

    Parameters
    ----------
    emb : array-like
        ``(n, d)`` embeddings.
    labels : array-like
        ``(n,)`` class labels.
    distance : {"euclidean", "cosine"}
        Distance used to rank neighbours.
    device : str or torch.device
        Where the search runs (a CUDA device, or the CPU); ``"auto"``: a GPU when torch sees one.

    Returns
    -------
    float
        In [0, 1].

    References
    ----------
    Musgrave, Belongie and Lim, "A Metric Learning Reality Check", ECCV 2020.

    Examples
    --------
    Class 0 at 0, 1 and 4 on a line (R = 2 each), one item of class 1 at 3 (R = 0: not a query).
    The queries at 0 and 1 find their class first, then the stranger: AP@R = 1/2 each. The query
    at 4 finds the stranger first: AP@R = (1/2)(1/2). Recall@1 would call the first two perfect.

    >>> map_at_r([[0.0], [1.0], [3.0], [4.0]], [0, 0, 1, 0])
    0.4166666666666667
    """
    x, codes = _prepare(emb, labels, distance)
    per_query = retrieval_per_query(x, codes, (1,), distance=distance, device=device)
    return _mean_over_queries(per_query["map@r"])


@refuse_renamed(metric="distance")
def r_precision(
    emb: Any, labels: Any, *, distance: Distance = "euclidean", device: DeviceSpec = "auto"
) -> float:
    """Mean R-precision: the share of same-class items among each query's R nearest neighbours;
    ``distance`` and ``device`` as in `map_at_r`.

    References
    ----------
    Musgrave, Belongie and Lim, "A Metric Learning Reality Check", ECCV 2020.
    """
    x, codes = _prepare(emb, labels, distance)
    per_query = retrieval_per_query(x, codes, (1,), distance=distance, device=device)
    return _mean_over_queries(per_query["r_precision"])
