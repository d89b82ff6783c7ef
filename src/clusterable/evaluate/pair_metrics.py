"""ROC AUC and FNMR@FMR over every pair of an evaluated set, exact, in memory that does not grow
with ``n^2``.

The pairs are those of `clusterable.evaluate.evaluate_embeddings`: every ``i < j`` of the set,
or every query x gallery pair of a query/gallery evaluation (a query never pairs with itself);
a *positive* pair is one of one class. Both scores read the float32 distance of each pair,
computed on a fixed grid of ``TILE x TILE`` tiles (`_PairGrid`), so that each pass sees
bit-identical values (numpy's products do not depend on the thread count:
`clusterable._distances`). No distance is kept: the passes count. Where the evaluation's
search runs on a GPU (`clusterable.device.search_device`), the same passes run there in torch
(`_TorchGrid`: larger tiles, its own products, the same in every pass, and no wait for the
device within a pass).

Each distance's float32 bits are its order key (distances are non-negative, so the bits as an
unsigned integer sort as the values do). Pass 1 counts positives and negatives in ``2^16`` coarse
bins (the top 16 bits); a pair whose two distances fall in different bins is then ordered
exactly. Refinement passes count the low 16 bits of the bins that matter, in batches of
``REFINE_CELLS`` cells per pass: for the AUC, every bin that holds positives and negatives; for
FNMR@FMR, the bins that hold the needed order statistics of the negatives and the bin of the
threshold among the positives. After its refinement a bin's counts are per exact key: ties are
exact ties. A radix selection (Hoare's selection by buckets), as open-metric-learning's
brute force would sort all pairs.

- ``roc_auc`` is the Mann-Whitney statistic ``P(d_neg > d_pos) + 0.5 P(d_neg == d_pos)``
  ("smaller distance = more similar"), equal to ``sklearn.metrics.roc_auc_score(same, -d)``.
- ``fnmr@fmr=EPS`` is `clusterable.evaluate.verification.fnmr_at_fmr` (open-metric-learning's
  definition): the share of positives at or above the ``EPS``-quantile (linear interpolation,
  numpy's) of the negative distances.

Distances: euclidean, and under ``distance="cosine"`` (rows l2-normalised) ``|a - b|^2 / 2``,
which is ``1 - cos`` of the pair.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from clusterable._distances import squared_distances
from clusterable.device import DeviceSpec, search_device
from clusterable.evaluate._inputs import Metric as Distance
from clusterable.evaluate._inputs import as_embeddings, as_labels, as_points, to_numpy
from clusterable.evaluate._torch_search import ieee_float32_products
from clusterable.evaluate.registry import Artefacts, register_metric
from clusterable.evaluate.verification import as_rates

__all__ = ["PairScores", "pair_scores"]

#: Side of the grid's square tiles: ``TILE^2`` float32 distances (16 MB) at a time.
TILE = 2048
#: The side on a GPU (`_TorchGrid`): 64 MB of distances a tile, about 0.5 GB of work arrays.
GPU_TILE = 4096

#: Refined cells per pass: ``2^22`` exact keys, 64 coarse bins (two int64 arrays of 32 MB).
REFINE_CELLS = 1 << 22

_LOW_BITS = 16
_BINS = 1 << (32 - _LOW_BITS)
_LOW_MASK = np.uint32((1 << _LOW_BITS) - 1)
#: Key of the tile entries that are no pair (a diagonal tile's lower half): above every finite
#: distance's key (at most ``0x7F800000``, infinity), in a coarse bin no count reads.
_NO_PAIR = 0x7FFFFFFF
_NO_PAIR_BIN = _NO_PAIR >> _LOW_BITS


@dataclass(frozen=True)
class PairScores:
    """The pair scores of one evaluation.

    Attributes
    ----------
    roc_auc : float or None
        ROC AUC over every pair (None where it was not asked).
    fnmr : dict of float to float
        FNMR at each false match rate asked.
    positives, negatives : int
        Pairs of one class, and of two.
    passes : int
        Passes over the pairs it took (1 + the refinements).
    """

    roc_auc: float | None
    fnmr: dict[float, float]
    positives: int
    negatives: int
    passes: int


class _PairGrid:
    """The pairs of one evaluation as a fixed grid of tiles of float32 distance keys.

    Items are put in class order, so that the positives of a tile are a few rectangles (one per
    class the tile's rows and columns share) and no per-pair class test is needed.
    """

    def __init__(
        self, points: np.ndarray, codes: np.ndarray, is_query: np.ndarray | None, distance: Distance
    ) -> None:
        x = np.ascontiguousarray(points, dtype=np.float32)
        self.symmetric = is_query is None
        rows = np.arange(x.shape[0]) if is_query is None else np.flatnonzero(is_query)
        cols = rows if is_query is None else np.flatnonzero(~is_query)
        rows = rows[np.argsort(codes[rows], kind="stable")]
        cols = cols[np.argsort(codes[cols], kind="stable")]
        self.rows, self.cols = x[rows], x[cols]  # (m, d), (g, d)
        self.row_sq = np.einsum("nd,nd->n", self.rows, self.rows)  # (m,)
        self.col_sq = np.einsum("nd,nd->n", self.cols, self.cols)  # (g,)
        self.row_codes, self.col_codes = codes[rows], codes[cols]
        n_classes = int(codes.max()) + 1
        self.col_start = np.searchsorted(self.col_codes, np.arange(n_classes + 1))  # (C + 1,)
        self.halve = distance == "cosine"
        self.buffer = np.empty(TILE * TILE, np.float32)
        self.not_pair = ~np.triu(np.ones((TILE, TILE), bool), k=1)  # (TILE, TILE)

    def counts(self) -> tuple[int, int]:
        """``(positives, negatives)``: pairs of one class, of two."""
        row_n = np.bincount(self.row_codes, minlength=self.col_start.size - 1)
        col_n = np.diff(self.col_start)
        same = row_n * (row_n - 1) // 2 if self.symmetric else row_n * col_n
        m, g = len(self.rows), len(self.cols)
        total = m * (m - 1) // 2 if self.symmetric else m * g
        return int(same.sum()), int(total - same.sum())

    def tiles(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(keys, positive_keys)`` of each tile: ``(rows, cols)`` uint32 keys (`_NO_PAIR` where
        there is no pair) and the 1-D keys of its positive pairs."""
        m, g = len(self.rows), len(self.cols)
        for r0 in range(0, m, TILE):
            r1 = min(r0 + TILE, m)
            for c0 in range(r0 if self.symmetric else 0, g, TILE):
                c1 = min(c0 + TILE, g)
                keys = self._keys(r0, r1, c0, c1)
                yield keys, self._positives(keys, r0, r1, c0, c1)

    def _keys(self, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        out = self.buffer[: (r1 - r0) * (c1 - c0)].reshape(r1 - r0, c1 - c0)
        sq = squared_distances(
            self.rows[r0:r1], self.cols[c0:c1], self.row_sq[r0:r1], self.col_sq[c0:c1], out=out
        )  # (rows, cols)
        if self.halve:
            sq *= 0.5
        else:
            np.sqrt(sq, out=sq)
        keys = sq.view(np.uint32)
        keys &= np.uint32(0x7FFFFFFF)  # -0.0 is 0.0
        if self.symmetric and r0 == c0:
            keys[self.not_pair[: r1 - r0, : c1 - c0]] = np.uint32(_NO_PAIR)
        return keys

    def _positives(self, keys: np.ndarray, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """Keys of the tile's positive pairs: one rectangle per class its rows and columns
        share."""
        codes = self.row_codes[r0:r1]
        first = np.searchsorted(codes, codes, side="left")[np.r_[True, codes[1:] != codes[:-1]]]
        shared = codes[first]  # (classes of the rows,)
        lo = np.maximum(self.col_start[shared], c0)
        hi = np.minimum(self.col_start[shared + 1], c1)
        ends = np.r_[first[1:], len(codes)]
        parts = [
            keys[a:b, c - c0 : e - c0].ravel()
            for a, b, c, e in zip(first, ends, lo, hi, strict=True)
            if c < e
        ]
        return np.concatenate(parts) if parts else np.empty(0, np.uint32)

    def count(self, lut: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """One pass: ``(all, positive)`` int64 counts per coarse bin (``lut`` None), or per
        exact key of the bins ``lut`` gives a slot (``slot * 2^16 + low bits``)."""
        cells = _BINS if lut is None else int(lut.max() + 1) << _LOW_BITS
        every = np.zeros(cells, np.int64)
        positive = np.zeros(cells, np.int64)
        for keys, pos_keys in self.tiles():
            for total, found in (
                (every, _cells(keys.ravel(), lut)),
                (positive, _cells(pos_keys, lut)),
            ):
                tile = np.bincount(found)  # up to the largest cell found: no zeros beyond it
                total[: tile.size] += tile
        return every, positive


class _TorchGrid(_PairGrid):
    """The same counts on a GPU, in torch on ``device``, over tiles of `GPU_TILE` (fewer,
    larger tiles than the CPU's: a GPU pass is bound by its launches and its waits, not by a
    cache).

    A pass never waits for the device: counts are added by ``scatter_add_`` (``torch.bincount``
    reads its input's maximum back to the host first), the cells of a refinement pass come from
    a table of bases (the bins not refined sent to a spare block, dropped at the end) rather
    than a mask, and a tile's positives are counted with their same-class mask as weights, in
    the tiles where the two ranges of classes meet (items are in class order), rather than
    picked out.
    """

    def __init__(
        self,
        points: np.ndarray,
        codes: np.ndarray,
        is_query: np.ndarray | None,
        distance: Distance,
        device: torch.device,
    ) -> None:
        super().__init__(points, codes, is_query, distance)
        self.device = device
        self.tile = GPU_TILE
        put = functools.partial(torch.as_tensor, device=device)
        self.rows_t, self.cols_t = put(self.rows), put(self.cols)  # (m, d), (g, d)
        self.row_sq_t, self.col_sq_t = put(self.row_sq), put(self.col_sq)
        self.row_codes_t, self.col_codes_t = put(self.row_codes), put(self.col_codes)
        upper = torch.ones(self.tile, self.tile, dtype=torch.bool, device=device).triu_(1)
        self.not_pair_t = upper.logical_not_()  # (tile, tile)
        self.one = torch.ones((), dtype=torch.int64, device=device)

    def count(self, lut: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        cells = _BINS if lut is None else int(lut.max() + 1) << _LOW_BITS
        base = None
        if lut is not None:  # slot << 16, or the spare block at `cells` for a bin not refined
            bases = np.where(lut >= 0, lut.astype(np.int64) << _LOW_BITS, cells)
            base = torch.as_tensor(bases, device=self.device)
        spare = 0 if lut is None else 1 << _LOW_BITS
        every = torch.zeros(cells + spare, dtype=torch.int64, device=self.device)
        positive = torch.zeros_like(every)
        m, g, tile = len(self.rows), len(self.cols), self.tile
        with ieee_float32_products():  # float32 distances, whatever TF32 setting the user made
            for r0 in range(0, m, tile):
                r1 = min(r0 + tile, m)
                for c0 in range(r0 if self.symmetric else 0, g, tile):
                    c1 = min(c0 + tile, g)
                    found = _torch_cells(self._tile_keys(r0, r1, c0, c1), base).ravel()
                    every.scatter_add_(0, found, self.one.expand(found.numel()))
                    if self.row_codes[r1 - 1] >= self.col_codes[c0] and (
                        self.col_codes[c1 - 1] >= self.row_codes[r0]
                    ):
                        same = self.row_codes_t[r0:r1, None] == self.col_codes_t[None, c0:c1]
                        positive.scatter_add_(0, found, same.ravel().long())
        return every[:cells].cpu().numpy(), positive[:cells].cpu().numpy()

    def _tile_keys(self, r0: int, r1: int, c0: int, c1: int) -> torch.Tensor:
        sq = self.rows_t[r0:r1] @ self.cols_t[c0:c1].T  # (rows, cols), as squared_distances
        sq.mul_(-2.0).add_(self.col_sq_t[c0:c1]).add_(self.row_sq_t[r0:r1, None]).clamp_(min=0)
        sq = sq.mul_(0.5) if self.halve else sq.sqrt_()
        keys = sq.view(torch.int32) & 0x7FFFFFFF  # -0.0 is 0.0
        if self.symmetric and r0 == c0:
            keys.masked_fill_(self.not_pair_t[: r1 - r0, : c1 - c0], _NO_PAIR)
        return keys


def _torch_cells(keys: torch.Tensor, base: torch.Tensor | None) -> torch.Tensor:
    """The int64 cell of each key (int32, non-negative): its coarse bin (``base`` None), or its
    bin's base plus its low bits."""
    coarse = (keys >> _LOW_BITS).long()
    if base is None:
        return coarse
    return base[coarse] + (keys & int(_LOW_MASK))


def _cells(keys: np.ndarray, lut: np.ndarray | None) -> np.ndarray:
    """The cell of each key: its coarse bin, or its slot's exact key (keys of other bins
    dropped)."""
    coarse = keys >> np.uint32(_LOW_BITS)
    if lut is None:
        return coarse
    slot = lut[coarse]
    kept = slot >= 0
    return (slot[kept].astype(np.int64) << _LOW_BITS) | (keys[kept] & _LOW_MASK)


@dataclass
class _Counts:
    """Coarse counts of the negatives and positives, and the refined bins kept."""

    neg: np.ndarray  # (2^16,) the last bin (no pairs) zeroed
    pos: np.ndarray
    fine: dict[int, tuple[np.ndarray, np.ndarray]]  # bin -> (neg, pos) per low 16 bits

    def order_statistic(self, rank: int) -> float | int:
        """The value of the negatives' ``rank``-th smallest (0-based), or the bin to refine."""
        before = np.cumsum(self.neg)
        b = int(np.searchsorted(before, rank, side="right"))
        if b not in self.fine:
            return b
        within = rank - (int(before[b - 1]) if b else 0)
        low = int(np.searchsorted(np.cumsum(self.fine[b][0]), within, side="right"))
        return float(np.uint32((b << _LOW_BITS) | low).view(np.float32))

    def positives_at_least(self, threshold: float) -> int | None:
        """Positives whose distance is ``>= threshold``; None if its bin is not refined."""
        t32 = np.float32(threshold)
        if float(t32) < threshold:
            t32 = np.nextafter(t32, np.float32(np.inf))
        key = int(t32.view(np.uint32)) & 0x7FFFFFFF
        b, low = key >> _LOW_BITS, key & int(_LOW_MASK)
        above = int(self.pos[b + 1 :].sum())
        if self.pos[b] == 0:
            return above
        if b not in self.fine:
            return None
        return above + int(self.fine[b][1][low:].sum())


def _lerp(a: float, b: float, t: float) -> float:
    """numpy.quantile's linear interpolation, step for step (so that the threshold is its)."""
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def _quantile_ranks(negatives: int, q: float) -> tuple[int, int, float]:
    """``(previous, next, gamma)`` of numpy's ``method="linear"`` quantile ``q`` of
    ``negatives`` sorted values."""
    virtual = (negatives - 1) * q
    previous = int(np.floor(virtual))
    if virtual >= negatives - 1:
        return negatives - 1, negatives - 1, 0.0
    return previous, previous + 1, float(virtual - previous)


def _twice_auc(neg: np.ndarray, pos: np.ndarray, ties: bool = True) -> float:
    """Twice the AUC numerator of the pairs counted (along the last axis: counts per key, or per
    coarse bin with ``ties=False``, the pairs inside one bin left out), in key order:
    ``2 * #(d_neg > d_pos) + #(d_neg == d_pos)``. In int64, exact while
    ``2 P N < 2^63`` (any two-class set to 92,000 items, SOP's 60,502 x 11,316 classes easily);
    in float64 above."""
    total = int(neg.sum()) * int(pos.sum())
    kind = np.int64 if 2 * total < 2**63 else np.float64
    neg, pos = neg.astype(kind), pos.astype(kind)
    before = np.cumsum(pos, axis=-1) - pos  # positives at smaller keys of the bin
    return float((2 * neg * before + (neg * pos if ties else 0)).sum())


def pair_scores(
    emb: Any,
    labels: Any,
    queries: Any = None,
    *,
    distance: Distance = "euclidean",
    roc_auc: bool = True,
    fmr: float | Sequence[float] = (),
    device: DeviceSpec = "auto",
) -> PairScores:
    """ROC AUC and FNMR at each ``fmr`` over every pair of a labelled set, exactly, by counting
    passes over the pairs' float32 distances (none stored).

    Parameters
    ----------
    emb : array-like
        ``(n, d)`` embeddings, numpy or torch.
    labels : array-like
        ``(n,)`` class labels.
    queries : array-like of bool, optional
        ``(n,)`` True for queries: the pairs are then every query x gallery pair; None: every
        ``i < j``.
    distance : {"euclidean", "cosine"}
        Euclidean distance, or ``1 - cos`` (computed as ``|a - b|^2 / 2`` of the l2-normalised
        rows).
    roc_auc : bool
        Compute the ROC AUC (it refines every bin holding both kinds of pairs).
    fmr : float or sequence of float
        False match rates in [0, 1] for FNMR@FMR.
    device : str or torch.device
        Where the passes run, as the evaluation's kNN search (`clusterable.device.
        search_device`): a CUDA device (torch), else the CPU (numpy's BLAS).

    Returns
    -------
    PairScores
        The scores, the pair counts and the passes taken.

    Raises
    ------
    ValueError
        For input an evaluation cannot score, a rate outside [0, 1], and where there is no
        positive pair or no negative pair (every class a single item, or one class): the scores
        compare the two.

    Examples
    --------
    >>> x = np.array([[0.0], [1.0], [3.0], [4.0]])
    >>> scores = pair_scores(x, [0, 0, 1, 1], fmr=0.0)
    >>> scores.roc_auc, scores.fnmr[0.0], (scores.positives, scores.negatives)
    (1.0, 0.0, (2, 4))
    """
    x = as_embeddings(emb)
    codes, _ = as_labels(labels, x.shape[0])
    is_query = None
    if queries is not None:
        is_query = to_numpy(queries, "queries")
        if is_query.dtype != bool or is_query.shape != codes.shape:
            raise ValueError(f"queries must be {codes.shape} booleans, one per item")
    rates = as_rates(fmr, allow_empty=True)
    points = as_points(x, distance)
    return _pair_scores(points, codes, is_query, distance, roc_auc, rates, _torch_device(device))


def _torch_device(device: DeviceSpec) -> torch.device | None:
    """The GPU the passes run on for ``device``; None for the CPU (numpy)."""
    chosen = search_device(device)
    return chosen if chosen.type == "cuda" else None


def _pair_scores(
    points: np.ndarray,
    codes: np.ndarray,
    is_query: np.ndarray | None,
    distance: Distance,
    roc_auc: bool,
    fmr: tuple[float, ...],
    device: torch.device | None = None,
) -> PairScores:
    """`pair_scores` of validated inputs (rows l2-normalised under ``distance="cosine"``), in
    torch on ``device`` where one is given, else in numpy."""
    grid = (
        _PairGrid(points, codes, is_query, distance)
        if device is None
        else _TorchGrid(points, codes, is_query, distance, device)
    )
    positives, negatives = grid.counts()
    if positives == 0 or negatives == 0:
        kind = "same-class" if positives == 0 else "different-class"
        raise ValueError(
            f"roc_auc and fnmr@fmr compare same-class with different-class pairs, and there is no "
            f"{kind} pair among the {positives + negatives} pairs evaluated; leave these metrics "
            "out, or evaluate items with classes of two or more and at least two classes"
        )
    every, pos = grid.count(None)
    every[_NO_PAIR_BIN] = pos[_NO_PAIR_BIN] = 0  # the tiles' entries that are no pair
    counts = _Counts(every - pos, pos, {})
    auc_bins = (
        [int(b) for b in np.flatnonzero((counts.neg > 0) & (counts.pos > 0))] if roc_auc else []
    )
    twice_auc = (
        _twice_auc(counts.neg, counts.pos, ties=False) if roc_auc else 0.0
    )  # across the bins
    fnmr: dict[float, float] = {}
    passes = 1
    while True:
        wanted = _fnmr_bins(counts, negatives, fmr)
        batch = list(dict.fromkeys([*wanted, *auc_bins]))[: REFINE_CELLS >> _LOW_BITS]
        if not batch:
            break
        twice_auc += _refine(grid, counts, batch, auc_bins, set(wanted))
        auc_bins = [b for b in auc_bins if b not in set(batch)]
        passes += 1
    for q in fmr:
        fnmr[q] = _fnmr(counts, negatives, positives, q)
    auc = twice_auc / (2.0 * positives * negatives) if roc_auc else None
    return PairScores(auc, fnmr, positives, negatives, passes)


def _refine(
    grid: _PairGrid, counts: _Counts, batch: list[int], auc_bins: list[int], keep: set[int]
) -> float:
    """One refinement pass over the coarse bins ``batch``: the fine counts of those in ``keep``
    kept in ``counts``; returns twice the AUC numerator inside those of ``auc_bins``."""
    lut = np.full(_BINS, -1, np.int32)
    lut[batch] = np.arange(len(batch), dtype=np.int32)
    every, pos = grid.count(lut)
    every = every.reshape(len(batch), -1)  # (bins, 2^16)
    pos = pos.reshape(len(batch), -1)
    neg = every - pos
    for slot, b in enumerate(batch):
        if b in keep:
            counts.fine[b] = (neg[slot], pos[slot])
    mixed = [slot for slot, b in enumerate(batch) if b in set(auc_bins)]
    return _twice_auc(neg[mixed], pos[mixed]) if mixed else 0.0


def _fnmr_bins(counts: _Counts, negatives: int, fmr: Sequence[float]) -> list[int]:
    """The coarse bins FNMR@FMR still needs refined: those of the negatives' order statistics,
    then that of the threshold among the positives."""
    wanted: list[int] = []
    for q in fmr:
        previous, following, gamma = _quantile_ranks(negatives, q)
        a, b = counts.order_statistic(previous), counts.order_statistic(following)
        if isinstance(a, int) or isinstance(b, int):
            wanted += [v for v in (a, b) if isinstance(v, int)]
            continue
        threshold = _lerp(a, b, gamma)
        t32 = np.float32(threshold)
        if float(t32) < threshold:
            t32 = np.nextafter(t32, np.float32(np.inf))
        if counts.positives_at_least(threshold) is None:
            wanted.append((int(t32.view(np.uint32)) & 0x7FFFFFFF) >> _LOW_BITS)
    return list(dict.fromkeys(wanted))


def _fnmr(counts: _Counts, negatives: int, positives: int, q: float) -> float:
    previous, following, gamma = _quantile_ranks(negatives, q)
    a, b = counts.order_statistic(previous), counts.order_statistic(following)
    threshold = _lerp(float(a), float(b), gamma)
    above = counts.positives_at_least(threshold)
    assert above is not None  # its bin refined by `_fnmr_bins`
    return above / float(positives)


FNMR = "fnmr@fmr"


def pair_artefact(
    a: Artefacts, is_query: np.ndarray | None, selected: Sequence[str], device: DeviceSpec
) -> PairScores:
    """The pair scores the ``selected`` metrics read: the AUC where ``roc_auc`` is among them,
    FNMR at the false match rates asked (``a.values["fnmr@fmr"]``), on the search's ``device``."""
    fmr = a.values.get(FNMR, ())
    auc = "roc_auc" in selected
    return _pair_scores(a.points, a.codes, is_query, a.distance, auc, fmr, _torch_device(device))


@register_metric("roc_auc", needs={"pairs"}, default=False, label="ROC AUC (all pairs)")
def _table_roc_auc(a: Artefacts) -> float:
    assert a.pairs is not None and a.pairs.roc_auc is not None  # "pairs" with roc_auc asked
    return a.pairs.roc_auc


@register_metric(
    FNMR,
    needs={"pairs"},
    default=False,
    label="FNMR at FMR = {value} (all pairs)",
    parameter=1e-3,
    better="lower",
)
def _table_fnmr(a: Artefacts) -> dict[str, float]:
    assert a.pairs is not None  # "pairs"
    return {f"{FNMR}={q!r}": value for q, value in a.pairs.fnmr.items()}
