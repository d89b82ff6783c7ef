"""k-means' assignment step: each point's nearest centroid, searched only where it must be.

From `BOUNDED_MIN_CLUSTERS` clusters each point keeps a lower bound on its distance to the other
centroids (Hamerly 2010) and only the centroids that moved are searched (`Assignments`); given
each point's nearest other points (the evaluation's kNN search), the first assignment reads the
nearest seed off that list (`Assignments.start_from`).

References
----------
G. Hamerly, "Making k-means even faster", SDM 2010.
"""

from __future__ import annotations

import numpy as np
import torch

from clusterable.cluster._kmeans_frame import BLOCK_ELEMENTS, KMeansFrame

#: Rounding margin of a float32 squared distance ``|x|^2 + |c|^2 - 2 x.c``, relative to
#: ``|x|^2 + max |c|^2``: float32 dot products err by about ``sqrt(d) * 1.2e-7`` of that.
ROUNDING_RTOL = 1e-5

#: Clusters from which assignments keep distance bounds (`Assignments`); below, a full search
#: costs little and most centroids move at every iteration anyway (measured:
#: benchmarks/README.md).
BOUNDED_MIN_CLUSTERS = 256


def nearest_centroids(
    frame: KMeansFrame,
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
    `BLOCK_ELEMENTS`.
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
    step = max(1, BLOCK_ELEMENTS // centroids.shape[0])
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
        batch = torch.from_numpy(points(start, start + step)).to(device)  # (b, d)
        # |x - c|^2 = |x|^2 + |c|^2 - 2 x.c; the row's own |x|^2 does not change the order.
        partial_x = cent_sq - 2.0 * (batch @ cents.T)  # (b, k)
        value, nearest_x = torch.topk(partial_x, kk, dim=1, largest=False, sorted=True)
        stop = start + batch.shape[0]
        ids[start:stop] = nearest_x.cpu().numpy()
        squared[start:stop] = (value + (batch * batch).sum(1, keepdim=True)).double().cpu().numpy()
    return ids, np.maximum(squared, 0.0)


class Assignments:
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

    def __init__(self, frame: KMeansFrame, k: int, device: torch.device, backend: str) -> None:
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
            ids, sq = nearest_centroids(
                self.frame, centroids, self.device, self._backend(1), None, 1
            )
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
            ids, sq = nearest_centroids(
                self.frame, centroids[moved], self.device, self.backend, None, kk
            )
            # The nearest moved centroid other than the point's own.
            second = sq[:, 1] if kk == 2 else np.inf
            other = np.where(moved[ids[:, 0]] == self.labels, second, sq[:, 0])
            np.minimum(self.bound, np.sqrt(np.maximum(other - slack, 0.0)), out=self.bound)
        unsure = np.flatnonzero(np.sqrt(squared + slack) > self.bound)
        self.centroids = centroids.copy()
        if unsure.size:
            ids, sq = nearest_centroids(self.frame, centroids, self.device, self.backend, unsure, 2)
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
            ids, sq = nearest_centroids(
                self.frame, centroids, self.device, self._backend(1), unlisted, 1
            )
            labels[unlisted], squared[unlisted] = ids[:, 0], sq[:, 0]
        self.bound = np.zeros(n)  # unknown: the next assignment searches
        return labels.copy(), squared

    def _search(self, centroids: np.ndarray, slack: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Labels and squared distances from a search of all centroids by every point, which
        sets every bound afresh."""
        ids, sq = nearest_centroids(self.frame, centroids, self.device, self.backend, None, 2)
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
