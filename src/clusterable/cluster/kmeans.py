"""k-means (Lloyd) with exact nearest-centroid assignments, stopped when they stop changing.

By default the best of 10 restarts, each seeded by greedy k-means++ and run for at most 50 Lloyd
iterations, stopped as soon as no assignment changes: the robust choice for a few
well-separated groups. `clusterable.evaluate.evaluate_embeddings` asks for one restart seeded on
``k`` distinct random points and at most 20 iterations (pytorch-metric-learning's evaluation runs
one faiss k-means of 20), chosen by measurement (``benchmarks/README.md``): at the class counts of
retrieval test sets it gives as good a partition as pytorch-metric-learning's and skips k-means++
seeding, whose ``k`` sequential steps took longer than the whole clustering at large ``k``.

Each iteration does only the work that can change the answer, with the labels of plain Lloyd
(up to float32 rounding between near-equidistant centroids):

- from `BOUNDED_MIN_CLUSTERS` clusters, each point keeps a lower bound on its distance to the
  other centroids (Hamerly 2010) and only the centroids that moved are searched
  (`_Assignments`);
- member sums move only the points whose label changed (`_MemberSums`);
- given each point's nearest other points (the evaluation's kNN search), the first assignment
  reads the nearest seed off that list (`_Assignments.start_from`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
import torch
from scipy import sparse

from clusterable._distances import squared_distances
from clusterable._optional import installed
from clusterable.cluster._validation import Rescaling, warn_if_fewer_clusters
from clusterable.cluster.auto import (
    AUTO_MAX_CLUSTERS,
    AUTO_SAMPLE_SIZE,
    by_silhouette,
    check_auto_settings,
)
from clusterable.cluster.partition import NearestCentrePartition, member_means
from clusterable.cluster.registry import Clusterer, register_clusterer, run_clustering
from clusterable.device import DeviceSpec, search_device

#: Lloyd iterations (assignments) at most, and restarts, by default.
MAX_ITER = 50
N_INIT = 10

#: Rounding margin of a float32 squared distance ``|x|^2 + |c|^2 - 2 x.c``, relative to
#: ``|x|^2 + max |c|^2``: float32 dot products err by about ``sqrt(d) * 1.2e-7`` of that.
ROUNDING_RTOL = 1e-5

#: Clusters from which assignments keep distance bounds (`_Assignments`); below, a full search
#: costs little and most centroids move at every iteration anyway (measured:
#: benchmarks/README.md).
BOUNDED_MIN_CLUSTERS = 256

#: Elements per block of points: bounds the ``(block, k)`` distances of the torch back end and
#: the float64 copies of rescaled blocks.
_BLOCK_ELEMENTS = 1 << 24


class _Frame:
    """The points as float32 the assignments can trust, produced block by block.

    k-means is invariant to translating and scaling all points by one factor; its float32
    arithmetic is not: squared distances overflow near 1e19 and vanish near 1e-25, and
    ``|x|^2 + |c|^2 - 2 x.c`` cancels far from the origin. Points that are float32 already, of
    moderate size (`SAFE_PEAK`) and not far from the origin relative to their spread
    (`SAFE_OFFSET`), are used as they are (no copy); any others are centred and scaled into
    ``[-1, 1]`` block by block when used, so no second ``(n, d)`` array is held.
    """

    #: Largest absolute values used without rescaling: squares stay far from float32's limits.
    SAFE_PEAK = (1e-8, 1e8)
    #: Largest centre offset, in units of the spread, used without rescaling: the cancellation
    #: error stays below ``1e-7 * 100 = 1e-5`` of a squared distance.
    SAFE_OFFSET = 10.0

    def __init__(self, points: np.ndarray) -> None:
        self.points = points
        highest, lowest = points.max(axis=0), points.min(axis=0)  # (d,) each; no (n, d) copy
        peak = max(float(highest.max()), -float(lowest.min()))
        self.peak = peak if peak > 0 else 1.0
        self.centre = points.mean(axis=0, dtype=np.float64) / self.peak  # (d,)
        # Half the widest coordinate range: at most the largest deviation from the centre.
        spread = float((highest.astype(np.float64) - lowest).max()) / (2.0 * self.peak)
        self.identity = (
            points.dtype == np.float32
            and self.SAFE_PEAK[0] <= peak <= self.SAFE_PEAK[1]
            and float(np.abs(self.centre).max()) <= self.SAFE_OFFSET * spread
        )
        if not self.identity:  # the largest deviation, which maps the points into [-1, 1]
            spread = 0.0
            for start, stop in self.chunks(points.shape[0]):
                block = points[start:stop] / self.peak - self.centre
                spread = max(spread, float(np.abs(block).max()))
        self.spread = spread if spread > 0 else 1.0
        self._squared_norms: np.ndarray | None = None

    def squared_norms(self) -> np.ndarray:
        """``(n,)`` float32 ``|x|^2`` of every point in the working frame, computed once."""
        if self._squared_norms is None:
            n = self.points.shape[0]
            self._squared_norms = np.empty(n, dtype=np.float32)
            for start, stop in self.chunks(n):
                block = self.rows(slice(start, stop))
                self._squared_norms[start:stop] = np.einsum("nd,nd->n", block, block)
        return self._squared_norms

    def chunks(self, n: int, per_row: int = 8) -> Iterator[tuple[int, int]]:
        """Ranges over ``n`` rows, each bounded to `_BLOCK_ELEMENTS` of ``per_row`` rows."""
        step = max(1, _BLOCK_ELEMENTS // (per_row * self.points.shape[1]))
        for start in range(0, n, step):
            yield start, min(start + step, n)

    def blocks(self) -> Iterator[tuple[int, int]]:
        """Row ranges to work on: all at once when the points are used as they are."""
        if self.identity:
            yield 0, self.points.shape[0]
        else:
            yield from self.chunks(self.points.shape[0])

    def rows(self, index: np.ndarray | slice) -> np.ndarray:
        """Rows of the points in the working frame, ``(m, d)`` float32."""
        if self.identity:
            return self.points[index]
        block = self.points[index].astype(np.float64) / self.peak
        return ((block - self.centre) / self.spread).astype(np.float32)


def _nearest(
    frame: _Frame,
    centroids: np.ndarray,
    device: torch.device,
    backend: str,
    rows: np.ndarray | None = None,
    kk: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``kk`` nearest centroids of each point (of ``rows``, or all), nearest first, and their
    squared distances: ``(m, kk)`` int64 and float64.

    ``backend`` ``"faiss"`` (CPU), ``"numpy"`` (CPU, ``kk = 1``: numpy's BLAS, measured faster
    than faiss's search at a hundred centroids) or ``"torch"`` (any device); blocks of
    `_BLOCK_ELEMENTS`.
    """
    n = frame.points.shape[0] if rows is None else rows.size
    ids = np.empty((n, kk), dtype=np.int64)
    squared = np.empty((n, kk), dtype=np.float64)

    def points(start: int, stop: int) -> np.ndarray:
        return frame.rows(slice(start, stop) if rows is None else rows[start:stop])

    if backend == "faiss":
        import faiss

        index = faiss.IndexFlatL2(centroids.shape[1])
        index.add(centroids)
        blocks = frame.blocks() if rows is None else frame.chunks(n)
        for start, stop in blocks:
            dist, nearest = index.search(points(start, stop), kk)
            ids[start:stop], squared[start:stop] = nearest, dist
        return ids, np.maximum(squared, 0.0)
    step = max(1, _BLOCK_ELEMENTS // centroids.shape[0])
    if backend == "numpy":
        half_sq = 0.5 * np.einsum("kd,kd->k", centroids, centroids)  # (k,)
        norms = frame.squared_norms()  # (n,): the same at every iteration
        if rows is not None:
            norms = norms[rows]
        for start in range(0, n, step):
            block = points(start, start + step)  # (b, d)
            # |x - c|^2 / 2 - |x|^2 / 2 = |c|^2 / 2 - x.c, whose order is the distances'.
            partial = block @ centroids.T  # (b, k)
            np.subtract(half_sq, partial, out=partial)
            stop = start + block.shape[0]
            ids[start:stop, 0] = nearest = partial.argmin(axis=1)
            least = partial[np.arange(nearest.size), nearest]
            squared[start:stop, 0] = 2.0 * least + norms[start:stop]
        return ids, np.maximum(squared, 0.0)
    cents = torch.from_numpy(centroids).to(device)
    cent_sq = (cents * cents).sum(1)  # (k,)
    for start in range(0, n, step):
        block = torch.from_numpy(points(start, start + step)).to(device)  # (b, d)
        # |x - c|^2 = |x|^2 + |c|^2 - 2 x.c; the row's own |x|^2 does not change the order.
        partial = cent_sq - 2.0 * (block @ cents.T)  # (b, k)
        value, nearest = torch.topk(partial, kk, dim=1, largest=False, sorted=True)
        stop = start + block.shape[0]
        ids[start:stop] = nearest.cpu().numpy()
        squared[start:stop] = (value + (block * block).sum(1, keepdim=True)).double().cpu().numpy()
    return ids, np.maximum(squared, 0.0)


class _Assignments:
    """Exact nearest-centroid assignments that search all centroids only where they must.

    Each point keeps a lower bound on its distance to every centroid but its own, valid for the
    centroids that have not moved since (Hamerly 2010). At each assignment only the centroids that
    moved are searched, for every point: the nearest of them other than its own tightens the
    bound. A point still nearer its own centroid than its bound keeps it; only the others search
    all centroids again. Late Lloyd iterations move few centroids, so they cost a small part of a
    full search. The labels are Lloyd's, up to float32 rounding between near-equidistant
    centroids, for which every bound keeps a margin (`ROUNDING_RTOL`). With fewer than
    `BOUNDED_MIN_CLUSTERS` clusters, nearly all move at every iteration: every assignment is
    then a full search.
    """

    def __init__(self, frame: _Frame, k: int, device: torch.device, backend: str) -> None:
        self.frame, self.device, self.backend = frame, device, backend
        self.bounded = k >= BOUNDED_MIN_CLUSTERS
        self.labels = np.empty(0, dtype=np.int64)
        self.bound = np.empty(0)  # (n,) lower distance to every other centroid
        self.centroids: np.ndarray | None = None
        self.seed_rows: np.ndarray | None = None
        self.neighbours: np.ndarray | None = None
        self.point_sq = (  # (n,) for the bounds' margin
            frame.squared_norms().astype(np.float64) if self.bounded else np.empty(0)
        )

    def __call__(self, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(n,)`` nearest centroid of every point and its squared distance."""
        if self.centroids is None and self.seed_rows is not None:
            return self._from_neighbours(centroids)
        if not self.bounded:
            ids, sq = _nearest(self.frame, centroids, self.device, self._backend(1), None, 1)
            return ids[:, 0], sq[:, 0]
        # Rounding margin of float32 squared distances |x|^2 + |c|^2 - 2 x.c, per point.
        slack = ROUNDING_RTOL * (self.point_sq + np.einsum("kd,kd->k", centroids, centroids).max())
        if self.centroids is None:
            return self._search(centroids, slack)
        moved = np.flatnonzero((centroids != self.centroids).any(axis=1))
        if 2 * moved.size > centroids.shape[0]:  # bounds would save less than they cost
            return self._search(centroids, slack)
        squared = self._own_distances(centroids)
        if moved.size:
            kk = min(2, moved.size)
            ids, sq = _nearest(self.frame, centroids[moved], self.device, self.backend, None, kk)
            # The nearest moved centroid other than the point's own.
            second = sq[:, 1] if kk == 2 else np.inf
            other = np.where(moved[ids[:, 0]] == self.labels, second, sq[:, 0])
            np.minimum(self.bound, np.sqrt(np.maximum(other - slack, 0.0)), out=self.bound)
        unsure = np.flatnonzero(np.sqrt(squared + slack) > self.bound)
        self.centroids = centroids.copy()
        if unsure.size:
            ids, sq = _nearest(self.frame, centroids, self.device, self.backend, unsure, 2)
            self.labels[unsure], squared[unsure] = ids[:, 0], sq[:, 0]
            self.bound[unsure] = np.sqrt(np.maximum(sq[:, 1] - slack[unsure], 0.0))
        return self.labels.copy(), squared

    def start_from(self, seed_rows: np.ndarray, neighbours: np.ndarray) -> None:
        """Read the first assignment off each point's nearest other points.

        ``seed_rows`` ``(k,)``: the points the centroids start on; ``neighbours`` ``(n, m)``: each
        point's nearest other points, nearest first. A point's nearest seed is the first seed in
        its list, since every seed outside the list lies farther than every point in it (up to
        float32 rounding, as for any assignment); only points whose list holds no seed search.
        """
        self.seed_rows, self.neighbours = seed_rows, neighbours

    def _from_neighbours(self, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assert self.seed_rows is not None and self.neighbours is not None
        n, k = self.frame.points.shape[0], centroids.shape[0]
        centroid_of = np.full(n, -1, dtype=np.int64)
        centroid_of[self.seed_rows] = np.arange(k)
        listed = centroid_of[self.neighbours]  # (n, m): the seed's centroid, or -1
        labels = listed[np.arange(n), (listed >= 0).argmax(axis=1)]  # -1 where none is listed
        labels[self.seed_rows] = np.arange(k)  # a seed is its own nearest
        self.seed_rows = self.neighbours = None
        self.labels, self.centroids = labels, centroids.copy()
        squared = self._own_distances(centroids)
        unlisted = np.flatnonzero(labels < 0)
        if unlisted.size:
            ids, sq = _nearest(self.frame, centroids, self.device, self._backend(1), unlisted, 1)
            labels[unlisted], squared[unlisted] = ids[:, 0], sq[:, 0]
        self.bound = np.zeros(n)  # unknown: the next assignment searches
        return labels.copy(), squared

    def _search(self, centroids: np.ndarray, slack: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Labels and squared distances from a search of all centroids by every point, which
        sets every bound afresh."""
        ids, sq = _nearest(self.frame, centroids, self.device, self.backend, None, 2)
        self.labels, self.centroids = ids[:, 0].copy(), centroids.copy()
        self.bound = np.sqrt(np.maximum(sq[:, 1] - slack, 0.0))
        return ids[:, 0].copy(), sq[:, 0].copy()

    def _backend(self, kk: int) -> str:
        """The back end of a search for the ``kk`` nearest: numpy's BLAS for the nearest alone
        on the CPU (faster than faiss's search at a hundred centroids; measured), else the
        given one."""
        return "numpy" if kk == 1 and self.backend == "faiss" else self.backend

    def _own_distances(self, centroids: np.ndarray) -> np.ndarray:
        """``(n,)`` squared distance of every point to its current centroid's new place."""
        n = self.frame.points.shape[0]
        squared = np.empty(n)
        # Blocks of about 1 MB, which stay in cache: 1.6-2.5 ms against 3.5-3.7 ms for blocks of
        # 8 MB on a first call at 5,924 x 512, 0.2 against 2-3 ms at 4,000 x 128 (same values).
        for start, stop in self.frame.chunks(n, per_row=64):
            block = self.frame.rows(slice(start, stop))
            diff = block - centroids[self.labels[start:stop]]  # (b, d); label -1: any row
            squared[start:stop] = np.einsum("bd,bd->b", diff, diff)
        return squared


class _MemberSums:
    """Each cluster's sum of member points (float64) and member count, kept up to date by moving
    only the points whose label changed: late Lloyd iterations change few."""

    def __init__(self, frame: _Frame, k: int) -> None:
        self.frame, self.k = frame, k
        self.sums = np.zeros((k, frame.points.shape[1]))  # (k, d)
        self.counts = np.zeros(k, dtype=np.int64)
        self.labels = np.full(frame.points.shape[0], -1, dtype=np.int64)  # -1: not counted yet

    def means(self, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(k, d)`` float32 member means and ``(k,)`` member counts of ``labels``."""
        moved = np.flatnonzero(labels != self.labels)
        for start, stop in self.frame.chunks(moved.size):
            rows = moved[start:stop]
            was = self.labels[rows]
            counted = was >= 0
            # (k, 2m) +1/-1 matrix: one sparse product adds the moved rows to their new clusters
            # and takes the counted ones from their old.
            change = sparse.csr_matrix(
                (
                    np.concatenate([np.ones(rows.size), -np.ones(int(counted.sum()))]),
                    (
                        np.concatenate([labels[rows], was[counted]]),
                        np.concatenate([np.arange(rows.size), np.flatnonzero(counted)]),
                    ),
                ),
                shape=(self.k, rows.size),
            )
            self.sums += change @ self.frame.rows(rows).astype(np.float64)
            self.counts += np.bincount(labels[rows], minlength=self.k)
            self.counts -= np.bincount(was[counted], minlength=self.k)
        self.labels = labels.copy()
        means = self.sums / np.maximum(self.counts, 1)[:, None]
        return means.astype(np.float32), self.counts.copy()


def _relocate(frame: _Frame, centroids: np.ndarray, empty: np.ndarray, squared: np.ndarray) -> int:
    """Move each empty centroid onto a distinct point far from its own centroid; return how many.

    A point at positive distance from every centroid joins the centroid put on it at the next
    assignment, so the cluster is no longer empty. With fewer distinct points than clusters there
    may be too few such points: those centroids stay where they are.
    """
    order = np.argsort(-squared, kind="stable")
    far = order[squared[order] > 0]
    wanted = empty.size
    take = min(far.size, 2 * wanted)
    while True:
        rows = frame.rows(far[:take])
        _, first = np.unique(rows, axis=0, return_index=True)
        distinct = np.sort(first)[:wanted]
        if distinct.size == wanted or take == far.size:
            break
        take = min(far.size, 2 * take)
    centroids[empty[: distinct.size]] = rows[distinct]
    return int(distinct.size)


def _lloyd(
    frame: _Frame,
    seeds: np.ndarray,
    max_iter: int,
    device: torch.device,
    backend: str | None = None,
    start: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, float]:
    """Lloyd iterations from ``seeds`` ``(k, d)``; labels of the last assignment and its inertia.

    Assignments run in faiss on the CPU (torch without the ``faiss`` extra) and in torch on any
    other device (``backend`` overrides). ``start``: the rows of the seed points and each point's
    nearest other points, for `_Assignments.start_from`.
    """
    backend = backend or ("faiss" if device.type == "cpu" and installed("faiss") else "torch")
    centroids = seeds
    k = centroids.shape[0]
    assign = _Assignments(frame, k, device, backend)
    if start is not None:
        assign.start_from(*start)
    members = _MemberSums(frame, k)
    previous = None
    iteration = 0
    while True:
        labels, squared = assign(centroids)
        iteration += 1
        counts = np.bincount(labels, minlength=k)
        empty = np.flatnonzero(counts == 0)
        # An empty cluster is moved, whatever the budget, as long as a distinct point is free for
        # it: the inertia falls at each move, so this ends.
        if empty.size and iteration < 2 * max_iter and _relocate(frame, centroids, empty, squared):
            previous = None
            continue
        if iteration >= max_iter or (previous is not None and np.array_equal(labels, previous)):
            return labels, float(squared.sum())
        previous = labels
        means, counts = members.means(labels)
        centroids = np.where(counts[:, None] > 0, means, centroids)


def _seeds(
    frame: _Frame, k: int, init: str, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``(k, d)`` initial centroids, ``k`` distinct random points or greedy k-means++, and the
    ``(k,)`` rows of the points they are."""
    n = frame.points.shape[0]
    if init == "random":
        rows = np.sort(rng.choice(n, k, replace=False))
        return frame.rows(rows), rows
    rows = _greedy_kmeans_plusplus(frame.rows(slice(None)), k, rng, frame.squared_norms())
    return frame.rows(rows), rows


def _greedy_kmeans_plusplus(
    points: np.ndarray, k: int, rng: np.random.Generator, point_sq: np.ndarray
) -> np.ndarray:
    """``(k,)`` rows of ``(n, d)`` points chosen by greedy k-means++; ``point_sq``: their
    ``(n,)`` ``|x|^2``.

    The first seed is a uniform draw. Each next one is the best of ``2 + ln k`` candidates drawn
    with probability proportional to their squared distance to the nearest seed so far: the one
    that leaves the least total squared distance (the greedy choice Arthur and Vassilvitskii 2007
    mention; the number of candidates is scikit-learn's). Distances are float32
    (`clusterable._distances`): scikit-learn's ``kmeans_plusplus`` upcasts to float64 and took
    18 of the 100 ms of an evaluation of 2,000 items, this 2 ms (measured: benchmarks/README.md,
    "Evaluation").
    """
    n = points.shape[0]
    candidates = 2 + int(np.log(k))
    rows = np.empty(k, dtype=np.int64)
    rows[0] = rng.integers(n)
    closest = squared_distances(points[rows[:1]], points, b_sq=point_sq)[0].astype(np.float64)
    for i in range(1, k):
        cumulative = np.cumsum(closest)  # (n,)
        # The first row whose cumulative sum exceeds the draw: rows at distance 0 (the seeds
        # themselves, their duplicates) are never drawn while any other row is left.
        drawn = np.searchsorted(cumulative, rng.random(candidates) * cumulative[-1], "right")
        drawn = np.minimum(drawn, n - 1)  # (c,)
        left = np.minimum(closest, squared_distances(points[drawn], points, b_sq=point_sq))
        best = int(left.sum(axis=1).argmin())
        rows[i], closest = drawn[best], left[best]
    return rows


def kmeans(
    x: np.ndarray,
    k: int | Literal["auto"] | None,
    seed: int = 0,
    *,
    n_init: int = N_INIT,
    max_iter: int = MAX_ITER,
    init: Literal["k-means++", "random"] = "k-means++",
    device: DeviceSpec = "auto",
    neighbours: np.ndarray | None = None,
    max_clusters: int = AUTO_MAX_CLUSTERS,
    sample_size: int = AUTO_SAMPLE_SIZE,
) -> np.ndarray:
    """Partition points into ``k`` clusters with k-means (Lloyd); the restart of least inertia wins.

    Each restart seeds the centroids on ``k`` distinct random points (or with k-means++), then
    alternates exact nearest-centroid assignments and member means until no assignment changes or
    ``max_iter`` assignments were made. An empty cluster's centroid is moved onto a distinct point
    far from its own centroid, so ``k`` clusters come back whenever ``x`` holds ``k`` distinct
    points; with fewer, a :class:`~clusterable.cluster.ClusterCountWarning` says so.

    The work is done on the points centred and scaled into ``[-1, 1]`` (the partition does not
    change; float32 arithmetic no longer overflows or underflows at any finite scale), block by
    block, so memory beyond ``x`` is ``O(k d)`` plus fixed blocks.

    Parameters
    ----------
    x : array-like of shape (n, d)
        Points (numpy array or torch tensor), any finite real values; distances are float32.
    k : int or "auto"
        Number of clusters, ``1 <= k <= n``; ``"auto"`` (or None) chooses it by silhouette
        (`clusterable.cluster.auto`, up to ``max_clusters``).
    seed : int
        Seed of every random step; the same seed gives the same labels.
    n_init : int
        Restarts; the one whose final assignment has the lowest inertia wins.
    max_iter : int
        Assignments per restart at most.
    init : {"random", "k-means++"}
        Greedy k-means++ (``2 + ln k`` candidates per seed, as scikit-learn's
        ``kmeans_plusplus``; ``O(n k d log k)`` sequential work), the robust choice for a few
        well-separated groups;
        or ``k`` distinct random points, which costs nothing and, at the class counts of
        retrieval test sets, gives as good a partition (what `evaluate_embeddings` uses).
    device : torch.device or str, optional
        Where the assignments run: ``"cpu"`` (faiss), a CUDA device (torch), or ``"auto"``
        (:func:`clusterable.device.search_device`: CUDA when the package's device rule picks it,
        the CPU otherwise, MPS included).
    neighbours : array-like of int, optional
        ``(n, m)`` each point's nearest other points, nearest first, such as a kNN search already
        made (`evaluate_embeddings` passes its own). Each restart's first assignment then reads
        each point's nearest seed off its list instead of searching all ``k`` seeds: the same
        partition, one full search fewer.

    max_clusters, sample_size : int
        For ``k="auto"``: the largest count tried, and the points whose silhouette scores each.

    Returns
    -------
    np.ndarray
        ``(n,)`` int64 cluster ids in ``[0, k)``.

    Raises
    ------
    ValueError
        If ``x`` is not 2-D, holds NaN or infinite values, or ``k``, ``n_init``, ``max_iter`` or
        ``init`` is out of range.

    References
    ----------
    S. P. Lloyd, "Least squares quantization in PCM", IEEE Trans. Inf. Theory, 1982.
    D. Arthur and S. Vassilvitskii, "k-means++: the advantages of careful seeding", SODA 2007.
    J. Johnson, M. Douze and H. Jégou, "Billion-scale similarity search with GPUs" (faiss), 2019.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.concatenate([np.zeros((5, 2)), np.ones((5, 2)) * 10.0])
    >>> labels = kmeans(x, 2, seed=0)
    >>> len(set(labels[:5])), len(set(labels[5:])), labels[0] != labels[5]
    (1, 1, True)
    """
    options = {"n_init": n_init, "max_iter": max_iter, "init": init, "device": device}
    auto = {"max_clusters": max_clusters, "sample_size": sample_size}
    return run_clustering(x, "kmeans", k, seed=seed, neighbours=neighbours, **options, **auto)


@register_clusterer("kmeans", auto="silhouette", label="k-means")
class KMeansClusterer(Clusterer):
    """k-means as a registered estimator: :func:`kmeans`'s options, the nearest-centre rule.

    Its partition keeps the member means of the clusters; the stored labels are one more
    nearest-mean assignment of the fitted points (never a higher k-means cost), so that
    ``predict`` returns them on the fitted points.
    """

    def __init__(
        self,
        n_clusters: int | Literal["auto"] | None = None,
        seed: int = 0,
        *,
        n_init: int = N_INIT,
        max_iter: int = MAX_ITER,
        init: Literal["k-means++", "random"] = "k-means++",
        device: DeviceSpec = "auto",
        neighbours: np.ndarray | None = None,
        max_clusters: int = AUTO_MAX_CLUSTERS,
        sample_size: int = AUTO_SAMPLE_SIZE,
    ) -> None:
        super().__init__(n_clusters, seed)
        for name, value in (("n_init", n_init), ("max_iter", max_iter)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if init not in ("random", "k-means++"):
            raise ValueError(f"init must be 'random' or 'k-means++', got {init!r}")
        check_auto_settings(max_clusters, sample_size)
        self.n_init, self.max_iter, self.init, self.device = (
            int(n_init),
            int(max_iter),
            init,
            device,
        )
        self.neighbours = neighbours
        self.max_clusters, self.sample_size = int(max_clusters), int(sample_size)

    def cluster(self, points: np.ndarray) -> np.ndarray:
        device = search_device(self.device)
        neighbours = None
        if self.neighbours is not None:
            neighbours = _check_neighbours(self.neighbours, points.shape[0])

        def labels(k: int) -> np.ndarray:
            return _kmeans(
                points, k, self.seed, self.n_init, self.max_iter, self.init, device, neighbours
            )

        def choose() -> tuple[int, dict[str, Any]]:
            return by_silhouette(points, labels, self.max_clusters, self.sample_size, self.seed)

        return labels(self._count(choose))

    def partition(self, points: np.ndarray, frame: Rescaling) -> NearestCentrePartition:
        labels = self.cluster(points)
        centres = frame.apply(member_means(points, labels))
        partition = NearestCentrePartition(labels_=labels, rescaling=frame, centres=centres)
        partition.labels_ = partition.assign(points)
        return partition


def _kmeans(
    points: np.ndarray,
    k: int,
    seed: int,
    n_init: int,
    max_iter: int,
    init: str,
    device: torch.device,
    neighbours: np.ndarray | None,
) -> np.ndarray:
    """The core of :func:`kmeans`: prior validation of every argument is assumed."""
    n = points.shape[0]
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    frame = _Frame(points)
    rng = np.random.default_rng(seed)
    best_labels, best_inertia = None, np.inf
    for _ in range(n_init):
        seeds, rows = _seeds(frame, k, init, rng)
        start = None if neighbours is None else (rows, neighbours)
        labels, inertia = _lloyd(frame, seeds, max_iter, device, start=start)
        if inertia < best_inertia:
            best_labels, best_inertia = labels, inertia
    warn_if_fewer_clusters(
        "kmeans",
        best_labels,
        points,
        k,
        lambda missing: (
            f"{missing} centroid(s) kept no point after {2 * max_iter} assignments; raise max_iter"
        ),
    )
    return best_labels


def _check_neighbours(neighbours: np.ndarray, n: int) -> np.ndarray:
    """``neighbours`` as ``(n, m)`` integer array of rows, or a ValueError saying what is off."""
    lists = np.asarray(neighbours)
    if lists.ndim != 2 or lists.shape[0] != n or lists.dtype.kind not in "iu":
        raise ValueError(
            f"neighbours must be an (n, m) = ({n}, m) integer array of each point's nearest "
            f"other points, got shape {lists.shape} of {lists.dtype}."
        )
    if lists.size and (lists.min() < 0 or lists.max() >= n):
        raise ValueError(f"neighbours must hold row numbers in [0, {n}); some lie outside.")
    return lists
