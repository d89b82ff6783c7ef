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

- from ``BOUNDED_MIN_CLUSTERS`` clusters, each point keeps a lower bound on its distance to the
  other centroids (Hamerly 2010) and only the centroids that moved are searched
  (`clusterable.cluster._kmeans_assignments`);
- member sums move only the points whose label changed (`clusterable.cluster._lloyd`);
- given each point's nearest other points (the evaluation's kNN search), the first assignment
  reads the nearest seed off that list (``Assignments.start_from``).

The pieces, one module each: the points in a frame float32 can trust
(`clusterable.cluster._kmeans_frame`), the seeding (`clusterable.cluster._kmeans_seeding`), the
assignments, and Lloyd's iterations; this module holds the restarts and the registered estimator.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch

from clusterable.cluster._kmeans_frame import KMeansFrame
from clusterable.cluster._kmeans_seeding import initial_centroids
from clusterable.cluster._lloyd import lloyd
from clusterable.cluster._validation import Rescaling, warn_if_fewer_clusters
from clusterable.cluster.auto import (
    AUTO_MAX_CLUSTERS,
    AUTO_SAMPLE_SIZE,
    by_silhouette,
    check_auto_settings,
)
from clusterable.cluster.partition import NearestCentrePartition, member_means
from clusterable.cluster.registry import Clusterer, register_clusterer, run_clustering
from clusterable.device import DeviceSpec, check_device_name, search_device

#: Lloyd iterations (assignments) at most, and restarts, by default.
MAX_ITER = 50
N_INIT = 10


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
        (:func:`clusterable.device.search_device`: CUDA where torch sees a GPU, the CPU
        otherwise, MPS included). This argument alone decides: no ambient device is read.
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
    >>> len(set(labels[:5])), len(set(labels[5:])), bool(labels[0] != labels[5])
    (1, 1, True)
    """
    options: dict[str, Any] = {"n_init": n_init, "max_iter": max_iter, "init": init}
    auto = {"max_clusters": max_clusters, "sample_size": sample_size}
    return run_clustering(
        x, "kmeans", k, seed=seed, device=device, neighbours=neighbours, **options, **auto
    )


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
        check_device_name(device)
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
            return kmeans_restarts(
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


def kmeans_restarts(
    points: np.ndarray,
    k: int,
    seed: int,
    n_init: int,
    max_iter: int,
    init: str,
    device: torch.device,
    neighbours: np.ndarray | None,
    *,
    warn: bool = True,
) -> np.ndarray:
    """The core of :func:`kmeans`: the labels of the restart of least inertia on ``device``.

    Prior validation of every argument is assumed. ``warn``: warn when fewer than ``k`` clusters
    come out (False: the caller, which partitions other points than the user's, says why).
    """
    n = points.shape[0]
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    frame = KMeansFrame(points)
    rng = np.random.default_rng(seed)
    best_labels, best_inertia = None, np.inf
    for _ in range(n_init):
        seeds, rows = initial_centroids(frame, k, init, rng)
        start = None if neighbours is None else (rows, neighbours)
        labels, inertia = lloyd(frame, seeds, max_iter, device, start=start)
        if inertia < best_inertia:
            best_labels, best_inertia = labels, inertia
    assert best_labels is not None  # n_init >= 1 runs, the first always best so far
    if not warn:
        return best_labels
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
