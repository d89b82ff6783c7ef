"""The host side of the exact kNN search: faiss's candidates, numpy's steps.

`FaissCandidates` gives each chunk's float32 candidates, nearest first, each query's own row
dropped, from one of three sources: faiss's ``knn`` over the references (`faiss_searcher`), the
each-pair-once search of a set against itself (`symmetric_self_search`, panels of the distance
matrix's upper triangle feeding faiss's per-row heaps from ceilings read off a sampled search,
`heap_ceilings`), or a distance matrix already computed (`search_distance_blocks`, the
silhouette's). `HostSteps` are the steps of the search loop of `clusterable.evaluate.neighbors`
in numpy: the near-tie check (`near_ties`), the exact re-scoring (`rescore_pairs`) and the order
(`order_rows`); `clusterable.evaluate._torch_search` holds the same steps in torch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterable._optional import installed
from clusterable.evaluate._inputs import Metric as Distance

if TYPE_CHECKING:
    from clusterable.evaluate.neighbors import Points

#: Elements of the ``(pairs, d)`` float64 block built when re-scoring near-ties (2 MB).
_RESCORE_BLOCK = 1 << 18


#: Queries per faiss call: faiss blocks internally; this bounds only the returned arrays.
_FAISS_CHUNK = 4096

#: Largest ``n * candidates`` for which the self-search keeps every row's candidates at once (a
#: float32 distance and an int64 id each: 200 MB) and so can use each distance for both its row
#: and its column.
SYMMETRIC_MAX_CANDIDATES = 1 << 24

#: Fewest items from which the each-pair-once search is taken when faiss would select the
#: ``k >= 100`` nearest with its reservoirs: below, selecting costs more than the products, and
#: faiss's reservoirs select faster than the heaps of the each-pair-once search. Measured with
#: the heaps' ceilings (`heap_ceilings`), Recall@100 on classes of 40: 2,100 x 64 26.7 ms
#: reservoirs against 28.6 ms each pair once, 2,500 x 64 35.8 against 35.6, 3,000 x 128 60.7
#: against 53.4, 4,000 x 512 163 against 111 (benchmarks/README.md, "Measured defaults").
SYMMETRIC_MIN_ITEMS = 2_500

#: Candidates per block of `sort_rows` (8 MB of 64-bit keys).
_SORT_BLOCK = 1 << 20

#: ``(rows, block)`` pairs: ``block`` ``(n, len(rows))`` holds the squared distances of every
#: point to the points ``rows`` (see `search_distance_blocks`).
DistanceBlocks = list[tuple[np.ndarray, np.ndarray]]

#: Rows per panel of the symmetric self-search, and elements per panel (64 MB of float32; its
#: transposed copy as much again).
_PANEL_ROWS = 512
_PANEL_ELEMENTS = 1 << 24

#: Rows sampled to give each row's heap of the each-pair-once search a starting ceiling
#: (`heap_ceilings`), and the fewest candidates per row from which that pays: the search with
#: ceilings against without, 5,924 x 512: 16 candidates 0.93x as fast, 32 0.97-1.05x, 40 1.01x,
#: 64 1.03x, 108 1.23x; 4,100 x 128: 40 1.12x, 108 1.23x; 20,000 x 128: 16 0.98x, 40 1.02x, 108
#: 1.22x (benchmarks/README.md, "Measured defaults").
PILOT_ROWS = 256
PILOT_MIN_CANDIDATES = 40

#: Elements of the ``(rows, PILOT_ROWS)`` block of `heap_ceilings` (4 MB of float32).
_PILOT_BLOCK = 1 << 20


def faiss_available() -> bool:
    """Whether ``faiss`` can be imported (the optional ``faiss`` extra)."""
    return installed("faiss")


def faiss_reservoir_k() -> int:
    """Smallest ``k`` for which ``faiss.knn`` selects with reservoirs rather than heaps."""
    import faiss

    return int(faiss.cvar.distance_compute_min_k_reservoir)


def faiss_searcher(reference: np.ndarray) -> Any:
    """``search(queries, kk)``: the ``kk`` nearest of ``reference`` by faiss, without an index."""
    import faiss

    reference = np.ascontiguousarray(reference, dtype=np.float32)

    def search(queries: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
        # faiss.knn searches the array in place; an index would hold a copy of it.
        sq, idx = faiss.knn(np.ascontiguousarray(queries, dtype=np.float32), reference, kk)
        return sq, idx.astype(np.int64)

    return search


def symmetric_self_search(x: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
    """Every row's ``kk`` nearest other rows of ``x``, each pair's distance computed once.

    Returns ``(n, kk)`` float32 squared distances, ascending, and their int64 row ids. Panels of
    the upper triangle (a panel's own square block included, its diagonal excluded) go to faiss's
    heaps of their rows and, transposed, of their columns. Everything parallel runs in faiss (its
    BLAS and its heaps share one OpenMP pool: mixing in numpy's or torch's thread pools made
    each of them wait on the other's spinning threads).

    A heap that starts empty takes about ``kk (1 + ln(n / kk))`` insertions, which at ``kk`` near
    100 cost as much as the products. Where `heap_ceilings` gives each row a distance below
    which at least ``kk`` others lie, the row's heap starts full of that distance (id -1), so only
    nearer candidates are inserted; the rare row left holding an id -1 (fewer than ``kk``
    candidates below its ceiling) is searched again on its own.
    """
    import faiss

    x = np.ascontiguousarray(x, dtype=np.float32)
    n, d = x.shape
    dist = np.empty((n, kk), dtype=np.float32)
    ids = np.empty((n, kk), dtype=np.int64)
    heaps = faiss.float_maxheap_array_t()
    heaps.nh, heaps.k = n, kk
    heaps.val, heaps.ids = faiss.swig_ptr(dist), faiss.swig_ptr(ids)
    ceilings = heap_ceilings(x, kk)
    if ceilings is None:
        heaps.heapify()
    else:  # a heap whose entries are all equal is a valid heap
        dist[:] = ceilings[:, None]
        ids.fill(-1)
    # Panel rows whose length is off a power of two: reading a column of a panel whose rows lie a
    # power of two apart lands every element in the same cache sets (measured 4x slower).
    width = max(_PANEL_ROWS, _PANEL_ELEMENTS // _PANEL_ROWS) - 16
    panel_buffer = np.empty(_PANEL_ROWS * min(width, n), dtype=np.float32)
    tile_buffer = np.empty((_PANEL_ROWS, _PANEL_ROWS), dtype=np.float32)
    for i0 in range(0, n, _PANEL_ROWS):
        i1 = min(i0 + _PANEL_ROWS, n)
        for j0 in range(i0, n, width):
            j1 = min(j0 + width, n)
            panel = panel_buffer[: (i1 - i0) * (j1 - j0)].reshape(i1 - i0, j1 - j0)
            faiss.pairwise_L2sqr(
                d,
                i1 - i0,
                faiss.swig_ptr(x[i0:i1]),
                j1 - j0,
                faiss.swig_ptr(x[j0:j1]),
                faiss.swig_ptr(panel),
            )  # (r, w) squared distances
            if j0 == i0:
                np.fill_diagonal(panel, np.inf)  # the row itself
            # faiss's stub omits addn's j0, i0 and ni (its SWIG signature has them).
            heaps.addn(j1 - j0, faiss.swig_ptr(panel), j0, i0, i1 - i0)  # type: ignore[call-arg]
            # The panel's columns below its rows, transposed one square tile at a time (a wide
            # transpose misses the cache), feed the heaps of those rows.
            for t0 in range(max(i1, j0), j1, _PANEL_ROWS):
                t1 = min(t0 + _PANEL_ROWS, j1)
                tile = tile_buffer[: t1 - t0, : i1 - i0]
                np.copyto(tile, panel[:, t0 - j0 : t1 - j0].T)  # (t, r)
                heaps.addn(i1 - i0, faiss.swig_ptr(tile), i0, t0, t1 - t0)  # type: ignore[call-arg]
    sort_rows(dist, ids)
    short = np.flatnonzero(ids[:, -1] < 0)  # rows with fewer than kk below their ceiling
    if short.size:
        sq, idx = faiss.knn(x[short], x, kk + 1)
        dist[short], ids[short] = drop_self(sq, idx.astype(np.int64), short)
    return dist, ids


def sort_rows(dist: np.ndarray, ids: np.ndarray) -> None:
    """Order each row of ``(n, kk)`` float32 ``dist`` and int64 ``ids`` by (distance, id), in
    place; an id -1 after every real one at its distance.

    One numpy sort of 64-bit keys per block of rows, the distance's bits (`_float_keys`) above the
    id's: 2.4 ms for 5,924 x 88 against 17-22 ms for faiss's heap sort, ``HeapArray.reorder``
    (benchmarks/README.md, "Evaluation").
    """
    step = max(1, _SORT_BLOCK // max(1, dist.shape[1]))
    for start in range(0, dist.shape[0], step):
        d, i = dist[start : start + step], ids[start : start + step]
        keys = _float_keys(d).astype(np.uint64) << np.uint64(32)
        keys |= i.astype(np.uint32).astype(np.uint64)  # -1 becomes the largest id
        keys.sort(axis=1)
        d[:] = _float_values((keys >> np.uint64(32)).astype(np.uint32))
        i[:] = keys.astype(np.uint32).view(np.int32)


def search_distance_blocks(blocks: DistanceBlocks, kk: int) -> tuple[np.ndarray, np.ndarray]:
    """Every row's ``kk`` nearest other rows, read off the distance matrix's column blocks.

    ``blocks``: ``(rows, block)`` pairs whose ``rows`` are ``0 .. n-1`` in order; ``block``
    ``(n, len(rows))`` holds the squared distances of every row to ``rows`` (the silhouette's,
    `clusterable.evaluate.silhouette.silhouette_distances`), and is left as it was. Returns
    ``(n, kk)`` float32 squared distances, ascending, and int64 ids, as `symmetric_self_search`
    does, for no products of its own: row ``i`` of each block, its distances to that block's
    rows, goes to row ``i``'s heap in faiss, every heap starting full at a ceiling read off
    `PILOT_ROWS` evenly spaced columns (``q = lam + 3 sqrt(lam) + 2``, see `heap_ceilings`); a
    row left with fewer than ``kk`` below it (behind many duplicates) is sorted whole. 2,000 x 64,
    125 neighbours: 16 ms against 21 ms for ``faiss.knn`` (benchmarks/README.md, "Evaluation").
    """
    import faiss

    n = blocks[0][1].shape[0]
    m = min(n, PILOT_ROWS)
    sampled = np.arange(m) * n // m
    lam = kk * m / max(n - 1, 1)
    q = min(m, int(np.ceil(lam + 3.0 * np.sqrt(lam) + 2.0)))
    pilot = np.empty((n, m), dtype=np.float32)  # each row's distances to the sampled rows
    for rows, block in blocks:
        here = np.flatnonzero((sampled >= rows[0]) & (sampled <= rows[-1]))
        pilot[:, here] = block[:, sampled[here] - rows[0]]
    pilot[sampled, np.arange(m)] = np.inf  # a sampled row itself
    dist = np.empty((n, kk), dtype=np.float32)
    ids = np.full((n, kk), -1, dtype=np.int64)
    dist[:] = np.partition(pilot, q - 1, axis=1)[:, q - 1 : q]
    heaps = faiss.float_maxheap_array_t()
    heaps.nh, heaps.k = n, kk
    heaps.val, heaps.ids = faiss.swig_ptr(dist), faiss.swig_ptr(ids)
    for rows, block in blocks:
        own = block[rows, np.arange(rows.size)]  # each row's distance to itself
        block[rows, np.arange(rows.size)] = np.inf
        heaps.addn(rows.size, faiss.swig_ptr(block), int(rows[0]), 0, n)  # type: ignore[call-arg]
        block[rows, np.arange(rows.size)] = own
    sort_rows(dist, ids)
    for row in np.flatnonzero(ids[:, -1] < 0):  # fewer than kk below the ceiling
        whole = np.concatenate([block[row] for _, block in blocks])  # (n,)
        whole[row] = np.inf
        nearest = np.argsort(whole, kind="stable")[:kk]  # by (distance, id)
        ids[row], dist[row] = nearest, whole[nearest]
    return dist, ids


def _float_keys(values: np.ndarray) -> np.ndarray:
    """uint32 keys that sort as the float32 ``values`` do, negative ones included."""
    bits = values.view(np.uint32)
    # Negative floats' bits sort backwards: flip all of them; the others' sign bit only.
    return bits ^ (np.negative(bits >> np.uint32(31)) | np.uint32(0x80000000))


def _float_values(keys: np.ndarray) -> np.ndarray:
    """The float32 values of `_float_keys`."""
    return (keys ^ ((keys >> np.uint32(31)) - np.uint32(1) | np.uint32(0x80000000))).view(
        np.float32
    )


def heap_ceilings(x: np.ndarray, kk: int) -> np.ndarray | None:
    """``(n,)`` squared distances each with, most likely, ``kk`` other rows of ``x`` below it, or
    None where sampling would not pay.

    Each row is searched against `PILOT_ROWS` evenly spaced rows: with ``lam = kk m / n`` of its
    ``kk`` nearest expected among those ``m``, its ``q``-th nearest sampled row, ``q = lam + 4
    sqrt(lam) + 2``, lies beyond its ``kk``-th nearest unless the sample holds ``q`` of them
    (chance about 1e-5 per row), and within about ``q n / m`` rows of it. The pilot's products,
    ``2 m / n`` of the triangle's, are taken only where the insertions it saves, about
    ``kk ln(m / q)`` per row, are worth more (`PILOT_MIN_CANDIDATES`, measured). The ``q``-th is
    read off faiss's ``(rows, m)`` products by ``numpy.partition``: on one thread, 5,924 x 512
    took 29 ms with faiss's search for the ``q`` nearest and 20 ms this way, 4,000 x 128 11 and 4.5
    ms.
    """
    import faiss

    n, d = x.shape
    lam = kk * PILOT_ROWS / max(n - 1, 1)
    q = int(np.ceil(lam + 4.0 * np.sqrt(lam) + 2.0)) + 1  # + 1: the row itself may be sampled
    if kk < PILOT_MIN_CANDIDATES or n < 8 * PILOT_ROWS or 4 * q > PILOT_ROWS:
        return None
    sample = np.ascontiguousarray(x[np.arange(PILOT_ROWS) * n // PILOT_ROWS])  # (m, d)
    ceilings = np.empty(n, dtype=np.float32)
    step = max(1, _PILOT_BLOCK // PILOT_ROWS)
    block = np.empty((min(step, n), PILOT_ROWS), dtype=np.float32)
    for start in range(0, n, step):
        rows = min(step, n - start)
        faiss.pairwise_L2sqr(
            d,
            rows,
            faiss.swig_ptr(x[start : start + rows]),
            PILOT_ROWS,
            faiss.swig_ptr(sample),
            faiss.swig_ptr(block),
        )  # (rows, m) squared distances to the sampled rows
        ceilings[start : start + rows] = np.partition(block[:rows], q - 1, axis=1)[:, q - 1]
    return ceilings


def drop_self(
    sq: np.ndarray, idx: np.ndarray, own_rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The candidates ``(c, kk)`` without each query's own row ``own_rows[i]``: ``(c, kk - 1)``.

    A row whose query is not among its candidates (possible only behind more than ``kk``
    duplicates, or when the search never returns it) loses its last candidate instead.
    """
    if (idx[:, 0] == own_rows).all():  # the usual case: each query first among its candidates
        return sq[:, 1:], idx[:, 1:]
    own = idx == own_rows[:, None]  # (c, kk)
    own[~own.any(axis=1), -1] = True
    keep = ~own
    shape = (idx.shape[0], idx.shape[1] - 1)
    return sq[keep].reshape(shape), idx[keep].reshape(shape)


class FaissCandidates:
    """The ``kk`` float32 candidates of each chunk of queries, searched on the host.

    ``q`` and ``ref`` are the points the search ranks (`neighbors._search_points`);
    ``exclude_self``: the leave-one-out search of ``q`` against itself (``ref``), whose queries'
    own rows are dropped, so that its chunks hold ``kk - 1`` candidates. ``every_row``: such a
    search of every row at once (no shard), which may then read ``blocks``, the whole distance
    matrix already computed (`search_distance_blocks`), or compute each pair once
    (`symmetric_self_search`) where every row's candidates fit `SYMMETRIC_MAX_CANDIDATES` and
    the set is large enough for the products to dominate; otherwise faiss's ``knn`` searches
    each chunk against ``ref`` in place. Each chunk's candidates come nearest first.
    """

    def __init__(
        self,
        q: np.ndarray,
        ref: np.ndarray,
        kk: int,
        exclude_self: bool,
        every_row: bool,
        blocks: DistanceBlocks | None = None,
    ) -> None:
        self.q, self.kk, self.exclude_self = q, kk, exclude_self
        self.found: tuple[np.ndarray, np.ndarray] | None = None
        self.search: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]] | None = None
        n_ref = ref.shape[0]
        if every_row and blocks is not None:
            # From distances already computed; the row itself is never among the candidates.
            self.found = search_distance_blocks(blocks, kk - 1)
        elif (
            every_row
            and n_ref * kk <= SYMMETRIC_MAX_CANDIDATES
            and (n_ref >= SYMMETRIC_MIN_ITEMS or kk < faiss_reservoir_k())
        ):
            # Every row's candidates at once; the row itself is never among them.
            self.found = symmetric_self_search(q, kk - 1)
        else:
            self.search = faiss_searcher(ref)

    def __call__(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """``(c, kk')`` float32 squared distances and int64 ids of queries ``start:stop``."""
        if self.found is not None:
            return self.found[0][start:stop], self.found[1][start:stop]
        assert self.search is not None
        sq, idx = self.search(self.q[start:stop], self.kk)
        if self.exclude_self:
            sq, idx = drop_self(sq, idx, start + np.arange(sq.shape[0]))
        return sq, idx


class HostSteps:
    """The steps of the search loop (`neighbors._ranked_chunks`) in numpy, the candidates from
    faiss (`FaissCandidates`).

    Rows are ordered where their order may have changed: where near-ties of mixed kinds were
    re-scored (given class ``codes``), else every row (faiss leaves exact ties in any order).
    """

    def __init__(
        self,
        points: Points,
        kk: int,
        every_row: bool,
        codes: np.ndarray | None,
        blocks: DistanceBlocks | None,
    ) -> None:
        self.points, self.codes = points, codes
        usable = blocks if points.exact is None else None  # float32 distances only
        self.candidates = FaissCandidates(
            points.q, points.ref, kk, points.exclude_self, every_row, usable
        )
        self.tolerances = points.tolerances()
        self.order_every_row = points.exact is not None or codes is None

    def chunk(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The queries ``start:stop`` and their float32 candidates, nearest first."""
        sq, idx = self.candidates(start, stop)
        return self.points.q[start:stop], sq, idx

    @staticmethod
    def widen(values: np.ndarray) -> np.ndarray:
        """``values`` in float64."""
        return values.astype(np.float64)

    def rescore_every(self, start: int, stop: int, idx: np.ndarray) -> np.ndarray:
        """``(c, kk')`` exact float64 keys of every candidate (float64 inputs)."""
        exact = self.points.exact
        assert exact is not None  # called for float64 inputs only, which hold it
        rows = np.repeat(np.arange(idx.shape[0]), idx.shape[1])
        return rescore_pairs(exact[0][start:stop], exact[1], rows, idx.reshape(-1)).reshape(
            idx.shape
        )

    @staticmethod
    def kth(keys: np.ndarray, k: int) -> np.ndarray:
        """Each row's ``k``-th smallest key."""
        return np.partition(keys, k - 1, axis=1)[:, k - 1]

    @staticmethod
    def row_list(mask: np.ndarray) -> list[int]:
        """The indices of the True rows of ``mask``."""
        return np.flatnonzero(mask).tolist()

    def search_again(
        self, start: int, rows: list[int], width: int, within: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``width`` nearest of every reference, exactly, for the queries ``start + rows``
        (`exact_nearest`), whose ``width``-th exact squared distances lie within ``within``."""
        queries, reference = self._searched_again
        own = start + np.asarray(rows)
        return exact_nearest(
            queries[own],
            reference,
            self._reference_sq,
            own,
            width,
            within,
            self.points.exclude_self,
        )

    @property
    def _searched_again(self) -> tuple[np.ndarray, np.ndarray]:
        """The queries and references `search_again` scores: the float64 inputs' own, else the
        float32 ones."""
        return self.points.exact or (self.points.q, self.points.ref)

    @functools.cached_property
    def _reference_sq(self) -> np.ndarray:
        """``(n,)`` float64 squared norms of the references `search_again` scores, once."""
        reference = self._searched_again[1]
        return np.einsum("nd,nd->n", reference, reference, dtype=np.float64)

    def rescore_near_ties(
        self,
        start: int,
        stop: int,
        qc: np.ndarray,
        keys: np.ndarray,
        tol: np.ndarray,
        idx: np.ndarray,
    ) -> np.ndarray | None:
        """Re-score ``keys`` in place where near-ties need it; the rows to order again."""
        same = None if self.codes is None else self.codes[idx] == self.codes[start:stop, None]
        rows, cols = np.nonzero(near_ties(keys, tol, same))
        if rows.size:
            keys[rows, cols] = rescore_pairs(qc, self.points.ref, rows, idx[rows, cols])
        return None if self.order_every_row else np.unique(rows)

    def order(
        self, keys: np.ndarray, idx: np.ndarray, k: int, rows: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The rows ordered by (key, id) and cut to ``k``: ``(c, k)`` keys and ids."""
        return order_rows(keys, idx, k, None if self.order_every_row else rows)

    def distances(self, keys: np.ndarray, distance: Distance) -> np.ndarray:
        """The squared ``keys`` as ``distance`` values, back in the inputs' scale."""
        keys = np.maximum(keys, 0.0)  # faiss's float32 distances of duplicates may fall below 0
        dist = np.sqrt(keys) / self.points.unit if distance == "euclidean" else keys / 2.0
        return dist.astype(np.float32 if self.points.exact is None else np.float64)


def near_ties(keys: np.ndarray, tol: np.ndarray, same: np.ndarray | None) -> np.ndarray:
    """``(c, kk)`` mask of the candidates to re-score exactly.

    The two candidates on either side of a near-tied gap (at most ``tol`` of the row): every other
    gap exceeds twice the rounding error, so those pairs already compare in the true order. All
    ``kk`` candidates are checked, so a run of ties reaching past place k is re-scored whole. A
    candidate within ``tol`` of distance 0 (a duplicate, whose float32 distance is pure rounding)
    counts as tied with the query itself. With ``same`` (``(c, kk)``: the candidate shares the
    query's class), only runs mixing both kinds.
    """
    c, kk = keys.shape
    # The gap before each candidate, from 0 (the query itself) for the first.   (c, kk)
    near_gap = np.diff(keys, axis=1, prepend=0.0) <= tol[:, None]
    if same is None:
        rescore = near_gap.copy()
        rescore[:, :-1] |= near_gap[:, 1:]
        return rescore
    # Runs of near-tied candidates, from the few near gaps alone: a run is a row's stretch of
    # consecutive near gaps and the member before its first (a candidate, or the query itself,
    # of its own class), and only runs mixing both kinds are re-scored.
    at = np.flatnonzero(near_gap)  # (g,) row-major: the gap before candidate at % kk
    rescore = np.zeros(c * kk, dtype=bool)
    if not at.size:
        return rescore.reshape(c, kk)
    place = at % kk
    first = np.ones(at.size, dtype=bool)  # the run's first gap
    first[1:] = (at[1:] != at[:-1] + 1) | (place[1:] == 0)
    run = np.cumsum(first) - 1  # (g,)
    starts, lead = at[first], place[first] > 0  # lead: the member before is a candidate
    lead_alike = np.ones(starts.size)
    lead_alike[lead] = same.reshape(-1)[starts[lead] - 1]
    members = np.bincount(run, minlength=starts.size) + 1
    alike = np.bincount(run, weights=same.reshape(-1)[at], minlength=starts.size) + lead_alike
    mixed = (alike > 0) & (alike < members)  # per run
    rescore[at[mixed[run]]] = True
    rescore[starts[mixed & lead] - 1] = True
    return rescore.reshape(c, kk)


def order_rows(
    keys: np.ndarray, idx: np.ndarray, k: int, rows: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` candidates of each row by (distance, index), ``(c, k)`` each: views of
    ``keys`` and ``idx``, whose rows are ordered in place.

    ``rows``: only these rows are sorted, the others being in order already; None: every row.
    """
    if rows is None:
        rows = np.arange(keys.shape[0])
    if rows.size:
        # The candidates arrive nearly sorted, which a stable sort by distance alone exploits
        # (measured 18x faster than sorting by two keys); only rows holding an exact tie are
        # sorted again by (distance, index).
        order = np.argsort(keys[rows], axis=1, kind="stable")
        sorted_keys = np.take_along_axis(keys[rows], order, axis=1)
        tied = (np.diff(sorted_keys, axis=1) == 0).any(axis=1)
        if tied.any():
            order[tied] = np.lexsort((idx[rows[tied]], keys[rows[tied]]), axis=-1)
        keys[rows] = np.take_along_axis(keys[rows], order, axis=1)
        idx[rows] = np.take_along_axis(idx[rows], order, axis=1)
    return keys[:, :k], idx[:, :k]


def rescore_pairs(
    queries: np.ndarray, reference: np.ndarray, rows: np.ndarray, cols: np.ndarray
) -> np.ndarray:
    """Exact float64 squared distances ``|queries[rows] - reference[cols]|^2``, ``(e,)``.

    Blocks of pairs go through three buffers made once: fresh memory for each block cost more
    than the arithmetic (8,000 pairs at 512 dimensions: 7-8 ms against 12-98 ms).
    """
    e, d = rows.shape[0], reference.shape[1]
    out = np.empty(e, dtype=np.float64)
    step = max(1, min(e, _RESCORE_BLOCK // d))
    picked = np.empty((2, step, d), dtype=reference.dtype)  # the pairs' two rows
    diff = np.empty((step, d), dtype=np.float64)
    for s in range(0, e, step):
        m = min(step, e - s)
        np.take(reference, cols[s : s + m], axis=0, out=picked[0, :m])
        np.take(queries, rows[s : s + m], axis=0, out=picked[1, :m])
        np.subtract(picked[0, :m], picked[1, :m], out=diff[:m], dtype=np.float64)
        out[s : s + m] = np.einsum("ed,ed->e", diff[:m], diff[:m])  # (m,)
    return out


#: Elements of the ``(queries, references)`` block of `exact_nearest` (32 MB in float32).
_SCREEN_ELEMENTS = 1 << 23


def exact_nearest(
    queries: np.ndarray,
    reference: np.ndarray,
    ref_sq: np.ndarray,
    own: np.ndarray,
    width: int,
    within: np.ndarray,
    exclude_self: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``width`` nearest references of each of the ``(b, d)`` ``queries``, exactly, over every
    reference: ``(b, width)`` int64 ids ordered by (float64 squared distance, id), and those
    distances.

    ``queries`` and ``reference``: float64, or float32 (widened exactly where they are scored);
    ``ref_sq``: ``(n,)`` the references' float64 squared norms; ``own``: ``(b,)`` each query's
    own row of ``reference``, left out where ``exclude_self``;
    ``within``: ``(b,)`` a bound on each query's ``width``-th exact squared distance (its last
    float32 candidate's distance plus the rounding bound). Blocks of queries are screened by
    products in the references' precision, ``|q|^2 + |r|^2 - 2 q.r`` (BLAS), which err by less
    than `screen_margin`; the references screened within ``within`` plus twice that margin, a
    handful per query, are then scored exactly (`rescore_pairs`). A query the bound leaves short
    (its float32 list erred beyond it) takes its ``width``-th screened distance instead.
    ``_torch_search.exact_nearest`` is the same on a device.
    """
    n, d = reference.shape
    unit = float(np.finfo(reference.dtype).eps) / 2.0
    ids = np.empty((len(queries), width), dtype=np.int64)
    keys = np.empty((len(queries), width), dtype=np.float64)
    step = max(1, _SCREEN_ELEMENTS // n)
    for s in range(0, len(queries), step):
        q = queries[s : s + step]  # (b, d)
        b = len(q)
        q_sq = np.einsum("bd,bd->b", q, q, dtype=np.float64)  # (b,)
        screened = q.astype(reference.dtype) @ reference.T  # (b, n) in the references' precision
        screened *= -2.0
        screened += ref_sq.astype(reference.dtype)
        screened += q_sq.astype(reference.dtype)[:, None]
        if exclude_self:
            screened[np.arange(b), own[s : s + step]] = np.inf
        margin = screen_margin(q_sq, float(ref_sq.max()), d, unit)  # (b,)
        limit = within[s : s + step] + 2.0 * margin  # (b,)
        short = np.flatnonzero((screened <= limit[:, None]).sum(axis=1) < width)
        if short.size:
            kth = np.partition(screened[short], width - 1, axis=1)[:, width - 1]
            limit[short] = kth + 2.0 * margin[short]
        at, cols = np.nonzero(screened <= limit[:, None])
        if exclude_self:  # the query itself, where the limit is infinite
            keep = cols != own[s : s + step][at]
            at, cols = at[keep], cols[keep]
        distances = rescore_pairs(q, reference, at, cols)  # (m,) exact
        order = np.lexsort((cols, distances, at))  # by query, then (distance, index)
        first = np.searchsorted(at[order], np.arange(b))  # (b,) each query's first
        taken = order[first[:, None] + np.arange(width)]  # (b, width)
        ids[s : s + step], keys[s : s + step] = cols[taken], distances[taken]
    return ids, keys


def screen_margin(q_sq: Any, ref_sq_max: float, d: int, unit: float) -> Any:
    """``(b,)`` bound, numpy or torch, on the gap between ``|q|^2 + |r|^2 - 2 q.r`` computed with
    unit roundoff ``unit`` and float64 ``sum (r - q)^2`` of one pair: each lies within about ``2
    d u (|q|^2 + |r|^2)`` of the true value (Higham's ``gamma_d``; ``|q.r|`` and ``|r - q|^2``
    bounded by Cauchy-Schwarz), so their gap within ``(4 d + 8) u (|q|^2 + max |r|^2)`` with the
    larger ``u``."""
    return (4 * d + 8) * unit * (q_sq + ref_sq_max)
