"""Silhouette coefficient of a partition of embeddings, estimated on seeded items above a size."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import sparse

from clusterable._distances import squared_distances
from clusterable._ranges import check_seed
from clusterable.evaluate._inputs import Metric as Distance
from clusterable.evaluate._inputs import as_clusters, as_embeddings, as_points
from clusterable.evaluate._keywords import refuse_renamed
from clusterable.evaluate.neighbors import power_of_two_scale
from clusterable.evaluate.registry import Artefacts, register_metric

#: Distances computed under ``sample_size="auto"``: every item up to 2,236 items; above, as many
#: sampled items as keep ``sample * n`` at this budget, but at least `AUTO_MIN_SAMPLE`. The
#: silhouette values of items spread by about 0.1-0.2, so the mean of 500 of them has a standard
#: error near 0.007. An exact silhouette of larger sets costs as much as the table's kNN search
#: (measured: see benchmarks/README.md, "Evaluation").
AUTO_DISTANCE_BUDGET = 5_000_000

#: Items scored at least under ``sample_size="auto"`` (the whole set when smaller).
AUTO_MIN_SAMPLE = 500

#: Elements of the ``(items, rows)`` distance block held at once (4 MB of float32), reused from
#: block to block; the fewest sampled rows per block, below which a block's product turns into a
#: pass over all items per few rows (measured: benchmarks/README.md, "Measured defaults"), as
#: long as the block stays within `_MAX_BLOCK` elements (32 MB of float32: a million items get
#: blocks of 8 rows).
_BLOCK = 1 << 20
_MIN_BLOCK_ROWS = 128
_MAX_BLOCK = 1 << 23


def _rows_per_block(n: int, sampled: int) -> int:
    """Sampled rows per ``(n, rows)`` distance block (see `_BLOCK`), at least one."""
    return max(1, min(sampled, max(_MIN_BLOCK_ROWS, _BLOCK // n), _MAX_BLOCK // n))


@refuse_renamed(metric="distance")
def silhouette(
    emb: Any,
    clusters: Any,
    *,
    distance: Distance = "euclidean",
    sample_size: int | Literal["auto"] | None = "auto",
    seed: int = 0,
) -> float:
    """Mean silhouette coefficient ``(b - a) / max(a, b)`` over items.

    ``a`` is an item's mean distance to the other members of its cluster, ``b`` its smallest mean
    distance to another cluster. An item alone in its cluster scores 0 (Rousseeuw's convention, as
    scikit-learn); noise (id -1) items are singleton clusters and so score 0.

    Above ``sample_size`` items the mean is estimated on a seeded sample of items, each scored
    against the whole set: an unbiased estimate of the full coefficient. (scikit-learn's
    ``silhouette_score(sample_size=...)`` instead re-partitions the sample, which with many small
    clusters, e.g. Stanford Online Products' 5 items per class, leaves most sampled items alone in
    their cluster and drives the score to 0.)

    Parameters
    ----------
    emb : array-like
        ``(n, d)`` embeddings.
    clusters : array-like
        ``(n,)`` cluster ids, -1 for noise.
    distance : {"euclidean", "cosine"}
        Euclidean distance or cosine distance ``1 - cos``.
    sample_size : int, "auto" or None
        When ``n`` exceeds it, average the coefficients of this many items drawn uniformly without
        replacement. ``"auto"``: ``AUTO_DISTANCE_BUDGET / n`` of them, at least
        `AUTO_MIN_SAMPLE` (every item up to 2,236 items; 844 of 5,924; 500 of 60,502).
        ``None`` averages all items (``O(n^2 d)``).
    seed : int
        Seed of the sample, in ``[0, 2**32 - 1]``.

    Returns
    -------
    float
        In [-1, 1]; higher means tighter, better separated clusters.

    Raises
    ------
    ValueError
        If the items form fewer than 2 clusters, or as many clusters as items,
        ``sample_size`` is not a positive int, ``"auto"`` or None, or ``seed`` is out of range.

    References
    ----------
    Rousseeuw, "Silhouettes: a graphical aid to the interpretation and validation of cluster
    analysis", Journal of Computational and Applied Mathematics, 1987.
    """
    check_seed(seed, "silhouette")
    x = as_points(as_embeddings(emb), distance)
    codes = as_clusters(clusters, x.shape[0])
    return silhouette_of_codes(x, codes, distance, check_sample_size(sample_size), seed)


#: Centre offset, in units of the points' spread, up to which squared distances are taken on the
#: points as they are: the cancellation in ``|a|^2 + |b|^2 - 2 a.b`` stays below ``1e-7 * 100`` of
#: a squared distance. Farther from the origin, a centred copy is made.
SAFE_OFFSET = 10.0


def _well_placed(x: np.ndarray) -> tuple[np.ndarray, bool]:
    """``x`` itself when its squared distances keep their precision, else centred and scaled; and
    whether it was centred (a copy that is not ``x`` scaled by a power of two).

    Scaled by a power of two (exact; the silhouette is a ratio) where squares would overflow or
    underflow; centred where the points lie far from the origin relative to their spread.
    """
    unit = power_of_two_scale(x, x)
    if unit != 1.0:
        x = x * unit
    centre = x.mean(axis=0, dtype=np.float64)  # (d,)
    spread_sq = float(np.einsum("nd,nd->n", x, x).mean(dtype=np.float64) - centre @ centre)
    if centre @ centre > SAFE_OFFSET**2 * spread_sq:
        return (x - centre).astype(x.dtype), True
    return x, False


def _placed(x: np.ndarray, distance: Distance) -> tuple[np.ndarray, bool]:
    """The C-contiguous points whose distances the silhouette takes (`_well_placed` under
    ``"euclidean"``), and whether they were centred."""
    placed, centred = _well_placed(x) if distance == "euclidean" else (x, False)
    return np.ascontiguousarray(placed), centred


def scores_every_item(n: int, sample_size: int | Literal["auto"] | None) -> bool:
    """Whether the silhouette of ``n`` items averages every one of them (no sample)."""
    if sample_size == "auto":
        sample_size = max(AUTO_MIN_SAMPLE, AUTO_DISTANCE_BUDGET // n)
    return sample_size is None or n <= sample_size


def check_sample_size(
    sample_size: int | Literal["auto"] | None,
) -> int | Literal["auto"] | None:
    """``sample_size`` when it is a positive int, ``"auto"`` or None; a ValueError otherwise."""
    if sample_size == "auto" or sample_size is None:
        return sample_size
    if (
        isinstance(sample_size, bool)
        or not isinstance(sample_size, (int, np.integer))
        or sample_size < 1
    ):
        raise ValueError(
            "sample_size must be a positive number of items, 'auto' or None (every item), got "
            f"{sample_size!r}."
        )
    return sample_size


@dataclass(frozen=True)
class SilhouetteDistances:
    """The squared distances a silhouette reads, computed ahead of it and kept.

    Attributes
    ----------
    points : numpy.ndarray
        ``(n, d)`` the points they are distances of (`_well_placed` under ``"euclidean"``).
    centred : bool
        Whether ``points`` were centred (not only scaled by a power of two, as the kNN search
        scales them): then they are not the search's distances.
    blocks : list of (numpy.ndarray, numpy.ndarray)
        ``(rows, block)``: ``(n, len(rows))`` squared distances of every item to the scored
        items ``rows``, the blocks in order, every scored item once: exactly the blocks
        `silhouette_of_codes` computes one by one (`_squared_blocks`). The evaluation's kNN search
        reads them too where every item is scored (`clusterable.evaluate.table`).
    """

    points: np.ndarray
    blocks: list[tuple[np.ndarray, np.ndarray]]
    centred: bool


def _scored_items(n: int, sample_size: int | Literal["auto"] | None, seed: int) -> np.ndarray:
    """The sorted ``(s,)`` items whose silhouette is averaged (see `silhouette`)."""
    if scores_every_item(n, sample_size):
        return np.arange(n)
    if sample_size == "auto":
        sample_size = max(AUTO_MIN_SAMPLE, AUTO_DISTANCE_BUDGET // n)
    return np.sort(np.random.default_rng(seed).choice(n, sample_size, replace=False))


def _squared_blocks(
    pts: np.ndarray, scored: np.ndarray, keep: bool = False
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(rows, (n, len(rows)) squared distances of every item to rows)`` for consecutive blocks
    of the scored items; ``keep``: each block in its own array, else every block in one buffer
    made once (so a block is valid until the next is asked for)."""
    n = pts.shape[0]
    point_sq = np.einsum("nd,nd->n", pts, pts)  # (n,), for every block
    step = _rows_per_block(n, scored.size)
    buffer = None if keep else np.empty(n * step, dtype=pts.dtype)
    for s in range(0, scored.size, step):
        rows = scored[s : s + step]
        if buffer is None:
            dist = np.empty((n, rows.size), dtype=pts.dtype)
        else:
            dist = buffer[: n * rows.size].reshape(n, rows.size)
        squared_distances(pts, pts[rows], point_sq, point_sq[rows], out=dist)  # (n, c)
        yield rows, dist


def silhouette_distances(
    x: np.ndarray, distance: Distance, sample_size: int | Literal["auto"] | None, seed: int
) -> SilhouetteDistances:
    """The distances `silhouette_of_codes` would compute for these arguments, computed now and
    kept (``(n, s)`` elements for ``s`` scored items), for it and others to read."""
    pts, centred = _placed(x, distance)
    scored = _scored_items(x.shape[0], sample_size, seed)
    return SilhouetteDistances(pts, list(_squared_blocks(pts, scored, keep=True)), centred)


def silhouette_of_codes(
    x: np.ndarray,
    codes: np.ndarray,
    distance: Distance,
    sample_size: int | Literal["auto"] | None,
    seed: int,
    distances: SilhouetteDistances | None = None,
) -> float:
    """`silhouette` of validated points (`as_points`) and compact cluster codes (`as_clusters`).

    ``distances``: `silhouette_distances` of the same ``x``, ``distance``, ``sample_size`` and
    ``seed``, already computed (their blocks are overwritten).

    Raises
    ------
    ValueError
        If the items form fewer than 2 clusters, or as many clusters as items.
    """
    n = x.shape[0]
    n_clusters = int(codes.max()) + 1
    if not 2 <= n_clusters <= n - 1:
        raise ValueError(
            f"silhouette needs between 2 and n - 1 = {n - 1} clusters, got {n_clusters}; a "
            "partition into one group or into singletons has no silhouette."
        )
    if distances is None:
        pts, _ = _placed(x, distance)
        scored = _scored_items(n, sample_size, seed)
        blocks = _squared_blocks(pts, scored)
    else:
        pts = distances.points
        scored = np.concatenate([rows for rows, _ in distances.blocks])
        blocks = iter(distances.blocks)
    sizes = np.bincount(codes, minlength=n_clusters).astype(np.float64)  # (K,)
    # (K, n) 0/1 membership: one sparse product sums a block's distances per cluster, over the
    # block laid out (items, rows) so that it reads each item's distances in one run (measured
    # faster than a dense product or the (rows, items) layout: benchmarks/README.md).
    members = sparse.csr_matrix(
        (np.ones(n, dtype=pts.dtype), (codes, np.arange(n))), shape=(n_clusters, n)
    )
    scores = np.empty(scored.size, dtype=np.float64)
    s = 0
    for rows, dist in blocks:
        if distance == "cosine":
            dist *= 0.5  # |a - b|^2 = 2 - 2 cos of unit rows
        else:
            np.sqrt(dist, out=dist)
        dist[rows, np.arange(rows.size)] = 0.0  # exact zero self-distance
        sums = np.asarray(members @ dist, dtype=np.float64).T  # (c, K)
        own = codes[rows]
        own_size = sizes[own]
        a = sums[np.arange(rows.size), own] / np.maximum(own_size - 1, 1)
        means = sums / sizes
        means[np.arange(rows.size), own] = np.inf
        b = means.min(axis=1)
        denom = np.maximum(a, b)
        with np.errstate(invalid="ignore", divide="ignore"):
            s_rows = np.where(denom > 0, (b - a) / denom, 0.0)
        scores[s : s + rows.size] = np.where(own_size > 1, s_rows, 0.0)
        s += rows.size
    return float(scores.mean())


@register_metric("silhouette", needs={"partition"}, label="silhouette (clusters)")
def _table_silhouette(a: Artefacts) -> float:
    """The silhouette of the evaluation's partition; NaN with a warning where it has none."""
    assert a.clusters is not None, "the silhouette ran without the partition"
    try:
        return silhouette_of_codes(
            a.points, a.clusters, a.distance, a.silhouette_sample, a.seed, a.silhouette_distances
        )
    except ValueError as err:
        # stacklevel 4: the caller of evaluate_embeddings, which calls this through its loop.
        warnings.warn(f"silhouette left as NaN: {err}", RuntimeWarning, stacklevel=4)
        return float("nan")
