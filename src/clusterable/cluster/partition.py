"""Partitions that persist: clusters fitted once, a rule that assigns new points, save and load.

`clusterable.cluster.fit` returns a `Partition`: the fitted points' ``labels_`` and what the
algorithm's own assignment rule needs, so that ``predict`` puts a new point where the algorithm
would have put it. Each rule is a subclass here or in its algorithm's module (a subclass names
its ``RULE`` and is found again by `Partition.load`):

- ``nearest-centre``: the nearest centre, after an optional projection: k-means (the member
  means), DSCL spectral clustering (Algorithm 2's projection ``T(x) = normalise(rescale(x) V_r
  S_r^-1)``, then the member means in ``T``), affinity propagation (the exemplars);
- ``gaussian-mixture``: the most probable component of the fitted mixture (GMM);
- ``neighbour-vote``: the majority cluster of the nearest fitted points, noise beyond the reach of
  the graph the clusters were found on (AAS, and any clusterer registered as a plain function);
- ``nearest-core-point``: HDBSCAN (`clusterable.cluster.hdbscan`).

The stored labels are the rule applied to the fitted points (for k-means and spectral one more
Lloyd assignment after the algorithm's own, never a higher k-means cost); the rules that mark
noise (``neighbour-vote``, ``nearest-core-point``) give a point equal bit for bit to a fitted
point that point's label (`identical_rows`). So ``predict`` on the fitted points returns
``labels_``. All rules work in the frame the algorithms fit in (the points centred and scaled
into ``[-1, 1]``, `Rescaling`), so they hold at any scale.

A partition fitted by `clusterable.cluster.fit` also knows its fitted points again
(`Partition.fitted_among`): by each point's projections on a few fixed directions of the fitted
frame (``fitted_keys``, 32 bytes a point), which the same items embedded again match to within
float32 rounding. ``assign --max-distance auto`` says so when it calibrates on items the
partition was fitted on.

A partition is saved as one checksummed ``.npz`` file (`clusterable.archive`), at the path given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from clusterable.archive import load_archive, save_archive
from clusterable.cluster._validation import Rescaling, check_points

#: Fitted points that vote on a new point's cluster under the ``neighbour-vote`` rule (AAS).
VOTE_NEIGHBOURS = 10

#: What `Partition.save` writes, and the version of its layout.
ARCHIVE_KIND = "clusterable partition"
FORMAT_VERSION = 1

#: Points assigned per block: bounds the ``(block, clusters)`` distance matrix and the float64
#: copy of each block in the fitted frame.
_BLOCK_ELEMENTS = 1 << 24

#: Directions the fitted points are projected on, to know them again (`Partition.fitted_among`).
KEY_DIRECTIONS = 8

#: How near each projection of a point (in the fitted frame, the points within ``[-1, 1]``) must
#: be to a fitted point's for the point to be taken for it: a hundred times the float32 rounding
#: of the same items embedded again in other batches (~1e-6), far below the gaps between distinct
#: items in all the directions at once.
KEY_TOLERANCE = 1e-4

#: Assignment rules by name, filled by each subclass of `Partition` that names its ``RULE``.
_RULES: dict[str, type[Partition]] = {}


@dataclass(kw_only=True)
class Partition:
    """Clusters fitted on a set of points, with the rule that assigns new points to them.

    Attributes
    ----------
    labels_ : np.ndarray
        ``(n,)`` int64 cluster ids of the fitted points (-1: noise, AAS and HDBSCAN).
    rescaling : Rescaling
        The frame the clusters live in: the fitted points centred and scaled into ``[-1, 1]``.
    method : str
        The registered clusterer that found the clusters (`available_clusterings`).
    options : dict
        ``n_clusters`` as asked (an int, ``"auto"`` or None), ``seed``, the algorithm's options,
        and for ``"auto"`` the count it chose (``chosen_n_clusters``) and by what criterion.
    model : str, optional
        The checksum of the model whose embeddings were clustered (`clusterable.trained_run.
        ModelIdentity`), saved with the partition so that ``assign`` refuses another model's
        embeddings; None when the points came with no identity.
    fitted_keys : np.ndarray, optional
        ``(n, keys)`` float32 projections of the fitted points (`fitted_keys_of`), by which
        `fitted_among` knows them again; None in a partition not fitted by
        `clusterable.cluster.fit`, or saved before partitions kept them.
    """

    RULE: ClassVar[str] = ""
    #: Names of the array fields and of the scalar settings a rule saves.
    ARRAYS: ClassVar[tuple[str, ...]] = ()
    SETTINGS: ClassVar[tuple[str, ...]] = ()
    labels_: np.ndarray
    rescaling: Rescaling
    method: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    fitted_keys: np.ndarray | None = field(default=None, repr=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.RULE:
            if _RULES.get(cls.RULE, cls) is not cls:
                raise RuntimeError(f"assignment rule {cls.RULE!r} is defined twice")
            _RULES[cls.RULE] = cls

    @property
    def n_features(self) -> int:
        """Dimension of the points the partition was fitted on."""
        return int(self.rescaling.centre.size)

    @property
    def n_clusters(self) -> int:
        """Number of clusters found (noise not counted)."""
        return int(np.unique(self.labels_[self.labels_ >= 0]).size)

    def predict(self, x: Any) -> np.ndarray:
        """Cluster ids of new points, ``(m,)`` int64 (-1: noise, for the methods that mark it).

        On the fitted points it returns ``labels_``: a point equal bit for bit to a fitted point
        gets that point's label, noise included (see the module docstring).

        Raises
        ------
        ValueError
            If ``x`` is not a finite ``(m, d)`` array of the fitted dimension.
        """
        return self.assign(self._checked(x))

    def _checked(self, x: Any) -> np.ndarray:
        """``x`` as finite ``(m, d)`` points of the fitted dimension, refused otherwise."""
        points = check_points(x)
        if points.shape[1] != self.n_features:
            raise ValueError(
                f"this partition was fitted on {self.n_features}-dimensional points, got "
                f"{points.shape[1]}; embed the items with the model the partition was fitted on"
            )
        return points

    def assign(self, points: np.ndarray) -> np.ndarray:
        """`predict` for points already checked: ``(m, d)`` finite, of the fitted dimension.

        Works through blocks, so the float64 copy in the fitted frame is one block at a time.
        """
        out = np.empty(points.shape[0], dtype=np.int64)
        step = max(1, _BLOCK_ELEMENTS // (8 * max(1, points.shape[1])))
        for start in range(0, points.shape[0], step):
            block = self.rescaling.apply(points[start : start + step])  # (b, d)
            out[start : start + step] = self._assign(block)
        return out

    def fitted_keys_of(self, points: np.ndarray) -> np.ndarray:
        """``(m, keys)`` float32 projections of ``points`` ``(m, d)``, already checked (finite, of
        the fitted dimension), in the fitted frame on `key_directions`: what ``fitted_keys`` holds
        of the fitted points. Works through blocks, as `assign` does."""
        directions = key_directions(points.shape[1])  # (d, keys)
        out = np.empty((points.shape[0], directions.shape[1]), dtype=np.float32)
        step = max(1, _BLOCK_ELEMENTS // (8 * max(1, points.shape[1])))
        for start in range(0, points.shape[0], step):
            block = self.rescaling.apply(points[start : start + step])  # (b, d)
            out[start : start + step] = block @ directions  # (b, keys)
        return out

    def fitted_among(self, x: Any) -> np.ndarray | None:
        """``(m,)`` whether each of the points ``x`` ``(m, d)`` is one the partition was fitted
        on: each of its projections within `KEY_TOLERANCE` of that point's (the same item embedded
        again, in other batches or on another device, is one). None where the partition keeps no
        ``fitted_keys``.

        Raises
        ------
        ValueError
            If ``x`` is not a finite ``(m, d)`` array of the fitted dimension.
        """
        from scipy.spatial import cKDTree

        if self.fitted_keys is None:
            return None
        keys = self.fitted_keys_of(self._checked(x))  # (m, keys)
        distance, _ = cKDTree(self.fitted_keys).query(
            keys, k=1, p=np.inf, distance_upper_bound=KEY_TOLERANCE
        )
        return np.isfinite(distance)  # inf where none is within the tolerance

    def save(self, path: str | os.PathLike[str]) -> os.PathLike[str]:
        """Write the partition to one checksummed ``.npz`` file at ``path``, atomically; returns
        the path."""
        arrays = {"labels": self.labels_, "centre": self.rescaling.centre, **self._arrays()}
        if self.fitted_keys is not None:
            arrays["fitted_keys"] = self.fitted_keys
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
            model=self.model,
            **self._settings(),
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Partition:
        """Read a partition written by :meth:`save`, checking it against its checksums.

        Raises
        ------
        FileNotFoundError
            If there is no such file.
        ValueError
            If the file is damaged, is not a partition, or holds a rule this installation does
            not know (a clusterer registered by code that is not imported).
        """
        arrays, manifest = load_archive(
            path, ARCHIVE_KIND, FORMAT_VERSION, "fit it again with `clusterable cluster --save`"
        )
        rule = _RULES.get(manifest.get("rule", ""))
        if rule is None:
            raise ValueError(
                f"{path} holds an unknown assignment rule {manifest.get('rule')!r}: import the "
                "module that registers its clusterer first"
            )
        common = {
            "method": manifest["method"],
            "labels_": arrays.pop("labels"),
            "rescaling": Rescaling(manifest["peak"], arrays.pop("centre"), manifest["spread"]),
            "options": manifest["options"],
            "model": manifest.get("model"),  # None in files saved before identities
            "fitted_keys": arrays.pop("fitted_keys", None),  # None in files saved before keys
        }
        return rule._restore(common, arrays, manifest)

    def _assign(self, z: np.ndarray) -> np.ndarray:
        """``(b,)`` cluster ids of ``(b, d)`` points in the fitted frame."""
        raise NotImplementedError

    def _arrays(self) -> dict[str, np.ndarray]:
        arrays = {name: getattr(self, name) for name in self.ARRAYS}
        return {name: array for name, array in arrays.items() if array is not None}

    def _settings(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.SETTINGS}

    @classmethod
    def _restore(
        cls, common: dict[str, Any], arrays: dict[str, np.ndarray], manifest: dict[str, Any]
    ) -> Partition:
        keywords: dict[str, Any] = {**common, **arrays}
        return cls(**keywords, **{name: manifest[name] for name in cls.SETTINGS})


@dataclass(kw_only=True)
class NearestCentrePartition(Partition):
    """A point joins the cluster of its nearest centre, after an optional projection.

    ``centres`` are ``(clusters, r)`` points of the projected frame; ``projection`` is ``(d, r)``
    (None: the identity), and ``unit_rows`` normalises the projected rows (DSCL's ``T``).
    """

    RULE: ClassVar[str] = "nearest-centre"
    ARRAYS: ClassVar[tuple[str, ...]] = ("centres", "projection")
    SETTINGS: ClassVar[tuple[str, ...]] = ("unit_rows",)
    centres: np.ndarray
    projection: np.ndarray | None = None
    unit_rows: bool = False

    def _assign(self, z: np.ndarray) -> np.ndarray:
        u = z if self.projection is None else z @ self.projection  # (m, r)
        if self.unit_rows:
            norms = np.linalg.norm(u, axis=1, keepdims=True)
            u = u / np.where(norms > 0.0, norms, 1.0)
        return _nearest(u, self.centres)


@dataclass(kw_only=True)
class GaussianMixturePartition(Partition):
    """A point joins its most probable component of a diagonal-covariance Gaussian mixture."""

    RULE: ClassVar[str] = "gaussian-mixture"
    ARRAYS: ClassVar[tuple[str, ...]] = ("means", "variances", "weights")
    means: np.ndarray  # (k, d)
    variances: np.ndarray  # (k, d)
    weights: np.ndarray  # (k,)

    def _assign(self, z: np.ndarray) -> np.ndarray:
        from sklearn.mixture import GaussianMixture

        mixture = GaussianMixture(n_components=self.weights.size, covariance_type="diag")
        mixture.weights_, mixture.means_, mixture.covariances_ = (
            self.weights,
            self.means,
            self.variances,
        )
        mixture.precisions_cholesky_ = 1.0 / np.sqrt(self.variances)
        return mixture.predict(z).astype(np.int64)


@dataclass(kw_only=True)
class NeighbourVotePartition(Partition):
    """A point takes the majority cluster of its nearest fitted points, or noise out of reach.

    ``reference`` holds the fitted points (rescaled), ``labels_`` their clusters; ``reach`` is the
    longest edge of the kNN graph the clusters were found on (inf: no point is out of reach).
    Noise counts as a cluster of its own in the vote; a tie goes to the cluster whose member is
    nearest; a point equal bit for bit to a fitted point takes that point's label, noise included
    (the first such fitted point's where the fitted points repeat, `identical_rows`).
    """

    RULE: ClassVar[str] = "neighbour-vote"
    ARRAYS: ClassVar[tuple[str, ...]] = ("reference",)
    SETTINGS: ClassVar[tuple[str, ...]] = ("reach", "vote_neighbours")
    reference: np.ndarray  # (n, d)
    reach: float = float("inf")
    vote_neighbours: int = VOTE_NEIGHBOURS

    def _assign(self, z: np.ndarray) -> np.ndarray:
        """``(m,)`` majority clusters of the nearest fitted points of ``(m, d)`` points in the
        fitted frame, -1 beyond ``reach``; a fitted point's own label where the row is one."""
        from sklearn.neighbors import NearestNeighbors

        k = min(self.vote_neighbours, self.reference.shape[0])
        search = NearestNeighbors(n_neighbors=k).fit(self.reference)
        distances, rows = search.kneighbors(z)  # (m, k) ascending
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
        out[distances[:, 0] > self.reach] = -1
        fitted = identical_rows(self.reference, z)  # (m,)
        out[fitted >= 0] = self.labels_[fitted[fitted >= 0]]
        return out


def member_means(points: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``(clusters, d)`` float64 mean of each cluster's rows of ``points``, clusters numbered
    ``0..`` in the order of their ids (noise, -1, is left out)."""
    kept = labels >= 0
    _, codes = np.unique(labels[kept], return_inverse=True)
    sums = np.zeros((int(codes.max(initial=-1)) + 1, points.shape[1]))
    np.add.at(sums, codes, points[kept].astype(np.float64))
    return sums / np.bincount(codes)[:, None]


def identical_rows(reference: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``(m,)`` index of the row of ``reference`` ``(n, d)`` equal bit for bit to each row of
    ``z`` ``(m, d)`` (the same dtype), -1 where none is; where rows of ``reference`` repeat, the
    first of them.

    The fitted points and the points given again pass through the same `Rescaling.apply`, so a
    fitted point given again is found here. Rows are compared as bytes, not by a distance: a
    nearest-neighbour search computes ``|a|^2 + |b|^2 - 2ab``, whose rounding leaves a point some
    1e-7 from itself, and can rank a distinct point as close as that ahead of it.
    """
    keys = _row_keys(reference)  # (n,)
    order = np.argsort(keys, kind="stable")  # (n,); equal rows in their order in reference
    wanted = _row_keys(z)  # (m,)
    candidate = order[np.minimum(np.searchsorted(keys, wanted, sorter=order), order.size - 1)]
    return np.where(keys[candidate] == wanted, candidate, -1)  # (m,)


def key_directions(dimension: int) -> np.ndarray:
    """``(dimension, keys)`` unit directions a partition projects its fitted points on
    (``Partition.fitted_keys``): the coordinates themselves up to `KEY_DIRECTIONS` dimensions, else
    the DCT-II basis vectors of frequencies 1 to `KEY_DIRECTIONS`, fixed in closed form (a random
    generator's stream may change between numpy versions, and saved keys must match)."""
    if dimension <= KEY_DIRECTIONS:
        return np.eye(dimension)
    coordinate = np.arange(dimension)[:, None] + 0.5  # (d, 1)
    frequency = np.arange(1, KEY_DIRECTIONS + 1)[None, :]  # (1, keys)
    basis = np.cos(np.pi * coordinate * frequency / dimension)  # (d, keys)
    return basis / np.linalg.norm(basis, axis=0)


def _row_keys(a: np.ndarray) -> np.ndarray:
    """``(n,)`` the rows of ``a`` ``(n, d)`` as opaque byte strings, equal iff the rows are equal
    bit for bit."""
    rows = np.ascontiguousarray(a)
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()


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
