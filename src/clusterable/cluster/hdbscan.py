"""HDBSCAN (scikit-learn's): density clusters for an unknown number of clusters, noise -1.

HDBSCAN builds the hierarchy of DBSCAN clusterings over every density level (single linkage on
the mutual reachability distance ``max(core(a), core(b), |a - b|)``, where ``core(p)`` is the
distance from ``p`` to its ``min_samples``-th nearest point, itself counted) and keeps the most
stable clusters of at least ``min_cluster_size`` points; points in none of them are noise (-1).
It finds its own number of clusters.

The clustering is scikit-learn's ``sklearn.cluster.HDBSCAN`` with Euclidean distance, run on the
points centred and scaled into ``[-1, 1]`` (`Rescaling`; ``cluster_selection_epsilon``, a
distance, is scaled with them, so it keeps the units of the points): the clusters do not change,
and squared distances of points near 1e200 no longer overflow.

How a new point is placed (scikit-learn's HDBSCAN has no ``predict``; this rule is ours, by the
nearest core point): a point joins the cluster of its nearest clustered fitted point ``p`` when
it lies within ``p``'s core distance (it would be among ``p``'s ``min_samples`` nearest points,
so in ``p``'s dense neighbourhood), and is noise otherwise; a point equal bit for bit to a fitted
point takes that point's label, noise included (the first such fitted point's where the fitted
points repeat), so ``predict`` on the fitted points returns ``labels_``.

How the metrics count noise: every evaluation metric of a partition
(`clusterable.evaluate.evaluate_embeddings`, ``nmi``, ``pairwise_f1``, ...) counts each noise
point as a cluster of its own, so that calling points noise never raises pairwise precision or
NMI for free (`clusterable.evaluate._inputs.as_clusters`).

References
----------
R. J. G. B. Campello, D. Moulavi and J. Sander, "Density-based clustering based on hierarchical
density estimates", PAKDD 2013.
L. McInnes, J. Healy and S. Astels, "hdbscan: Hierarchical density based clustering", JOSS 2017.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from clusterable.cluster._validation import Rescaling
from clusterable.cluster.partition import Partition, identical_rows
from clusterable.cluster.registry import Clusterer, register_clusterer, run_clustering


def hdbscan(
    x: np.ndarray,
    *,
    min_cluster_size: int = 5,
    min_samples: int | None = None,
    cluster_selection_epsilon: float = 0.0,
    max_cluster_size: int | None = None,
    alpha: float = 1.0,
    cluster_selection_method: Literal["eom", "leaf"] = "eom",
    allow_single_cluster: bool = False,
) -> np.ndarray:
    """Cluster points with scikit-learn's HDBSCAN; -1 marks noise.

    Parameters
    ----------
    x : array-like of shape (n, d)
        Points, at least ``min_samples`` of them.
    min_cluster_size : int
        Fewest points of a cluster (>= 2).
    min_samples : int, optional
        Neighbours, the point itself counted, whose distance is a point's core distance;
        ``min_cluster_size`` by default. Larger: more points called noise.
    cluster_selection_epsilon : float
        Clusters closer than this distance (in the units of ``x``) are merged.
    max_cluster_size : int, optional
        Largest cluster the "eom" selection may keep (None: no limit).
    alpha : float
        Distance scaling of the robust single linkage.
    cluster_selection_method : {"eom", "leaf"}
        Excess of mass (the most stable clusters), or the leaves of the cluster tree (more,
        smaller clusters).
    allow_single_cluster : bool
        Allow one cluster holding every non-noise point.

    Returns
    -------
    np.ndarray
        ``(n,)`` int64 cluster ids ``0, 1, ...``, -1 for noise.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.normal(0, 0.3, (50, 2)), rng.normal(5, 0.3, (50, 2))])
    >>> labels = hdbscan(x, min_cluster_size=10)
    >>> len(set(labels[:50]) - {-1}), len(set(labels[:50]) & set(labels[50:]) - {-1})
    (1, 0)
    """
    options: dict[str, Any] = {
        "min_cluster_size": min_cluster_size,
        "min_samples": min_samples,
        "cluster_selection_epsilon": cluster_selection_epsilon,
        "max_cluster_size": max_cluster_size,
        "alpha": alpha,
        "cluster_selection_method": cluster_selection_method,
        "allow_single_cluster": allow_single_cluster,
    }
    return run_clustering(x, "hdbscan", **options)


@register_clusterer("hdbscan", takes_n_clusters=False, seeded=False, label="HDBSCAN")
class HDBSCANClusterer(Clusterer):
    """:func:`hdbscan` as a registered estimator, with the nearest-core-point rule (see the
    module docstring)."""

    def __init__(
        self,
        n_clusters: None = None,
        seed: int = 0,
        *,
        min_cluster_size: int = 5,
        min_samples: int | None = None,
        cluster_selection_epsilon: float = 0.0,
        max_cluster_size: int | None = None,
        alpha: float = 1.0,
        cluster_selection_method: Literal["eom", "leaf"] = "eom",
        allow_single_cluster: bool = False,
    ) -> None:
        super().__init__(n_clusters, seed)
        _check_count("min_cluster_size", min_cluster_size, 2)
        if min_samples is not None:
            _check_count("min_samples", min_samples, 1)
        if max_cluster_size is not None:
            _check_count("max_cluster_size", max_cluster_size, 1)
        if not cluster_selection_epsilon >= 0.0:
            raise ValueError(
                f"cluster_selection_epsilon is a distance >= 0, got {cluster_selection_epsilon!r}"
            )
        if not alpha > 0.0:
            raise ValueError(f"alpha must be > 0, got {alpha!r}")
        if cluster_selection_method not in ("eom", "leaf"):
            method = cluster_selection_method
            raise ValueError(f"cluster_selection_method must be 'eom' or 'leaf', got {method!r}")
        self.options: dict[str, Any] = {
            "min_cluster_size": int(min_cluster_size),
            "min_samples": None if min_samples is None else int(min_samples),
            "cluster_selection_epsilon": float(cluster_selection_epsilon),
            "max_cluster_size": None if max_cluster_size is None else int(max_cluster_size),
            "alpha": float(alpha),
            "cluster_selection_method": cluster_selection_method,
            "allow_single_cluster": bool(allow_single_cluster),
        }
        self.min_samples = self.options["min_samples"] or self.options["min_cluster_size"]

    def cluster(self, points: np.ndarray) -> np.ndarray:
        frame = Rescaling.of(points)
        return self._fit(frame.apply(points), frame)

    def partition(self, points: np.ndarray, frame: Rescaling) -> NearestCorePointPartition:
        from sklearn.neighbors import NearestNeighbors

        z = frame.apply(points)  # (n, d)
        labels = self._fit(z, frame)
        distances = NearestNeighbors(n_neighbors=self.min_samples).fit(z).kneighbors(z)[0]
        return NearestCorePointPartition(
            labels_=labels, rescaling=frame, reference=z, core_distances=distances[:, -1]
        )

    def _fit(self, z: np.ndarray, frame: Rescaling) -> np.ndarray:
        """Labels of the rescaled points ``z`` (scikit-learn's)."""
        from sklearn.cluster import HDBSCAN

        if z.shape[0] < self.min_samples:
            raise ValueError(
                f"hdbscan needs at least min_samples = {self.min_samples} points, got "
                f"{z.shape[0]}: lower min_samples (or min_cluster_size), or cluster more points"
            )
        options = dict(self.options)
        options["cluster_selection_epsilon"] /= frame.peak * frame.spread  # into z's units
        try:
            return HDBSCAN(**options, copy=True).fit(z).labels_.astype(np.int64)
        except TypeError as error:
            if not self.options["cluster_selection_epsilon"] > 0:
                raise
            import sklearn

            # scikit-learn #33219: its epsilon search casts an array to float, which NumPy 2.4
            # refuses deep in Cython.
            epsilon = self.options["cluster_selection_epsilon"]
            raise ValueError(
                f"hdbscan with cluster_selection_epsilon={epsilon} fails inside scikit-learn "
                f"{sklearn.__version__} under NumPy {np.__version__} "
                f"(scikit-learn issue #33219: {error}); give cluster_selection_epsilon=0, or run "
                "with NumPy below 2.4 (pip install 'numpy<2.4') until scikit-learn fixes it"
            ) from None


@dataclass(kw_only=True)
class NearestCorePointPartition(Partition):
    """A point joins its nearest clustered fitted point's cluster when within that point's core
    distance, and is noise otherwise; equal bit for bit to a fitted point it takes that point's
    label, noise included (HDBSCAN, see the module docstring).

    ``reference`` holds the fitted points (rescaled) and ``core_distances`` their ``(n,)`` core
    distances in that frame.
    """

    RULE: ClassVar[str] = "nearest-core-point"
    ARRAYS: ClassVar[tuple[str, ...]] = ("reference", "core_distances")
    reference: np.ndarray  # (n, d)
    core_distances: np.ndarray  # (n,)

    def _assign(self, z: np.ndarray) -> np.ndarray:
        """``(b,)`` clusters of ``(b, d)`` points in the fitted frame by the nearest core point,
        -1 for noise; a fitted point's own label where the row is one."""
        from sklearn.neighbors import NearestNeighbors

        out = np.full(z.shape[0], -1, dtype=np.int64)
        clustered = np.flatnonzero(self.labels_ >= 0)
        if clustered.size:
            search = NearestNeighbors(n_neighbors=1).fit(self.reference[clustered])
            distance, row = (column[:, 0] for column in search.kneighbors(z))
            nearest = clustered[row]
            inside = distance <= self.core_distances[nearest]
            out[inside] = self.labels_[nearest[inside]]
        fitted = identical_rows(self.reference, z)  # (b,)
        out[fitted >= 0] = self.labels_[fitted[fitted >= 0]]
        return out


def _check_count(name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
