"""Choosing the number of clusters, for ``n_clusters="auto"``: silhouette and eigengap.

- k-means: the count of highest silhouette (Rousseeuw 1987) among ``2 .. max_clusters``, each
  candidate partition scored on one seeded sample of ``sample_size`` points (distances within the
  sample, scikit-learn's ``silhouette_score(sample_size=...)``): ``O(candidates * sample^2 d)``
  beside the k-means runs themselves. One sample for every candidate, so their scores compare.
- DSCL spectral clustering: the eigengap of its own spectrum. Algorithm 2 clusters the leading
  left singular vectors of the centred points; ``k`` separated groups put ``k - 1`` large
  eigenvalues ``lambda_i = s_i^2`` in front of the rest, so ``k - 1`` is the ``i`` of the largest
  ratio ``lambda_i / lambda_{i+1}`` (a ratio, not a difference, so that a spectrum decaying
  steadily does not always pick the first gap), for ``i < rank`` and ``i + 1 <= max_clusters``.
  It sees at most ``rank`` groups (in two dimensions only 2): there, use k-means' silhouette or
  HDBSCAN.

Neither criterion says 1 (no structure); both are measured on the bundled sets in
``tests/cluster/test_auto.py`` and the reports of issue 30.

References
----------
P. J. Rousseeuw, "Silhouettes: a graphical aid to the interpretation and validation of cluster
analysis", J. Comput. Appl. Math., 1987.
U. von Luxburg, "A tutorial on spectral clustering", Statistics and Computing, 2007, Sec. 8.3
(the eigengap heuristic).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from clusterable.cluster._validation import Rescaling

#: Largest count ``"auto"`` considers, unless told otherwise (``max_clusters``).
AUTO_MAX_CLUSTERS = 20

#: Points whose silhouette scores each candidate count.
AUTO_SAMPLE_SIZE = 2000


def check_auto_settings(max_clusters: int, sample_size: int) -> None:
    """Refuse a ``max_clusters`` below 2 or a ``sample_size`` below 2, saying why."""
    for name, value in (("max_clusters", max_clusters), ("sample_size", sample_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 2:
            raise ValueError(
                f"{name} must be an integer >= 2 (for n_clusters='auto'), got {value!r}"
            )


def by_silhouette(
    points: np.ndarray,
    partition: Callable[[int], np.ndarray],
    max_clusters: int,
    sample_size: int,
    seed: int,
) -> tuple[int, dict[str, Any]]:
    """The count from 2 to ``max_clusters`` (at most ``n - 1``, and at most the distinct points:
    more clusters than those cannot be made) whose ``partition(k)`` has the highest silhouette on
    one seeded sample; ties go to the smaller count.

    Returns the count and ``{"criterion", "candidates", "scores"}``. With fewer than 3 points
    or 3 distinct points there is nothing to compare: ``min(distinct, 2)`` (1 when all points
    are equal). A candidate whose partition has one cluster in the sample, or only singletons,
    scores -1 (the silhouette is undefined there).
    """
    from sklearn.metrics import silhouette_score

    n = points.shape[0]
    distinct = np.unique(points, axis=0).shape[0]
    candidates = list(range(2, min(max_clusters, n - 1, distinct) + 1))
    if not candidates:
        return min(distinct, 2), {"criterion": "silhouette", "candidates": [], "scores": []}
    sample = np.random.default_rng(seed).permutation(n)[: min(sample_size, n)]
    sampled = Rescaling.of(points).apply(points[sample])  # (s, d): any scale, no overflow
    scores = []
    for k in candidates:
        labels = partition(k)[sample]
        found = np.unique(labels).size
        score = silhouette_score(sampled, labels) if 1 < found < sample.size else -1.0
        scores.append(float(score))
    best = candidates[int(np.argmax(scores))]
    return best, {"criterion": "silhouette", "candidates": candidates, "scores": scores}


def by_eigengap(singular_values: np.ndarray, max_clusters: int) -> tuple[int, dict[str, Any]]:
    """``1 + argmax_i lambda_i / lambda_{i+1}`` over ``1 <= i < rank``, ``i < max_clusters``,
    for ``lambda = singular_values^2`` of the centred points (see the module docstring).

    Returns the count and ``{"criterion", "candidates", "ratios"}``; a spectrum of rank 1 (or
    ``max_clusters`` 2) gives 2.
    """
    eigenvalues = np.asarray(singular_values, dtype=np.float64) ** 2
    usable = min(eigenvalues.size, max_clusters)
    ratios = eigenvalues[: usable - 1] / eigenvalues[1:usable]  # lambda_i / lambda_{i+1}
    if ratios.size == 0:
        return 2, {"criterion": "eigengap", "candidates": [2], "ratios": []}
    candidates = list(range(2, ratios.size + 2))
    best = candidates[int(np.argmax(ratios))]
    return best, {"criterion": "eigengap", "candidates": candidates, "ratios": ratios.tolist()}
