"""Pseudo-labels for unsupervised metric learning: a t-SNE map, then AAS (or k-means) on it.

Dutta, Harandi, Sekhar, "Unsupervised Deep Metric Learning via Orthogonality based Probabilistic
Loss", IEEE TAI 2020: Sec. III (AAS gives the pseudo-labels ``c(x)``), Sec. V-A.5 (t-SNE is run
before AAS, "used only for performing the clustering; the metric is then learned on the original
data"), Sec. V-C (k-means with k = number of classes as the ablation).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from clusterable._ranges import check_seed
from clusterable.cluster import aas, kmeans
from clusterable.cluster._validation import check_points
from clusterable.device import DeviceSpec
from clusterable.tsne import tsne_map

PseudoLabelMethod = Literal["aas", "kmeans"]


def pseudo_labels(
    features: np.ndarray,
    method: PseudoLabelMethod = "aas",
    tsne: bool = True,
    seed: int = 0,
    *,
    n_clusters: int | None = None,
    k_graph: int = 50,
    gamma: float = 100.0,
    eps: float = 0.65,
    theta_min: float = 0.0,
    device: DeviceSpec = "auto",
) -> np.ndarray:
    """Cluster unlabelled features into pseudo-labels; -1 marks AAS noise.

    Parameters
    ----------
    features : array-like of shape (n, d)
        The items to label (the paper: l2-normalised raw pixels, or CNN features).
    method : {"aas", "kmeans"}
        Authority Ascent Shift (the paper's choice; finds the number of clusters itself and can
        mark noise), or k-means with ``n_clusters`` (the paper's ablation, Sec. V-C).
    tsne : bool
        Cluster a seeded 2-D t-SNE map of the features (the paper's pipeline, Sec. V-A.5) rather
        than the features themselves.
    seed : int
        Seed of t-SNE and k-means (AAS is deterministic), in ``[0, 2**32 - 1]``.
    n_clusters : int, optional
        k of k-means; required with ``method="kmeans"``.
    k_graph, gamma, eps, theta_min : float
        AAS settings (:func:`clusterable.cluster.aas`); the defaults are the paper's
        (k_graph = 50 as in MOM, gamma = 100, eps = 0.65 without noise removal). Noise items
        (-1) appear only with ``theta_min > 0``, e.g. the paper's ``eps=0.9, theta_min=5``.
    device : str or torch.device
        Where k-means assigns (:func:`clusterable.cluster.kmeans`); ``"auto"``: a GPU when torch
        sees one. AAS and t-SNE run on the CPU.

    Returns
    -------
    np.ndarray
        ``(n,)`` int64 pseudo-labels ``0, 1, ...``; -1 for noise (AAS only). Noise items must be
        left out of triplet mining; every miner of :mod:`clusterable.unsupervised` does so.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.normal(0, 0.1, (60, 5)), rng.normal(3, 0.1, (60, 5))])
    >>> y = pseudo_labels(x, "kmeans", tsne=False, n_clusters=2)
    >>> len(set(y[:60])), len(set(y[60:])), bool(y[0] != y[60])
    (1, 1, True)
    """
    check_seed(seed, "pseudo_labels")
    if method not in ("aas", "kmeans"):
        raise ValueError(f"method must be 'aas' or 'kmeans', got {method!r}")
    if method == "kmeans" and n_clusters is None:
        raise ValueError(
            "k-means pseudo-labels need the number of clusters: pass n_clusters=K (the paper's "
            "ablation uses the number of classes)"
        )
    points = tsne_map(features, seed) if tsne else check_points(features, dtype=np.float32)
    if method == "kmeans" and n_clusters is not None:  # checked above
        return kmeans(points, n_clusters, seed=seed, device=device)
    return aas(points, k_graph=k_graph, gamma=gamma, eps=eps, theta_min=theta_min)
