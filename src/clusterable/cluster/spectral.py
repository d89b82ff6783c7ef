"""DSCL normalized spectral clustering (Law et al., 2017, Algorithm 2)."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np

from clusterable.cluster._validation import Rescaling, check_points, warn_if_fewer_clusters
from clusterable.cluster.auto import AUTO_MAX_CLUSTERS, by_eigengap, check_auto_settings
from clusterable.cluster.kmeans import MAX_ITER, N_INIT, kmeans_restarts
from clusterable.cluster.partition import NearestCentrePartition, member_means
from clusterable.cluster.registry import Clusterer, register_clusterer, run_clustering
from clusterable.device import DeviceSpec, check_device_name, search_device

#: How the k-means step of Algorithm 2 runs on the projected rows (the library's k-means
#: defaults), as `describe_kmeans` states it under a table.
KMEANS_STEP: dict[str, Any] = {"init": "k-means++", "n_init": N_INIT, "max_iter": MAX_ITER}


def spectral_embedding(x: np.ndarray, rank: int | None = None) -> np.ndarray:
    """Steps 1-4 of DSCL Algorithm 2: row-normalised leading left singular vectors of centred ``x``.

    The left singular vectors of ``M_t`` do not change when ``M_t`` is scaled, so the SVD runs on
    ``M_t`` scaled into ``[-1, 1]``: on finite values near 1e300 LAPACK's SVD does not converge,
    and the rank tolerance below is relative anyway.

    Parameters
    ----------
    x : array-like of shape (n, d)
        Test-set representations ``F_t``.
    rank : int, optional
        Number of singular vectors ``r`` to keep. ``None`` (default) keeps ``r = rank(M_t)``, as
        Algorithm 2 does; an int keeps ``min(rank, rank(M_t))``.

    Returns
    -------
    np.ndarray
        ``(n, r)`` float64 matrix ``T`` whose rows have unit norm (a row of ``U_t`` that is exactly
        zero, a point on the mean of a rank-deficient set, stays zero).

    Raises
    ------
    ValueError
        If ``x`` is not 2-D or not finite, or ``rank`` is not a positive integer or None.

    References
    ----------
    M. T. Law, R. Urtasun and R. S. Zemel, "Deep Spectral Clustering Learning", ICML 2017,
    Algorithm 2 (steps 1-4) and Section 4.2.
    """
    return _project(check_points(x), _checked_rank(rank, allow_k=False))[1]


@dataclass(frozen=True)
class SpectralProjection:
    """Steps 1-4 of Algorithm 2 as a map that also takes points it was not fitted on.

    ``M_t = U_t S V^T`` gives ``U_t = M_t V S^-1``, so a new point ``x`` lands at the unit row
    ``T(x) = normalise(rescale(x) V_r S_r^-1)``; on the fitted points this is the ``T`` of
    :func:`spectral_embedding`.
    """

    rescaling: Rescaling
    components: np.ndarray  # (d, r): V_r S_r^-1 in the rescaled frame

    def transform(self, points: np.ndarray) -> np.ndarray:
        """``(m, r)`` rows of ``T`` for ``(m, d)`` points."""
        return _unit_rows(self.rescaling.apply(points) @ self.components)


def _project(points: np.ndarray, rank: int | None) -> tuple[SpectralProjection, np.ndarray]:
    """The projection of Algorithm 2 fitted on ``points`` and their rows of ``T``."""
    return _Spectrum.of(points, Rescaling.of(points)).project(rank)


@dataclass(frozen=True)
class _Spectrum:
    """The thin SVD ``M_t = U S V^T`` of the centred points (steps 1-2 of Algorithm 2)."""

    rescaling: Rescaling
    u: np.ndarray  # (n, m)
    singular_values: np.ndarray  # (m,) descending
    vt: np.ndarray  # (m, d)
    numerical_rank: int

    @classmethod
    def of(cls, points: np.ndarray, rescaling: Rescaling) -> _Spectrum:
        """The SVD of ``points`` (float32 or float64) centred and rescaled, in float64.

        The numerical rank (step 2) counts the singular values above the larger of two
        tolerances, so that ``U_t U_t^T = M_t M_t^+`` holds for the directions the points have:
        numpy's ``matrix_rank`` tolerance ``max(s) max(n, d) eps`` for the float64 SVD, and the
        rounding of the points to the precision they were given in, ``eps ||X||_F`` (in the
        rescaled frame): rounding each entry moves every singular value by at most ``eps / 2
        ||X||_F`` (Weyl). Without the second, float32 embeddings of a rank-10 set in 64
        dimensions had rank 64, and step 3 scaled 54 directions of rounding noise up to weigh as
        much as the 10 (ARI 0.89 for 20 clusters, where float64 gives 1.0).
        """
        centred = rescaling.apply(points)  # M_t (step 1), scaled into [-1, 1]
        u, singular_values, vt = np.linalg.svd(centred, full_matrices=False)
        eps = np.finfo(np.float64).eps
        decomposition = singular_values.max(initial=0.0) * max(centred.shape) * eps
        # ||X||_F^2 = ||M_t||_F^2 + n ||offset||^2: M_t's columns sum to zero.
        offset = rescaling.centre / rescaling.spread  # (d,) the mean, in the rescaled frame
        given = np.sqrt((singular_values**2).sum() + len(centred) * (offset @ offset))
        tolerance = max(decomposition, np.finfo(points.dtype).eps * given)
        numerical_rank = int((singular_values > tolerance).sum())
        return cls(rescaling, u, singular_values, vt, numerical_rank)

    def project(self, rank: int | None) -> tuple[SpectralProjection, np.ndarray]:
        """Steps 3-4 with ``min(rank, rank(M_t))`` vectors (None: all ``rank(M_t)``)."""
        r = self.numerical_rank if rank is None else min(int(rank), self.numerical_rank)
        projection = SpectralProjection(self.rescaling, self.vt[:r].T / self.singular_values[:r])
        return projection, _unit_rows(self.u[:, :r])  # T from U_t (step 3), step 4


def _fewer_rows_reason(embedding: np.ndarray, k: int, missing: int) -> str:
    """Why k-means of the ``(n, r)`` unit rows ``T`` of Algorithm 2 left ``missing`` of ``k``
    clusters empty, the user's points holding ``k`` distinct points: ``T`` holds fewer (rank-1
    points have rows of -1 and +1 only), or k-means left them empty."""
    distinct = np.unique(embedding, axis=0).shape[0]
    if distinct < k:
        return (
            f"its unit rows of rank {embedding.shape[1]} (Algorithm 2, steps 3-4) hold only "
            f"{distinct} distinct points; ask for at most {distinct} clusters, or use kmeans"
        )
    return f"{missing} centroid(s) of the k-means step kept no point"


def _unit_rows(u: np.ndarray) -> np.ndarray:
    """Rows scaled to unit norm; an exactly zero row (a point on the mean) stays zero."""
    norms = np.linalg.norm(u, axis=1, keepdims=True)
    return u / np.where(norms > 0.0, norms, 1.0)


def spectral(
    x: np.ndarray,
    k: int | Literal["auto"] | None,
    seed: int = 0,
    *,
    rank: int | Literal["k"] | None = "k",
    max_clusters: int = AUTO_MAX_CLUSTERS,
    device: DeviceSpec = "auto",
) -> np.ndarray:
    """Partition points with DSCL's normalized spectral clustering (Algorithm 2).

    Mean-centre the points, take the leading left singular vectors ``U_t`` of the centred matrix
    ``M_t``, l2-normalise the rows of ``U_t`` and run :func:`kmeans` on them.

    How many singular vectors to keep:

    - ``rank="k"`` (default): ``r = min(k, rank(M_t))``, the Ng-Jordan-Weiss choice.
    - ``rank=None``: ``r = rank(M_t)``, Algorithm 2 as printed (``M_t M_t^+ = U_t U_t^T``). The
      paper sets the embedding size to the number of classes on CUB-200 and Cars-196, where this
      is ``r = d = k``. When ``d > k`` it keeps every direction of the embedding, each scaled to
      the same unit norm (``U_t`` is orthonormal): the directions that only hold within-class
      noise weigh as much as the class directions and the partition collapses. On three
      well-separated blobs in 20-D (``make_blobs(60, 20, centers=3, random_state=0)``)
      ``rank=None`` gives ARI 0.06 and ``rank="k"`` gives 1.0. The two rules agree whenever
      ``k >= rank(M_t)``: when ``d = k``, and on Stanford Online Products (d = 512, k = 11,316).
    - an int ``r``: ``min(r, rank(M_t))`` vectors.

    Parameters
    ----------
    x : array-like of shape (n, d)
        Test-set representations ``F_t``.
    k : int or "auto"
        Number of clusters, ``1 <= k <= n``; ``"auto"`` (or None) chooses it by the eigengap of
        the centred points' spectrum (`clusterable.cluster.auto`, up to ``max_clusters``).
    seed : int
        Seed of the k-means step.
    rank : "k", int or None
        Number of singular vectors kept, see above.
    max_clusters : int
        For ``k="auto"``: the largest count considered.
    device : torch.device or str, optional
        Where the k-means step's assignments run, as :func:`~clusterable.cluster.kmeans`'s
        ``device`` (``"auto"``: CUDA where torch sees a GPU, else the CPU); no ambient device is
        read.

    Returns
    -------
    np.ndarray
        ``(n,)`` int64 cluster ids in ``[0, k)``.

    Raises
    ------
    ValueError
        If ``x`` is not 2-D or not finite, ``k`` is not in ``[1, n]``, ``rank`` is not ``"k"``,
        None or a positive int, or all points are equal (the centred matrix is zero, so there is
        no singular vector to cluster) while ``k > 1``.

    References
    ----------
    M. T. Law, R. Urtasun and R. S. Zemel, "Deep Spectral Clustering Learning", ICML 2017,
    Algorithm 2 and Section 4.2 (inspired by Ng, Jordan and Weiss, NIPS 2001).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.normal(0, 0.1, (20, 3)), rng.normal(5, 0.1, (20, 3))])
    >>> labels = spectral(x, 2)
    >>> bool((labels[:20] == labels[0]).all() and (labels[20:] != labels[0]).all())
    True
    """
    return run_clustering(
        x, "spectral", k, seed=seed, device=device, rank=rank, max_clusters=max_clusters
    )


@register_clusterer("spectral", auto="eigengap", label="DSCL spectral clustering")
class SpectralClusterer(Clusterer):
    """DSCL Algorithm 2 as a registered estimator (see :func:`spectral`).

    Its partition projects a new point like the fitted ones, ``T(x) = normalise(rescale(x) V_r
    S_r^-1)``, and gives it the nearest member mean of the clusters in ``T``.
    """

    def __init__(
        self,
        n_clusters: int | Literal["auto"] | None = None,
        seed: int = 0,
        *,
        rank: int | Literal["k"] | None = "k",
        max_clusters: int = AUTO_MAX_CLUSTERS,
        device: DeviceSpec = "auto",
    ) -> None:
        super().__init__(n_clusters, seed)
        self.rank = _checked_rank(rank, allow_k=True)
        check_auto_settings(max_clusters, 2)
        check_device_name(device)
        self.max_clusters = int(max_clusters)
        self.device = device

    def cluster(self, points: np.ndarray) -> np.ndarray:
        return self._fit(points, Rescaling.of(points))[0]

    def partition(self, points: np.ndarray, frame: Rescaling) -> NearestCentrePartition:
        labels, projection, embedding = self._fit(points, frame)
        partition = NearestCentrePartition(
            labels_=labels,
            rescaling=frame,
            centres=member_means(embedding, labels),
            projection=projection.components,
            unit_rows=True,
        )
        partition.labels_ = partition.assign(points)
        return partition

    def _fit(
        self, points: np.ndarray, frame: Rescaling
    ) -> tuple[np.ndarray, SpectralProjection, np.ndarray]:
        """Labels, the fitted projection and the ``(n, r)`` rows of ``T`` k-means partitioned."""
        spectrum = _Spectrum.of(points, frame)
        top = spectrum.singular_values[: spectrum.numerical_rank]
        k = self._count(lambda: by_eigengap(top, self.max_clusters))
        projection, embedding = spectrum.project(k if self.rank == "k" else self.rank)
        if k == 1:
            return np.zeros(points.shape[0], dtype=np.int64), projection, embedding
        if embedding.shape[1] == 0:
            raise ValueError(
                "all points are equal, so the mean-centred matrix has rank 0 and spectral "
                f"clustering has nothing to partition into {k} clusters; use k=1 or check the "
                "embeddings"
            )
        device = search_device(self.device)
        step = KMEANS_STEP
        labels = kmeans_restarts(
            embedding,
            k,
            self.seed,
            step["n_init"],
            step["max_iter"],
            step["init"],
            device,
            None,
            warn=False,
        )
        warn_if_fewer_clusters(
            "spectral", labels, points, k, lambda missing: _fewer_rows_reason(embedding, k, missing)
        )
        return labels, projection, embedding


@overload
def _checked_rank(rank: object, *, allow_k: Literal[False]) -> int | None: ...
@overload
def _checked_rank(rank: object, *, allow_k: bool) -> int | Literal["k"] | None: ...
def _checked_rank(rank: object, *, allow_k: bool) -> int | Literal["k"] | None:
    if rank is None or (allow_k and rank == "k"):
        return rank
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 1:
        choices = "'k', None (Algorithm 2's rank(M_t))" if allow_k else "None (rank(M_t))"
        raise ValueError(f"rank must be {choices} or a positive int, got {rank!r}")
    return int(rank)
