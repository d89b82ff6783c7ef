"""Synthetic 2-D sets of the papers' toy experiments.

- :func:`two_class_subclusters`: MsDNN Fig. 1, two classes of two Gaussian sub-classes each.
- :func:`crescents_and_gaussians`: OPML Fig. 5, 3 crescents + 3 Gaussians + uniform noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Sub-class centres of :func:`two_class_subclusters`: class 0 on the left, class 1 on the right.
SUBCLUSTER_CENTRES = np.array([[-8.0, 6.0], [-8.0, -6.0], [8.0, 6.0], [8.0, -6.0]])


@dataclass(frozen=True)
class SyntheticSet:
    """Points with class labels and, where the set has them, sub-class labels.

    Attributes
    ----------
    x : np.ndarray
        ``(n, 2)`` float64 points.
    labels : np.ndarray
        ``(n,)`` int64 class ids; -1 marks noise points.
    subclasses : np.ndarray
        ``(n,)`` int64 sub-class ids (equal to ``labels`` for sets without sub-classes).
    """

    x: np.ndarray
    labels: np.ndarray
    subclasses: np.ndarray


def two_class_subclusters(n: int = 500, std: float = 1.5, seed: int = 0) -> SyntheticSet:
    """MsDNN Fig. 1: two classes, each made of two Gaussian sub-classes, in 2-D.

    Sub-classes 0 and 1 form class 0, sub-classes 2 and 3 form class 1 (centres in
    :data:`SUBCLUSTER_CENTRES`, 12 apart within a class, 16 across). The paper gives 500 points
    and kernel scales sigma = 1 (sub-classes kept) and sigma = 25 (merged), not the centres.

    Parameters
    ----------
    n : int
        Number of points, split as evenly as possible over the four sub-classes.
    std : float
        Standard deviation of each Gaussian.
    seed : int
        Random seed.
    """
    rng = np.random.default_rng(seed)
    subclasses = np.arange(n) % len(SUBCLUSTER_CENTRES)
    x = SUBCLUSTER_CENTRES[subclasses] + std * rng.standard_normal((n, 2))
    return SyntheticSet(x=x, labels=subclasses // 2, subclasses=subclasses)


def crescents_and_gaussians(
    n_per_cluster: int = 150, n_noise: int = 300, seed: int = 0
) -> SyntheticSet:
    """OPML Fig. 5: 3 crescents and 3 Gaussians (900 points) plus uniform noise (label -1).

    The paper shows the set but not its parameters: here the crescents are half-rings of radius 1.5
    (Gaussian jitter 0.12) and the Gaussians have standard deviation 0.35, laid out on a 3 x 2 grid
    with cells 4 apart; noise is uniform over the bounding box of the clusters, padded by 1.

    Parameters
    ----------
    n_per_cluster : int
        Points in each of the six clusters.
    n_noise : int
        Uniform noise points, labelled -1.
    seed : int
        Random seed.
    """
    rng = np.random.default_rng(seed)
    parts, labels = [], []
    for c in range(3):
        angle = rng.uniform(0.0, np.pi, n_per_cluster)
        flip = -1.0 if c % 2 else 1.0  # alternate opening up and down
        ring = 1.5 * np.column_stack([np.cos(angle), flip * np.sin(angle)])
        ring += rng.normal(0.0, 0.12, ring.shape) + [4.0 * c, 0.0]
        parts.append(ring)
        labels.append(np.full(n_per_cluster, c))
    for c in range(3):
        blob = rng.normal(0.0, 0.35, (n_per_cluster, 2)) + [4.0 * c, 4.0]
        parts.append(blob)
        labels.append(np.full(n_per_cluster, 3 + c))
    clusters = np.concatenate(parts)
    low, high = clusters.min(0) - 1.0, clusters.max(0) + 1.0
    noise = rng.uniform(low, high, (n_noise, 2))
    x = np.concatenate([clusters, noise])
    y = np.concatenate([*labels, np.full(n_noise, -1)]).astype(np.int64)
    return SyntheticSet(x=x, labels=y, subclasses=y.copy())
