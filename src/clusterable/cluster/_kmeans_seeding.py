"""k-means' initial centroids: ``k`` distinct random points, or greedy k-means++.

References
----------
D. Arthur and S. Vassilvitskii, "k-means++: the advantages of careful seeding", SODA 2007.
"""

from __future__ import annotations

import numpy as np

from clusterable._distances import squared_distances
from clusterable.cluster._kmeans_frame import KMeansFrame


def initial_centroids(
    frame: KMeansFrame, k: int, init: str, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``(k, d)`` initial centroids, ``k`` distinct random points or greedy k-means++, and the
    ``(k,)`` rows of the points they are."""
    n = frame.points.shape[0]
    if init == "random":
        rows = np.sort(rng.choice(n, k, replace=False))
        return frame.rows(rows), rows
    rows = greedy_kmeans_plusplus(frame.rows(slice(None)), k, rng, frame.squared_norms())
    return frame.rows(rows), rows


def greedy_kmeans_plusplus(
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
