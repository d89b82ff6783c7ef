"""Lloyd's iterations of k-means: assign, move each centroid to its members' mean, until no
assignment changes; an empty cluster's centroid is moved onto a far point.

References
----------
S. P. Lloyd, "Least squares quantization in PCM", IEEE Trans. Inf. Theory, 1982.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import sparse

from clusterable._optional import installed
from clusterable.cluster._kmeans_assignments import Assignments
from clusterable.cluster._kmeans_frame import KMeansFrame


class MemberSums:
    """Each cluster's sum of member points (float64) and member count, kept up to date by moving
    only the points whose label changed: late Lloyd iterations change few."""

    def __init__(self, frame: KMeansFrame, k: int) -> None:
        self.frame, self.k = frame, k
        self.sums = np.zeros((k, frame.points.shape[1]))  # (k, d)
        self.counts = np.zeros(k, dtype=np.int64)
        self.labels = np.full(frame.points.shape[0], -1, dtype=np.int64)  # -1: not counted yet

    def means(self, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(k, d)`` float32 member means and ``(k,)`` member counts of ``labels``."""
        moved = np.flatnonzero(labels != self.labels)
        for start, stop in self.frame.chunks(moved.size):
            rows = moved[start:stop]
            was = self.labels[rows]
            counted = was >= 0
            # (k, 2m) +1/-1 matrix: one sparse product adds the moved rows to their new clusters
            # and takes the counted ones from their old.
            change = sparse.csr_matrix(
                (
                    np.concatenate([np.ones(rows.size), -np.ones(int(counted.sum()))]),
                    (
                        np.concatenate([labels[rows], was[counted]]),
                        np.concatenate([np.arange(rows.size), np.flatnonzero(counted)]),
                    ),
                ),
                shape=(self.k, rows.size),
            )
            self.sums += change @ self.frame.rows(rows).astype(np.float64)
            self.counts += np.bincount(labels[rows], minlength=self.k)
            self.counts -= np.bincount(was[counted], minlength=self.k)
        self.labels = labels.copy()
        means = self.sums / np.maximum(self.counts, 1)[:, None]
        return means.astype(np.float32), self.counts.copy()


def relocate_empty_centroids(
    frame: KMeansFrame, centroids: np.ndarray, empty: np.ndarray, squared: np.ndarray
) -> int:
    """Move each empty centroid onto a distinct point far from its own centroid; return how many.

    A point at positive distance from every centroid joins the centroid put on it at the next
    assignment, so the cluster is no longer empty. With fewer distinct points than clusters there
    may be too few such points: those centroids stay where they are.
    """
    order = np.argsort(-squared, kind="stable")
    far = order[squared[order] > 0]
    wanted = empty.size
    take = min(far.size, 2 * wanted)
    while True:
        rows = frame.rows(far[:take])
        _, first = np.unique(rows, axis=0, return_index=True)
        distinct = np.sort(first)[:wanted]
        if distinct.size == wanted or take == far.size:
            break
        take = min(far.size, 2 * take)
    centroids[empty[: distinct.size]] = rows[distinct]
    return int(distinct.size)


def lloyd(
    frame: KMeansFrame,
    seeds: np.ndarray,
    max_iter: int,
    device: torch.device,
    backend: str | None = None,
    start: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, float]:
    """Lloyd iterations from ``seeds`` ``(k, d)``; labels of the last assignment and its inertia.

    Assignments run in faiss on the CPU (torch without the ``faiss`` extra) and in torch on any
    other device (``backend`` overrides). ``start``: the rows of the seed points and each point's
    nearest other points, for `Assignments.start_from`.
    """
    backend = backend or ("faiss" if device.type == "cpu" and installed("faiss") else "torch")
    centroids = seeds
    k = centroids.shape[0]
    assign = Assignments(frame, k, device, backend)
    if start is not None:
        assign.start_from(*start)
    members = MemberSums(frame, k)
    previous = None
    iteration = 0
    while True:
        labels, squared = assign(centroids)
        iteration += 1
        counts = np.bincount(labels, minlength=k)
        empty = np.flatnonzero(counts == 0)
        # An empty cluster is moved, whatever the budget, as long as a distinct point is free for
        # it: the inertia falls at each move, so this ends.
        if (
            empty.size
            and iteration < 2 * max_iter
            and relocate_empty_centroids(frame, centroids, empty, squared)
        ):
            previous = None
            continue
        if iteration >= max_iter or (previous is not None and np.array_equal(labels, previous)):
            return labels, float(squared.sum())
        previous = labels
        means, counts = members.means(labels)
        centroids = np.where(counts[:, None] > 0, means, centroids)
