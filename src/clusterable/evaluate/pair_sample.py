"""The pairs a verification view judges: all of them up to a cap, beyond it a seeded sample.

A pair is two distinct items, *positive* when they share a class. The pairs of a set are every
``i < j``; those of a query/gallery evaluation are every query with every gallery item (query and
gallery items are distinct items, so a query never pairs with itself). Up to `MAX_PAIRS` pairs all
are taken. Beyond, `MAX_PAIRS` pairs are drawn without replacement, stratified by positive and
negative with proportional allocation: the sample holds ``round(MAX_PAIRS * P / T)`` of the ``P``
positive pairs among ``T`` (at least one when there is one), each stratum uniform. Proportional
allocation keeps the share of positives of the whole set, so precision and F1 on the sample
estimate the whole set's; FMR and FNMR are rates within one stratum and any allocation keeps them.

Drawing needs no list of all pairs: the items are sorted by class, so each row item's positive
partners form one run of columns and its negative partners the columns around it. A pair's
position within its stratum maps to its row through the cumulative per-row counts (one
``searchsorted``), then to its column by an offset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clusterable.evaluate._inputs import Metric, as_embeddings, as_labels, as_points, to_numpy

__all__ = ["MAX_PAIRS", "PairDistances", "pair_distances"]

#: Pairs taken at most; a set with more is sampled (2,000 items have 1,999,000 pairs).
MAX_PAIRS = 2_000_000

#: Pair coordinates gathered per block: 2 MiB of float64 differences, which stay in cache.
_BLOCK_VALUES = 1 << 18


@dataclass(frozen=True, eq=False)
class PairDistances:
    """Pairs of items with their distance and whether they share a class.

    Attributes
    ----------
    distances : numpy.ndarray
        ``(m,)`` float64 distance of each pair.
    same : numpy.ndarray
        ``(m,)`` bool, True for a positive pair (one class).
    first, second : numpy.ndarray
        ``(m,)`` int64 rows of the pair's two items in the embeddings given (``first`` is the
        query of a query/gallery pair).
    total : int
        Pairs of the whole set (``m`` when all are taken).
    positives : int
        Positive pairs of the whole set.
    seed : int or None
        Seed of the sample; None when every pair is taken.
    distance : str
        ``"euclidean"`` or ``"cosine"`` (``1 - cos``).
    """

    distances: np.ndarray
    same: np.ndarray
    first: np.ndarray
    second: np.ndarray
    total: int
    positives: int
    seed: int | None
    distance: str

    def describe(self) -> str:
        """Which pairs these are, e.g. ``"all 64,620 pairs, 6,314 same-class"`` or ``"a sample
        of 2,000,000 of 49,995,000 pairs (seed 0), 20,011 same-class"``."""
        positives = f"{int(self.same.sum()):,} same-class"
        if self.seed is None:
            return f"all {self.total:,} pairs, {positives}"
        return (
            f"a sample of {len(self.distances):,} of {self.total:,} pairs (seed {self.seed}), "
            f"{positives}"
        )


def pair_distances(
    embeddings: Any,
    labels: Any,
    *,
    queries: Any = None,
    distance: Metric = "euclidean",
    max_pairs: int = MAX_PAIRS,
    seed: int = 0,
) -> PairDistances:
    """The distances of all pairs of a set, or of a seeded stratified sample of ``max_pairs``.

    Parameters
    ----------
    embeddings : array-like
        ``(n, d)`` embeddings.
    labels : array-like
        ``(n,)`` classes (integers or text).
    queries : array-like, optional
        ``(n,)`` booleans: the pairs are then every query (True) with every gallery item (False).
    distance : {"euclidean", "cosine"}
        Euclidean distance, or cosine distance ``1 - cos`` (rows l2-normalised first), as the
        evaluation and the search index measure them.
    max_pairs : int
        Pairs taken at most (`MAX_PAIRS`); beyond, a sample of that many.
    seed : int
        Seed of the sample.

    Returns
    -------
    PairDistances
        The pairs, positives first, each stratum in row order.

    Raises
    ------
    ValueError
        If the inputs do not match (one label and one query flag per item), ``max_pairs`` is not
        a positive integer, or the set has no pair (fewer than two items, no query or no gallery).

    Examples
    --------
    >>> pairs = pair_distances([[0.0], [1.0], [3.0]], [0, 0, 1])
    >>> pairs.describe(), pairs.distances.tolist(), pairs.same.tolist()
    ('all 3 pairs, 1 same-class', [1.0, 3.0, 2.0], [True, False, False])
    """
    points = as_points(as_embeddings(embeddings, "embeddings"), distance, "embeddings")
    codes, _ = as_labels(labels, points.shape[0])
    if isinstance(max_pairs, bool) or not isinstance(max_pairs, (int, np.integer)) or max_pairs < 1:
        raise ValueError(f"max_pairs must be a positive integer, got {max_pairs!r}.")
    rows, columns, window, block = _partners(codes, _query_flags(queries, codes.shape[0]))
    width = window[1] - window[0]  # (r,) partners of each row
    same_count = block[1] - block[0]  # (r,) positive partners of each row
    positives, total = int(same_count.sum()), int(width.sum())
    if total == 0:
        raise ValueError(
            "these items form no pair: give at least two items (with queries, at least one query "
            "and one gallery item)."
        )
    rng = np.random.default_rng(seed) if total > max_pairs else None
    take_positive, take_negative = _allocation(positives, total, max_pairs if rng else total)
    picked = []
    for count, stratum, take in (
        (same_count, positives, take_positive),
        (width - same_count, total - positives, take_negative),
    ):
        flat = (
            np.arange(stratum, dtype=np.int64)
            if rng is None
            else np.sort(rng.choice(stratum, size=take, replace=False))
        )
        picked.append(_row_and_offset(count, flat))
    (pos_row, pos_offset), (neg_row, neg_offset) = picked
    neg_column = window[0][neg_row] + neg_offset  # (m_neg,) skipping the row's own class run
    neg_column += np.where(neg_column >= block[0][neg_row], same_count[neg_row], 0)
    first = rows[np.concatenate((pos_row, neg_row))]
    second = columns[np.concatenate((block[0][pos_row] + pos_offset, neg_column))]
    return PairDistances(
        distances=_distances(points, first, second, distance),
        same=np.arange(first.shape[0]) < pos_row.shape[0],
        first=first,
        second=second,
        total=total,
        positives=positives,
        seed=None if rng is None else int(seed),
        distance=distance,
    )


def _query_flags(queries: Any, n: int) -> np.ndarray | None:
    if queries is None:
        return None
    flags = to_numpy(queries, "queries")
    if flags.dtype != np.bool_ or flags.shape != (n,):
        raise ValueError(
            f"queries must hold one boolean per item ({n}), got dtype {flags.dtype} and shape "
            f"{flags.shape}; True marks a query, False a gallery item."
        )
    return flags


def _partners(
    codes: np.ndarray, queries: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Each row item's partners among the columns, sorted by class: ``(rows, columns, window,
    block)``, the row item and column item of row ``r`` and column ``c`` being ``rows[r]`` and
    ``columns[c]``; row ``r`` pairs with the columns ``[window[0][r], window[1][r])``, of which
    ``[block[0][r], block[1][r])`` share its class."""
    if queries is None:
        columns = np.argsort(codes, kind="stable")  # (n,) items sorted by class
        rows, sorted_codes = columns, codes[columns]
        later = np.arange(1, len(rows) + 1)  # a row pairs with the items after it
        window = (later, np.full(len(rows), len(rows)))
        block = (later, np.searchsorted(sorted_codes, sorted_codes, side="right"))
        return rows, columns, window, block
    rows = np.flatnonzero(queries)  # (q,)
    gallery = np.flatnonzero(~queries)
    columns = gallery[np.argsort(codes[gallery], kind="stable")]  # (g,) sorted by class
    sorted_codes = codes[columns]
    window = (np.zeros(len(rows), np.int64), np.full(len(rows), len(columns)))
    block = (
        np.searchsorted(sorted_codes, codes[rows], side="left"),
        np.searchsorted(sorted_codes, codes[rows], side="right"),
    )
    return rows, columns, window, block


def _allocation(positives: int, total: int, size: int) -> tuple[int, int]:
    """Positive and negative pairs to take of a sample of ``size`` (proportional allocation,
    rounded half up in exact integers; each stratum present when it exists)."""
    if size == total:
        return positives, total - positives
    take = (2 * size * positives + total) // (2 * total)
    if positives:
        take = max(take, 1)
    if total > positives:
        take = min(take, size - 1)
    take = min(take, positives)
    return take, size - take


def _row_and_offset(count: np.ndarray, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The row of each position ``flat`` in the concatenation of the rows' ``count`` partners,
    and its offset within that row."""
    ends = np.cumsum(count, dtype=np.int64)  # (r,)
    row = np.searchsorted(ends, flat, side="right")  # (m,)
    return row, flat - (ends[row] - count[row])


def _distances(
    points: np.ndarray, first: np.ndarray, second: np.ndarray, distance: str
) -> np.ndarray:
    """``(m,)`` float64 distances of the pairs, from float64 differences (exact up to rounding,
    unlike ``|a|^2 + |b|^2 - 2 a.b``), a block of pairs at a time."""
    squared = np.empty(first.shape[0], dtype=np.float64)
    step = max(1, _BLOCK_VALUES // points.shape[1])
    for start in range(0, first.shape[0], step):
        part = slice(start, start + step)
        diff = points[first[part]].astype(np.float64) - points[second[part]]  # (b, d)
        squared[part] = np.einsum("bd,bd->b", diff, diff)
    # Rows l2-normalised: |a - b|^2 = 2 - 2 cos, so the cosine distance 1 - cos is half of it.
    return np.sqrt(squared) if distance == "euclidean" else squared / 2.0
