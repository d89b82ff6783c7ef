"""Input checks and the cluster-count warning shared by the partition algorithms.

Errors say what was wrong and what to do; warnings name the reason.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from clusterable._arrays import as_embeddings

#: Elements of the float64 blocks `Rescaling.of` works through.
_BLOCK_ELEMENTS = 1 << 20


class ClusterCountWarning(UserWarning):
    """A partition algorithm returned a different number of clusters than was asked for."""


def warn_cluster_count(method: str, found: int, k: int, reason: str) -> None:
    """Warn, from the caller of ``method``, that it returns ``found`` clusters instead of ``k``."""
    clusters = "cluster" if found == 1 else "clusters"
    message = f"{method} returned {found} {clusters}, not {k}: {reason}"
    warnings.warn(message, ClusterCountWarning, stacklevel=3)


def warn_if_fewer_clusters(
    method: str, labels: np.ndarray, points: np.ndarray, k: int, otherwise: Callable[[int], str]
) -> None:
    """Warn when ``labels`` hold fewer than ``k`` clusters: because ``points`` hold fewer than
    ``k`` distinct points, or for the reason ``otherwise(missing)`` gives."""
    found = int(np.unique(labels).size)
    if found < k:
        reason = too_few_distinct_points(points, k) or otherwise(k - found)
        warn_cluster_count(method, found, k, reason)


def too_few_distinct_points(points: np.ndarray, k: int) -> str | None:
    """Why ``points`` cannot give ``k`` clusters (fewer than ``k`` distinct points), or None."""
    distinct = np.unique(points, axis=0).shape[0]
    if distinct >= k:
        return None
    noun = "point" if distinct == 1 else "points"
    return f"the {points.shape[0]} points hold only {distinct} distinct {noun}"


def check_points(x: object, *, dtype: type | None = None) -> np.ndarray:
    """The points of a clustering call, checked by the package's one embedding rule
    (`clusterable._arrays.as_embeddings`: ``(n, d)``, finite; float32 and float64 kept, other
    real types converted exactly), then converted to ``dtype`` where one is asked for (a step
    that computes at that precision).

    Raises
    ------
    ValueError
        If ``x`` is not two-dimensional, is empty, is not real numbers, or holds NaN or infinite
        values.
    """
    points = as_embeddings(x, "points")
    return points if dtype is None else points.astype(dtype, copy=False)


def as_points(x: object) -> np.ndarray:
    """The one validation of the points a clustering call makes (`check_points`)."""
    return check_points(x)


def check_n_clusters(k: object, n_samples: int) -> int:
    """Return ``k`` as an int after checking ``1 <= k <= n_samples``."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise ValueError(f"the number of clusters must be an integer, got {k!r}")
    k = int(k)
    if not 1 <= k <= n_samples:
        raise ValueError(
            f"cannot make {k} clusters from {n_samples} points: choose 1 <= k <= {n_samples}"
        )
    return k


@dataclass(frozen=True)
class Rescaling:
    """The map ``x -> (x / peak - centre) / spread`` that `rescaled` applies, kept for new points.

    A partition fitted on rescaled points assigns new points after the same map (see
    `clusterable.cluster.partition`). ``peak`` and ``spread`` are 1 where the fitted points left
    nothing to divide by (all zero, or all equal).
    """

    peak: float
    centre: np.ndarray  # (d,)
    spread: float

    @classmethod
    def of(cls, points: np.ndarray) -> Rescaling:
        """The rescaling that centres ``points`` (n, d) and scales them into ``[-1, 1]``.

        Computed block by block: no ``(n, d)`` float64 copy of float32 points is made.
        """
        x = np.asarray(points)
        n, d = x.shape
        if n == 0:
            return cls(1.0, np.zeros(d), 1.0)
        peak = max(float(x.max()), -float(x.min()), 0.0) or 1.0
        step = max(1, _BLOCK_ELEMENTS // max(1, d))
        blocks = [slice(start, start + step) for start in range(0, n, step)]
        # The scale is taken out first, so that neither the mean nor the subtraction overflows.
        centre = sum((x[b].astype(np.float64) / peak).sum(axis=0) for b in blocks) / n  # (d,)
        spread = max(float(np.abs(x[b].astype(np.float64) / peak - centre).max()) for b in blocks)
        return cls(peak, centre, spread or 1.0)

    def apply(self, points: np.ndarray) -> np.ndarray:
        """``(m, d)`` points in the rescaled frame, float64."""
        return (np.asarray(points, dtype=np.float64) / self.peak - self.centre) / self.spread


def rescaled(points: np.ndarray) -> np.ndarray:
    """``points`` moved to the origin and scaled into ``[-1, 1]``, in float64.

    Every partition algorithm here is invariant to translating all points and scaling them by one
    factor, but their arithmetic is not: squared distances of float32 values near 1e19 overflow (and
    faiss aborts the process), and at 1e-25 they underflow so that every point looks the same.
    Working on ``(x - mean) / max|x - mean|`` gives the same partition for any finite input. The
    scale is taken out first so that neither the mean nor the subtraction can overflow.

    Parameters
    ----------
    points : np.ndarray
        ``(n, d)`` finite values (as `check_points` returns them).

    Returns
    -------
    np.ndarray
        ``(n, d)`` float64, centred, with largest absolute value 1 (all zeros when every point is
        the same).
    """
    return Rescaling.of(points).apply(points)
