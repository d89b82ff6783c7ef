"""Open-set assignment: "none of these" (-1) for an item far from every cluster of a partition.

A saved partition (`clusterable.cluster.Partition`) puts every item in some cluster (or in noise,
for the methods that mark it). Given a largest distance ``D``, :func:`assign_within` sends an item
whose distance to the cluster it is assigned is above ``D`` to -1 instead: an item of a class the
clustered data never held.

The distance of an item to a cluster follows what the partition's rule assigns by, measured in
the units of the embeddings (the partition's frame, `clusterable.cluster.partition`, scaled back):

- ``nearest-centre``: to the cluster's centre (k-means' centroid, affinity propagation's
  exemplar); DSCL spectral clustering assigns in its projection ``T`` of unit rows, and the
  distance is measured there (between 0 and 2);
- ``gaussian-mixture``: to the component's mean;
- ``neighbour-vote`` (AAS) and ``nearest-core-point`` (HDBSCAN): to the cluster's nearest fitted
  point.

:func:`choose_max_distance` picks ``D`` on held-out labelled items of the classes the partition
knows, with `clusterable.evaluate.select_threshold`. Each cluster stands for the class most of
the held-out items it is assigned are of. Each item then gives two pairs: a *positive*, its
distance to the nearest cluster of its own class (where it belongs), and a *negative*, its
distance to the nearest cluster of another class: where it would go if its own class had no
cluster, which is what an item of an unseen class looks like to the partition. The threshold that
best separates the two (match when ``distance <= D``) is the one kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clusterable.cluster.partition import (
    GaussianMixturePartition,
    NearestCentrePartition,
    Partition,
)
from clusterable.evaluate.verification import Criterion, ThresholdChoice, select_threshold

#: Item x fitted-point distances computed at once (32 MB of float64) for the neighbour rules.
DISTANCE_BLOCK_ELEMENTS = 1 << 22


def cluster_distances(partition: Partition, points: np.ndarray) -> np.ndarray:
    """``(m, C)`` float64 distance of each point to each cluster, ``C`` one past the largest
    cluster id (a column of ``inf`` for an id no cluster has), by the rule of the module
    docstring.

    Parameters
    ----------
    partition : Partition
        A fitted partition (`clusterable.cluster.fit`, `Partition.load`).
    points : np.ndarray
        ``(m, d)`` finite embeddings of the partition's dimension.

    Raises
    ------
    ValueError
        If the partition's rule has no distance to its clusters (a rule registered elsewhere).
    """
    from scipy.spatial.distance import cdist

    rescaling = partition.rescaling
    z = rescaling.apply(points)  # (m, d) in the fitted frame
    scale = rescaling.peak * rescaling.spread  # frame distance -> embedding distance
    if isinstance(partition, NearestCentrePartition):
        u = z if partition.projection is None else z @ partition.projection  # (m, r)
        if partition.unit_rows:
            norms = np.linalg.norm(u, axis=1, keepdims=True)
            u = u / np.where(norms > 0.0, norms, 1.0)
        distances = cdist(u, partition.centres)  # (m, C)
        return distances if partition.projection is not None else distances * scale
    if isinstance(partition, GaussianMixturePartition):
        return cdist(z, partition.means) * scale
    reference = getattr(partition, "reference", None)
    if reference is None:
        raise ValueError(
            f"a {partition.RULE!r} partition has no distance to its clusters, so it cannot say "
            "'none of these'; assign without --max-distance"
        )
    labels = partition.labels_
    distances = np.full((z.shape[0], int(labels.max(initial=-1)) + 1), np.inf)
    members = np.flatnonzero(labels >= 0)
    if members.size == 0:
        return distances
    members = members[np.argsort(labels[members], kind="stable")]  # fitted points by cluster
    clusters, starts = np.unique(labels[members], return_index=True)
    # One pass over the fitted points, not one search per cluster: AAS may leave thousands.
    rows_per_block = max(1, DISTANCE_BLOCK_ELEMENTS // members.size)
    for start in range(0, z.shape[0], rows_per_block):
        block = cdist(z[start : start + rows_per_block], reference[members])  # (b, kept)
        distances[start : start + rows_per_block, clusters] = np.minimum.reduceat(
            block, starts, axis=1
        )
    return distances * scale


def assign_within(
    partition: Partition, points: np.ndarray, max_distance: float
) -> tuple[np.ndarray, np.ndarray]:
    """The partition's clusters for ``points``, with -1 for those farther than ``max_distance``
    from the cluster they are assigned.

    Parameters
    ----------
    partition : Partition
        A fitted partition.
    points : np.ndarray
        ``(m, d)`` embeddings of the partition's dimension.
    max_distance : float
        Largest distance to the assigned cluster (:func:`cluster_distances`) kept.

    Returns
    -------
    clusters : np.ndarray
        ``(m,)`` int64 cluster ids, -1 for noise and for "none of these".
    beyond : np.ndarray
        ``(m,)`` bool, True for the items sent to -1 by ``max_distance`` (not the noise).
    """
    clusters = partition.predict(points)
    assigned = clusters >= 0
    distance = np.full(len(clusters), np.nan)
    distance[assigned] = cluster_distances(partition, points[assigned])[
        np.arange(int(assigned.sum())), clusters[assigned]
    ]
    beyond = assigned & (distance > max_distance)
    return np.where(beyond, -1, clusters), beyond


def calibration_pairs(
    partition: Partition, points: np.ndarray, labels: Any
) -> tuple[np.ndarray, np.ndarray]:
    """The pairs :func:`choose_max_distance` calibrates on (module docstring): ``distances`` and
    ``same`` ``(p,)``, one positive per item whose class has a cluster, one negative per item
    for which a cluster of another class exists. Items labelled -1 (or ``"-1"``) are left out.

    Parameters
    ----------
    partition : Partition
        A fitted partition.
    points : np.ndarray
        ``(m, d)`` embeddings of held-out items of the classes the partition knows.
    labels : array-like
        ``(m,)`` their classes (integers or strings).
    """
    labels = np.asarray(labels)
    known = labels.astype(str) != "-1"
    codes = np.unique(labels[known], return_inverse=True)[1]  # (m',) class numbers
    points = points[known]
    distances = cluster_distances(partition, points)  # (m', C)
    assigned = partition.predict(points)
    owner = np.full(distances.shape[1], -1)  # the class each cluster stands for (-1: none)
    for cluster in range(distances.shape[1]):
        members = codes[assigned == cluster]
        if members.size:
            owner[cluster] = np.bincount(members).argmax()
    own = owner[None, :] == codes[:, None]  # (m', C)
    positives = np.where(own, distances, np.inf).min(axis=1)
    negatives = np.where(~own, distances, np.inf).min(axis=1)
    positives, negatives = positives[np.isfinite(positives)], negatives[np.isfinite(negatives)]
    same = np.concatenate([np.ones(len(positives), bool), np.zeros(len(negatives), bool)])
    return np.concatenate([positives, negatives]), same


def choose_max_distance(
    partition: Partition, points: np.ndarray, labels: Any, criterion: Criterion
) -> ThresholdChoice:
    """The largest distance to a cluster that best separates held-out items' own clusters from
    other classes' clusters (module docstring), by `select_threshold` with ``criterion``.

    Parameters
    ----------
    partition : Partition
        A fitted partition.
    points : np.ndarray
        ``(m, d)`` embeddings of held-out labelled items of the classes the partition knows.
    labels : array-like
        ``(m,)`` their classes.
    criterion : {"f1", "accuracy", "balanced_accuracy"} or ("fmr", eps)
        What `select_threshold` optimises (``("fmr", eps)``: at most a share ``eps`` of the
        other-class distances accepted).

    Raises
    ------
    ValueError
        If the items give no positive pair (no cluster stands for any of their classes) or no
        negative pair (every cluster stands for each item's own class).
    """
    distances, same = calibration_pairs(partition, points, labels)
    if not same.any() or same.all():
        missing = "own-cluster" if not same.any() else "other-class"
        raise ValueError(
            f"the calibration items give no {missing} distance to calibrate on: give labelled "
            "items of several of the classes the partition clustered"
        )
    return select_threshold(distances, same, criterion)
