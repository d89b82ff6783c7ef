"""Squared Euclidean distances between two sets of rows, the same whatever the thread count.

k-means seeding and the silhouette take their distances from numpy's BLAS: its products come out
bit for bit the same on one thread or two (checked at 16 to 512 dimensions), so an evaluation
split over processes with fewer threads each gives exactly the single-process table. faiss's
bundled OpenBLAS does not (about 1 % of a block's distances differ in the last bit between one
and two threads); the kNN search, which uses it, re-scores its near-ties exactly instead.
"""

from __future__ import annotations

import numpy as np


def squared_distances(
    a: np.ndarray,
    b: np.ndarray,
    a_sq: np.ndarray | None = None,
    b_sq: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``(m, n)`` squared distances ``|a_i|^2 + |b_j|^2 - 2 a_i.b_j`` of ``(m, d)`` and ``(n, d)``
    rows of one dtype, in that dtype, clipped at 0. ``a_sq``, ``b_sq``: the rows' ``|.|^2`` when
    the caller keeps them across calls; ``out``: a C-contiguous ``(m, n)`` array to write them
    to (a buffer reused across calls is given its memory once)."""
    out = np.matmul(a, b.T, out=out)  # (m, n)
    out *= -2.0
    out += np.einsum("nd,nd->n", b, b) if b_sq is None else b_sq
    out += (np.einsum("md,md->m", a, a) if a_sq is None else a_sq)[:, None]
    return np.maximum(out, 0.0, out=out)
