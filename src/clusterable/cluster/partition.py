"""Partitions that persist: fit clusters once, assign new points to them, save and load them.

``fit(x, method, n_clusters)`` runs one of the partition algorithms of `clusterable.cluster` and
keeps what its own assignment rule needs, so that ``predict`` puts a new point where the algorithm
would have put it:

- ``kmeans``: the nearest centroid (the member mean of each cluster);
- ``spectral`` (DSCL Algorithm 2): the point projected like the fitted ones,
  ``T(x) = normalise(rescale(x) V_r S_r^-1)``, then the nearest centroid of the clusters in ``T``;
- ``gmm``: the most probable component of the fitted mixture (scikit-learn's own ``predict``);
- ``affinity_propagation``: the nearest exemplar (the point's most similar exemplar, as affinity
  propagation assigns its own points);
- ``aas``: AAS has no rule for a point outside its graph, so this one is ours: a point within the
  graph's reach takes the majority cluster of its `VOTE_NEIGHBOURS` nearest fitted points (noise
  counting as a cluster of its own; a tie goes to the cluster whose member is nearest), a point at
  distance 0 from a fitted point takes that point's cluster, and a point farther from every
  fitted point than the longest edge of AAS's kNN graph (``delta_max``) is noise (-1).

For ``kmeans`` and ``spectral`` the stored labels are the nearest-centroid assignment of the
fitted points to their clusters' member means, one more Lloyd assignment step after the
algorithm's own (never a higher k-means cost), so ``predict`` on the fitted points returns
``labels_`` for every method. All rules work in the frame the algorithms fit in (the points
centred and scaled into ``[-1, 1]``, `Rescaling`), so they hold at any scale.

A partition is saved as one checksummed ``.npz`` file (`clusterable.archive`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.mixture import GaussianMixture
from sklearn.neighbors import NearestNeighbors

from clusterable.archive import load_archive, save_archive
from clusterable.cluster._validation import Rescaling, check_n_clusters, check_points
from clusterable.cluster.aas import aas, knn_graph
from clusterable.cluster.affinity_propagation import fit_affinity_propagation
from clusterable.cluster.gmm import fit_gmm
from clusterable.cluster.kmeans import kmeans
from clusterable.cluster.registry import canonical_clustering
from clusterable.cluster.spectral import fit_spectral

#: The methods `fit` knows; AAS chooses its own number of clusters.
METHODS = ("kmeans", "spectral", "gmm", "affinity_propagation", "aas")

#: Fitted points that vote on a new point's AAS cluster.
VOTE_NEIGHBOURS = 10

#: What `Partition.save` writes, and the version of its layout.
ARCHIVE_KIND = "clusterable partition"
FORMAT_VERSION = 1

#: Points assigned per block: bounds the ``(block, clusters)`` distance matrix.
_BLOCK_ELEMENTS = 1 << 24


@dataclass
class Partition:
    """Clusters fitted on a set of points, with the rule that assigns new points to them.

    Attributes
    ----------
    method : str
        The algorithm that found the clusters (one of `METHODS`).
    labels_ : np.ndarray
        ``(n,)`` int64 cluster ids of the fitted points (-1: AAS noise).
    rescaling : Rescaling
        The frame the clusters live in: the fitted points centred and scaled into ``[-1, 1]``.
    options : dict
        ``n_clusters``, ``seed`` and the algorithm's options it was fitted with.
    """

    RULE: ClassVar[str] = ""
    method: str
    labels_: np.ndarray
    rescaling: Rescaling
    options: dict[str, Any]

    @property
    def n_features(self) -> int:
        """Dimension of the points the partition was fitted on."""
        return int(self.rescaling.centre.size)

    @property
    def n_clusters(self) -> int:
        """Number of clusters (AAS noise not counted)."""
        return int(np.unique(self.labels_[self.labels_ >= 0]).size)

    def predict(self, x: Any) -> np.ndarray:
        """Cluster ids of new points, ``(m,)`` int64 (-1: noise, AAS only).

        Raises
        ------
        ValueError
            If ``x`` is not a finite ``(m, d)`` array of the fitted dimension.
        """
        points = check_points(x)
        if points.shape[1] != self.n_features:
            raise ValueError(
                f"this partition was fitted on {self.n_features}-dimensional points, got "
                f"{points.shape[1]}; embed the items with the model the partition was fitted on"
            )
        return self._assign(self.rescaling.apply(points))

    def save(self, path: str | os.PathLike[str]) -> os.PathLike[str]:
        """Write the partition to one checksummed ``.npz`` file, atomically; returns its path."""
        arrays = {"labels": self.labels_, "centre": self.rescaling.centre, **self._arrays()}
        return save_archive(
            path,
            ARCHIVE_KIND,
            FORMAT_VERSION,
            arrays,
            rule=self.RULE,
            method=self.method,
            peak=self.rescaling.peak,
            spread=self.rescaling.spread,
            options=self.options,
            n_features=self.n_features,
            **self._settings(),
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Partition:
        """Read a partition written by :meth:`save`, checking it against its checksums."""
        arrays, manifest = load_archive(
            path, ARCHIVE_KIND, FORMAT_VERSION, "fit it again with `clusterable cluster --save`"
        )
        rule = _RULES.get(manifest.get("rule"))
        if rule is None:
            raise ValueError(f"{path} holds an unknown assignment rule {manifest.get('rule')!r}")
        common = {
            "method": manifest["method"],
            "labels_": arrays.pop("labels"),
            "rescaling": Rescaling(manifest["peak"], arrays.pop("centre"), manifest["spread"]),
            "options": manifest["options"],
        }
        return rule._restore(common, arrays, manifest)

    def _assign(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _arrays(self) -> dict[str, np.ndarray]:
        return {}

    def _settings(self) -> dict[str, Any]:
        return {}

    @classmethod
    def _restore(
        cls, common: dict[str, Any], arrays: dict[str, np.ndarray], manifest: dict[str, Any]
    ) -> Partition:
        return cls(**common, **arrays)


@dataclass
class NearestCentrePartition(Partition):
    """A point joins the cluster of its nearest centre, after an optional projection.

    ``centres`` are ``(clusters, r)`` points of the projected frame; ``projection`` is ``(d, r)``
    (None: the identity), and ``unit_rows`` normalises the projected rows (DSCL's ``T``).
    """

    RULE: ClassVar[str] = "nearest-centre"
    centres: np.ndarray
    projection: np.ndarray | None = None
    unit_rows: bool = False

    def _assign(self, z: np.ndarray) -> np.ndarray:
        u = z if self.projection is None else z @ self.projection  # (m, r)
        if self.unit_rows:
            norms = np.linalg.norm(u, axis=1, keepdims=True)
            u = u / np.where(norms > 0.0, norms, 1.0)
        return _nearest(u, self.centres)

    def _arrays(self) -> dict[str, np.ndarray]:
        arrays = {"centres": self.centres}
        if self.projection is not None:
            arrays["projection"] = self.projection
        return arrays

    def _settings(self) -> dict[str, Any]:
        return {"unit_rows": self.unit_rows}

    @classmethod
    def _restore(cls, common, arrays, manifest):
        return cls(**common, **arrays, unit_rows=manifest["unit_rows"])


@dataclass
class GaussianMixturePartition(Partition):
    """A point joins its most probable component of a diagonal-covariance Gaussian mixture."""

    RULE: ClassVar[str] = "gaussian-mixture"
    means: np.ndarray  # (k, d)
    variances: np.ndarray  # (k, d)
    weights: np.ndarray  # (k,)

    def _assign(self, z: np.ndarray) -> np.ndarray:
        mixture = GaussianMixture(n_components=self.weights.size, covariance_type="diag")
        mixture.weights_, mixture.means_, mixture.covariances_ = (
            self.weights,
            self.means,
            self.variances,
        )
        mixture.precisions_cholesky_ = 1.0 / np.sqrt(self.variances)
        return mixture.predict(z).astype(np.int64)

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"means": self.means, "variances": self.variances, "weights": self.weights}


@dataclass
class NeighbourVotePartition(Partition):
    """A point takes the majority cluster of its nearest fitted points, or noise out of reach.

    ``reference`` holds the fitted points (rescaled), ``labels_`` their clusters; ``reach`` is the
    longest edge of the kNN graph the clusters were found on.
    """

    RULE: ClassVar[str] = "neighbour-vote"
    reference: np.ndarray  # (n, d)
    reach: float
    vote_neighbours: int = VOTE_NEIGHBOURS

    def _assign(self, z: np.ndarray) -> np.ndarray:
        k = min(self.vote_neighbours, self.reference.shape[0])
        distances, rows = (
            NearestNeighbors(n_neighbors=k).fit(self.reference).kneighbors(z)
        )  # (m, k) ascending
        voters = self.labels_[rows] + 1  # (m, k); 0 is noise
        out = np.empty(z.shape[0], dtype=np.int64)
        classes = int(self.labels_.max()) + 2
        block = max(1, _BLOCK_ELEMENTS // (classes * k))
        for start in range(0, z.shape[0], block):
            votes = voters[start : start + block]  # (b, k)
            counts = np.zeros((votes.shape[0], classes), dtype=np.int64)  # (b, classes)
            first = np.full((votes.shape[0], classes), k, dtype=np.int64)  # nearest voter's rank
            for rank in range(k - 1, -1, -1):
                np.add.at(counts, (np.arange(votes.shape[0]), votes[:, rank]), 1)
                first[np.arange(votes.shape[0]), votes[:, rank]] = rank
            out[start : start + block] = np.argmax(counts * (k + 1) - first, axis=1) - 1
        nearest = distances[:, 0]
        out[nearest == 0.0] = self.labels_[rows[nearest == 0.0, 0]]
        out[nearest > self.reach] = -1
        return out

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"reference": self.reference}

    def _settings(self) -> dict[str, Any]:
        return {"reach": self.reach, "vote_neighbours": self.vote_neighbours}

    @classmethod
    def _restore(cls, common, arrays, manifest):
        return cls(
            **common,
            **arrays,
            reach=manifest["reach"],
            vote_neighbours=manifest["vote_neighbours"],
        )


_RULES: dict[str, type[Partition]] = {
    rule.RULE: rule
    for rule in (NearestCentrePartition, GaussianMixturePartition, NeighbourVotePartition)
}


def fit(
    x: Any, method: str, n_clusters: int | None = None, seed: int = 0, **options: Any
) -> Partition:
    """Cluster ``x`` with ``method`` and keep what assigns new points (see the module docstring).

    Parameters
    ----------
    x : array-like
        ``(n, d)`` finite points, numpy or torch.
    method : str
        One of `METHODS`.
    n_clusters : int, optional
        Clusters to find; required by every method but ``aas``, which chooses its own number
        and refuses one.
    seed : int
        Seed of the algorithm's random steps (``kmeans``, ``spectral``, ``gmm``).
    **options
        The algorithm's own keywords (e.g. ``k_graph`` and ``eps`` for ``aas``, ``rank`` for
        ``spectral``, ``damping`` for ``affinity_propagation``).

    Returns
    -------
    Partition
        With ``labels_`` of the fitted points; ``predict(x)`` returns them again.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0, 0.0], [0.2, 0.0], [9.0, 9.0], [9.2, 9.0]])
    >>> partition = fit(x, "kmeans", n_clusters=2)
    >>> partition.predict(np.array([[8.5, 9.5], [0.1, -0.3]])).tolist() == [
    ...     partition.labels_[2], partition.labels_[0]]
    True
    """
    method = canonical_clustering(method)
    points = check_points(x)
    n = points.shape[0]
    if method == "aas":
        if n_clusters is not None:
            raise ValueError(
                "aas finds its own number of clusters (its k_graph, eps and theta_min shape "
                "them); leave n_clusters out, or choose a method that takes it"
            )
    elif n_clusters is None:
        raise ValueError(f"{method} needs n_clusters, the number of clusters to find")
    else:
        n_clusters = check_n_clusters(n_clusters, n)
    rescaling = Rescaling.of(points)
    z = rescaling.apply(points)  # (n, d)
    record = {"n_clusters": n_clusters, "seed": seed, **options}
    common = {"method": method, "rescaling": rescaling, "options": record}
    if method == "aas":
        labels = aas(points, **options)
        k_graph = min(int(options.get("k_graph", 50)), n - 1)
        reach = float(np.sqrt(knn_graph(z, k_graph)[1].max())) if k_graph >= 1 else 0.0
        return NeighbourVotePartition(**common, labels_=labels, reference=z, reach=reach)
    if n_clusters == 1:
        return NearestCentrePartition(
            **common, labels_=np.zeros(n, dtype=np.int64), centres=z.mean(axis=0, keepdims=True)
        )
    if method == "gmm":
        labels, mixture, _ = fit_gmm(points, n_clusters, seed, **options)
        return GaussianMixturePartition(
            **common,
            labels_=labels,
            means=mixture.means_,
            variances=mixture.covariances_,
            weights=mixture.weights_,
        )
    if method == "affinity_propagation":
        labels, exemplars = fit_affinity_propagation(points, n_clusters, **options)
        return NearestCentrePartition(**common, labels_=labels, centres=z[exemplars])
    if method == "spectral":
        labels, projection, space = fit_spectral(points, n_clusters, seed, **options)
        partition = NearestCentrePartition(
            **common,
            labels_=labels,
            centres=_member_means(space, labels),
            projection=projection.components,
            unit_rows=True,
        )
    else:
        labels = kmeans(z, n_clusters, seed=seed, **options)
        partition = NearestCentrePartition(
            **common, labels_=labels, centres=_member_means(z, labels)
        )
    partition.labels_ = partition._assign(z)
    return partition


def _member_means(space: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``(clusters, r)`` mean of each cluster's rows of ``space``, clusters numbered ``0..``."""
    _, codes = np.unique(labels, return_inverse=True)
    sums = np.zeros((int(codes.max()) + 1, space.shape[1]))
    np.add.at(sums, codes, space)
    return sums / np.bincount(codes)[:, None]


def _nearest(u: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Index of the nearest centre for each row of ``u`` (ties: the lower index), in blocks."""
    out = np.empty(u.shape[0], dtype=np.int64)
    centre_norms = np.einsum("kd,kd->k", centres, centres)  # (k,)
    block = max(1, _BLOCK_ELEMENTS // max(1, centres.shape[0]))
    for start in range(0, u.shape[0], block):
        rows = u[start : start + block]  # (b, r)
        # |u - c|^2 less the row's own |u|^2, which does not change the argmin.
        scores = centre_norms - 2.0 * rows @ centres.T  # (b, k)
        out[start : start + block] = np.argmin(scores, axis=1)
    return out
