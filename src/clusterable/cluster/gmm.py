"""Gaussian mixture clustering (scikit-learn EM) with diagonal covariances."""

from __future__ import annotations

import numpy as np

from clusterable.cluster._validation import Rescaling, warn_if_fewer_clusters
from clusterable.cluster.partition import (
    GaussianMixturePartition,
    NearestCentrePartition,
    Partition,
    member_means,
)
from clusterable.cluster.registry import Clusterer, register_clusterer, run_clustering

#: Variance added to every diagonal covariance entry, relative to the mean feature variance.
RELATIVE_REG_COVAR = 1e-6


def gmm(x: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Partition points by the most probable component of a ``k``-component Gaussian mixture.

    Covariances are diagonal: a full covariance has ``d (d + 1) / 2`` parameters per component and
    is singular whenever a component holds fewer than ``d`` points, which is the common case for
    512-d embeddings; a diagonal one has ``d`` and stays well posed. ``reg_covar`` is scaled by the
    mean feature variance so that the regularisation does the same thing whatever the units of the
    embedding (scikit-learn's absolute default 1e-6 would swamp a set with variance 1e-6 and vanish
    on one with variance 1e6). EM starts from k-means (scikit-learn's default) and runs once.

    With the relative ``reg_covar`` the fit commutes with moving every point and scaling it by
    one factor, so EM runs on the points centred and scaled into ``[-1, 1]``: the variances of
    points beyond ~1e154 overflow, and an offset far from the origin (1e9 with unit spread) leaves
    too few significant digits for the covariances.

    A component may end up most probable for no point (EM is free to leave it empty, and ``x``
    may hold fewer than ``k`` distinct points); then fewer than ``k`` ids come back, with a
    :class:`~clusterable.cluster.ClusterCountWarning` naming which of the two happened.

    Parameters
    ----------
    x : array-like of shape (n, d)
        Points.
    k : int
        Number of components, ``1 <= k <= n``.
    seed : int
        Seed of the k-means initialisation; the same seed gives the same labels.

    Returns
    -------
    np.ndarray
        ``(n,)`` int64 component ids in ``[0, k)`` (fewer than ``k`` of them with a warning, see
        above).

    Raises
    ------
    ValueError
        If ``x`` is not 2-D or not finite, or ``k`` is not in ``[1, n]``.

    References
    ----------
    A. P. Dempster, N. M. Laird and D. B. Rubin, "Maximum likelihood from incomplete data via the
    EM algorithm", JRSS-B, 1977. Used for the latent-space clusterability study of COREL
    (Kenyon-Dean et al., 2018).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.concatenate([np.zeros((10, 2)), np.full((10, 2), 10.0)])
    >>> x += np.random.default_rng(0).normal(0, 0.1, x.shape)
    >>> labels = gmm(x, 2)
    >>> bool((labels[:10] == labels[0]).all() and (labels[10:] != labels[0]).all())
    True
    """
    return run_clustering(x, "gmm", k, seed=seed)


@register_clusterer("gmm", label="Gaussian mixture")
class GaussianMixtureClusterer(Clusterer):
    """:func:`gmm` as a registered estimator; its partition keeps the fitted mixture, and a new
    point joins its most probable component."""

    def cluster(self, points: np.ndarray) -> np.ndarray:
        return self.partition(points, Rescaling.of(points)).labels_

    def partition(self, points: np.ndarray, frame: Rescaling) -> Partition:
        from sklearn.mixture import GaussianMixture

        k = int(self.n_clusters)  # type: ignore[arg-type]
        if k == 1:  # one component holds every point; scikit-learn also refuses a single sample
            labels = np.zeros(points.shape[0], dtype=np.int64)
            return NearestCentrePartition(
                labels_=labels, rescaling=frame, centres=frame.apply(member_means(points, labels))
            )
        work = frame.apply(points)
        mean_variance = float(work.var(axis=0).mean())
        # Constant data has no scale to be relative to: scikit-learn's absolute default.
        reg_covar = RELATIVE_REG_COVAR * (mean_variance if mean_variance > 0.0 else 1.0)
        mixture = GaussianMixture(
            n_components=k, covariance_type="diag", reg_covar=reg_covar, random_state=self.seed
        )
        labels = mixture.fit_predict(work).astype(np.int64)
        warn_if_fewer_clusters(
            "gmm",
            labels,
            points,
            k,
            lambda missing: (
                f"EM left {missing} component(s) most probable for no point (a "
                "mixture need not use every component; ask for fewer clusters or use kmeans)"
            ),
        )
        return GaussianMixturePartition(
            labels_=labels,
            rescaling=frame,
            means=mixture.means_,
            variances=mixture.covariances_,
            weights=mixture.weights_,
        )
