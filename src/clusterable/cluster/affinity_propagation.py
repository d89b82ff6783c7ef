"""Affinity propagation with a bisection on the preference to reach a given number of clusters."""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np

from clusterable.cluster._validation import (
    ClusterCountWarning,
    Rescaling,
    rescaled,
    warn_cluster_count,
)
from clusterable.cluster.partition import NearestCentrePartition, member_means
from clusterable.cluster.registry import Clusterer, register_clusterer, run_clustering

__all__ = ["ClusterCountWarning", "affinity_propagation"]

#: Above this many points the three dense n x n float64 matrices of affinity propagation pass 10 GB.
MAX_POINTS = 20_000

#: A run stops once its exemplars have held for this many iterations, or after the most: Frey and
#: Dueck's own ``apcluster`` (``convits`` 100, ``maxits`` 1000 with damping 0.9, as in the R
#: package of the same name). scikit-learn's 15 suits its damping of 0.5: at 0.9 the messages
#: move a tenth as far a step, and 15 steady iterations stopped runs before far points became
#: exemplars: a third of the counts asked of small random sets went unreached, against 1 in 40
#: with 100 (``tests/cluster/test_affinity_propagation.py``).
CONVERGENCE_ITERATIONS, MAX_ITERATIONS = 100, 1000


def _run(
    similarity: np.ndarray, preference: float, damping: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Labels and exemplar rows of one affinity-propagation run, or None if it did not converge."""
    from sklearn.cluster import affinity_propagation as sklearn_affinity_propagation
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        exemplars, labels = sklearn_affinity_propagation(
            similarity,
            preference=preference,
            damping=damping,
            max_iter=MAX_ITERATIONS,
            convergence_iter=CONVERGENCE_ITERATIONS,
            random_state=0,  # sklearn's tie-breaking noise on S; fixed so runs are reproducible
        )
    if labels.size and labels[0] == -1:
        return None
    return labels.astype(np.int64), np.asarray(exemplars, dtype=np.int64)


def affinity_propagation(
    x: np.ndarray,
    k: int,
    *,
    max_steps: int = 40,
    damping: float = 0.9,
    progress: bool | None = None,
) -> np.ndarray:
    """Affinity propagation whose shared preference is bisected until it returns ``k`` clusters.

    Similarities are negative squared Euclidean distances. The number of exemplars grows with the
    preference, so the preference is bisected between the smallest and the largest off-diagonal
    similarity (widened downwards while even the lower end gives more than ``k`` clusters), as the
    lifted-structure paper does to compare with k-means at the number of test classes. Runs that do
    not converge count as "too many clusters" (oscillation happens at high preferences).

    The partition does not change when every point is moved or scaled by one factor (the messages
    scale with the similarities, the bisection with its bounds), so the similarities are computed
    on the points centred and scaled into ``[-1, 1]``: they cannot overflow, and an offset far
    from the origin no longer cancels their significant digits.

    Exact duplicates are merged into one point whose similarity row counts once per copy
    (``s'(i, j) = m_i s(i, j)`` for a point with ``m_i`` copies; similarities may be asymmetric in
    affinity propagation). The net similarity that affinity propagation maximises, the sum of
    ``s(i, exemplar(i))`` plus the preference of every exemplar, is the same as on the copies;
    but on the copies themselves the exact ties leave the messages degenerate (12 points at 3
    locations gave one cluster for ``k = 3``). Copies therefore always share a cluster, and when
    there are no more distinct points than ``k`` each distinct point is its own cluster.

    Parameters
    ----------
    x : array-like of shape (n, d)
        Points, ``n <= 20,000`` (memory is O(n^2)).
    k : int
        Number of clusters wanted, ``1 <= k <= n``.
    max_steps : int
        Maximum number of affinity-propagation runs in the bisection.
    damping : float
        Message damping in ``[0.5, 1)``; 0.9 (not scikit-learn's 0.5) because the bisection probes
        preferences where the messages oscillate at low damping.
    progress : bool, optional
        A bar over the bisection's runs with the cluster count of the last one; by default when
        standard error is a terminal (a run on 20,000 points takes minutes).

    Returns
    -------
    np.ndarray
        ``(n,)`` int64 cluster ids. Exactly ``k`` distinct ids when the bisection hits ``k``;
        otherwise the converged labelling whose cluster count is closest to ``k`` (ties: the
        smaller count), with a :class:`ClusterCountWarning`. Also with that warning, one cluster
        per distinct point when ``x`` holds fewer than ``k`` distinct points.

    Raises
    ------
    ValueError
        If ``x`` is not 2-D or not finite, ``k`` is not in ``[1, n]``, ``n`` exceeds 20,000, or no
        run converged at all.

    References
    ----------
    B. J. Frey and D. Dueck, "Clustering by passing messages between data points", Science, 2007.
    H. O. Song, Y. Xiang, S. Jegelka and S. Savarese, "Deep Metric Learning via Lifted Structured
    Feature Embedding", CVPR 2016, Section 6 (clustering with affinity propagation and a bisection
    on the preference).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.normal(c, 0.1, (10, 2)) for c in (0.0, 5.0, 10.0)])
    >>> len(np.unique(affinity_propagation(x, 3)))
    3
    """
    options: dict[str, Any] = {"max_steps": max_steps, "damping": damping, "progress": progress}
    return run_clustering(x, "affinity_propagation", k, **options)


@register_clusterer(
    "affinity_propagation", seeded=False, label="affinity propagation", memory="quadratic"
)
class AffinityPropagationClusterer(Clusterer):
    """:func:`affinity_propagation` as a registered estimator; its partition keeps the
    exemplars, and a new point joins its nearest exemplar's cluster (as affinity propagation
    assigns its own points)."""

    def __init__(
        self,
        n_clusters: int | None = None,
        seed: int = 0,
        *,
        max_steps: int = 40,
        damping: float = 0.9,
        progress: bool | None = None,
    ) -> None:
        super().__init__(n_clusters, seed)
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
        if not 0.5 <= damping < 1.0:
            raise ValueError(f"damping must be in [0.5, 1), got {damping!r}")
        self.max_steps, self.damping, self.progress = max_steps, damping, progress

    def cluster(self, points: np.ndarray) -> np.ndarray:
        return self._fit(points)[0]

    def partition(self, points: np.ndarray, frame: Rescaling) -> NearestCentrePartition:
        labels, exemplars = self._fit(points)
        if exemplars.size == 0:  # one cluster needs no exemplar: its mean is the centre
            centres = frame.apply(member_means(points, labels))
        else:
            centres = frame.apply(points[exemplars])
        return NearestCentrePartition(labels_=labels, rescaling=frame, centres=centres)

    def _fit(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _affinity_propagation(
            points,
            int(self.n_clusters),  # type: ignore[arg-type]  # a count: takes_n_clusters, no auto
            self.max_steps,
            self.damping,
            self.progress,
        )


def _affinity_propagation(
    points: np.ndarray, k: int, max_steps: int, damping: float, progress: bool | None
) -> tuple[np.ndarray, np.ndarray]:
    """Labels and each cluster's exemplar row (empty when ``k == 1``: one cluster needs none);
    every point's cluster is that of its most similar (nearest) exemplar. Prior validation of
    every argument is assumed."""
    from tqdm import tqdm

    n = points.shape[0]
    if n > MAX_POINTS:
        raise ValueError(
            f"affinity propagation needs three dense {n} x {n} matrices; use at most {MAX_POINTS} "
            "points (subsample) or another method such as kmeans"
        )
    if k == 1:
        return np.zeros(n, dtype=np.int64), np.zeros(0, dtype=np.int64)
    distinct, location, copies = np.unique(points, axis=0, return_inverse=True, return_counts=True)
    location = location.ravel().astype(np.int64)  # (n,) index of each point's distinct point
    first_row = np.full(distinct.shape[0], n, dtype=np.int64)
    np.minimum.at(first_row, location, np.arange(n))  # (m,) a row of x holding each distinct point
    if distinct.shape[0] == 1:
        raise ValueError(
            f"all points are equal, so affinity propagation cannot tell {k} clusters apart; "
            "use k=1 or check the points"
        )
    m = distinct.shape[0]
    if m <= k:
        if m < k:
            reason = f"the {n} points hold only {m} distinct points; each is one cluster"
            warn_cluster_count("affinity propagation", m, k, reason)
        return location, first_row

    work = rescaled(distinct)
    squared_norms = np.einsum("ij,ij->i", work, work)
    similarity = -(squared_norms[:, None] + squared_norms[None, :] - 2.0 * work @ work.T)
    np.minimum(similarity, 0.0, out=similarity)  # rounding can make -||xi - xj||^2 positive
    similarity *= copies[:, None]  # s'(i, j) = m_i s(i, j): point i stands for its m_i copies
    off_diagonal = similarity[~np.eye(similarity.shape[0], dtype=bool)]
    low, high = float(off_diagonal.min()), float(off_diagonal.max())

    best: tuple[np.ndarray, np.ndarray] | None = None
    best_gap: tuple[int, int] | None = None
    # Equidistant points give one similarity value (low < 0, the points being distinct).
    span = high - low if high > low else -low
    show = sys.stderr.isatty() if progress is None else progress
    steps = tqdm(range(max_steps), desc=f"affinity propagation to {k} clusters", disable=not show)
    for _ in steps:
        preference = 0.5 * (low + high)
        run = _run(similarity, preference, damping)
        count = None if run is None else int(run[1].size)
        steps.set_postfix_str(f"{count} clusters" if count is not None else "did not converge")
        if run is not None and count is not None:
            labels, exemplars = run[0][location], first_row[run[1]]
            gap = (abs(count - k), count)
            if best_gap is None or gap < best_gap:
                best, best_gap = (labels, exemplars), gap
            if count == k:
                steps.close()
                return labels, exemplars
        if count is None or count > k:
            high = preference
            if high - low < 1e-9 * span:  # the lower end itself gives too many: widen it
                low -= span
                span *= 2.0
        else:
            low = preference
    if best is None or best_gap is None:  # set together
        raise ValueError(
            f"affinity propagation did not converge in {max_steps} runs; try a larger damping "
            "(closer to 1) or another method such as kmeans"
        )
    warn_cluster_count(
        "affinity propagation",
        best_gap[1],
        k,
        f"no preference in {max_steps} bisection steps gave {k}; returning the closest labelling",
    )
    return best
