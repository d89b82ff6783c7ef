"""Exact k-nearest-neighbour search, chunked over queries: faiss, torch on a GPU, or torch.

Every back end computes squared Euclidean distances as ``|q|^2 + |r|^2 - 2 q.r`` in float32 (BLAS),
so their raw distances differ in the last bits and near-ties could come out in different orders.
To make them give the same neighbours, each query's candidates are checked for near-ties: where
two consecutive candidate distances lie within a rounding tolerance, both candidates are re-scored
exactly (float64, ``sum (q - r)^2``). Every row is then ordered by (distance, reference index),
so exact ties (duplicate points) go to the lower index. A row whose run of near-ties reaches past
its candidate list (near-duplicates: re-encoded copies of one photo, more of them than ``TIE_PAD``
beyond place k) may have a nearest point left out of the list, and is searched again over every
reference in float64 (`_may_miss_one`, `_host_search.exact_nearest`).

Every back end runs the one loop of `_ranked_chunks` over chunks of queries: candidates, then
either the exact float64 re-scoring or the near-tie check, then the order, then the distances.
Its steps come from `_host_search.HostSteps` (numpy, candidates from faiss) or
`_torch_search.DeviceSteps` (torch, every step on the search's device), so that a GPU's
candidates never cross to the host; the evaluation scores them there too
(`clusterable.evaluate.retrieval`).

Self-matches are removed by index, never by assuming the query comes first: with duplicates, the
query's twin can legitimately be returned at distance 0 ahead of it.

The leave-one-out search of a set against itself computes each pair once when faiss is installed
and the set is large enough for the products to dominate (`_host_search.symmetric_self_search`),
or reads the distance matrix where the evaluation's silhouette computed it anyway (sets of up to
2,236 items; `_host_search.search_distance_blocks`).

The evaluation asks only whether each neighbour shares the query's class. Given the class codes,
a near-tied run of candidates is then re-scored only when it mixes the query's class with others:
reordering a run of one kind cannot change any retrieval metric.

float64 embeddings are ranked at float64 resolution: the search runs on the points centred on the
reference mean and rounded to float32 (so points far from the origin keep their differences), and
every candidate is then re-scored exactly in float64 from the unrounded centred points. A row
whose candidate list may miss one of its nearest (more points than the list holds coincide in
float32) is searched again over every reference in float64 (`_host_search.exact_nearest`, on a
GPU its twin in `_torch_search`), so the answer is
exact however many points float32 cannot tell apart.

The device is an argument of every search (``device``, read by
`clusterable.device.search_device`): ``"auto"`` means the detection (CUDA when torch sees
a GPU), never a choice made elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

import numpy as np
import torch

from clusterable.device import DeviceSpec, resolve_device, search_device
from clusterable.evaluate._host_search import (
    _FAISS_CHUNK,
    DistanceBlocks,
    HostSteps,
    drop_self,
    faiss_available,
)
from clusterable.evaluate._inputs import Metric as Distance
from clusterable.evaluate._inputs import as_embeddings, as_points, check_k, check_same_dimension
from clusterable.evaluate._keywords import refuse_renamed
from clusterable.evaluate._torch_search import DeviceSteps

__all__ = [
    "Backend",
    "DistanceBlocks",
    "drop_self",
    "faiss_available",
    "iter_knn",
    "knn_chunks",
    "knn_chunks_on_device",
    "knn_search",
    "power_of_two_scale",
    "query_chunk",
    "search_device_of",
    "shard_rows",
]

Backend = Literal["auto", "faiss", "torch", "cuda"]

#: Extra candidates fetched beyond k, so that ties at the k-th place can still be ordered by index.
#: A row whose run of near-ties reaches past them is searched again over every reference
#: (`_may_miss_one`).
TIE_PAD = 8

#: Distances closer than this, relative to ``|q|^2 + max |r|^2``, count as a near-tie. float32
#: BLAS dot products err by about ``sqrt(d) * 1.2e-7`` of that scale (worst ``d * 1.2e-7``).
NEAR_TIE_RTOL = 1e-5

#: Elements of the ``(queries, references)`` distance block of the torch back end on the CPU
#: (256 MB).
_TORCH_BLOCK = 1 << 26

#: The same on a GPU (1 GB, the one ``(c, n)`` product `TorchSearch` selects from): 268 queries
#: per block against a million references.
_CUDA_BLOCK = 1 << 28


def _resolve(backend: str, device: DeviceSpec = "auto") -> str:
    """``backend`` with ``"auto"`` decided by ``device`` (`search_device`): ``"cuda"``
    for a GPU, else ``"faiss"`` when installed, else ``"torch"``."""
    if backend == "auto":
        if search_device(device).type == "cuda":
            return "cuda"
        return "faiss" if faiss_available() else "torch"
    if backend not in ("faiss", "torch", "cuda"):
        raise ValueError(f"backend must be 'auto', 'faiss', 'torch' or 'cuda', got {backend!r}.")
    if backend == "cuda":
        resolve_device("cuda")  # the device rule's error where torch sees no GPU
    return backend


def search_device_of(backend: str, device: DeviceSpec = "auto") -> torch.device | None:
    """Where the torch back ends search for ``backend`` and ``device``: the GPU ``device`` names
    (``cuda`` for ``backend="cuda"`` with a CPU ``device``) or the CPU; None where faiss does."""
    resolved = _resolve(backend, device)
    if resolved == "faiss":
        return None
    if resolved == "torch":
        return torch.device("cpu")
    chosen = search_device(device)
    return chosen if chosen.type == "cuda" else torch.device("cuda")


def query_chunk(
    n_ref: int,
    backend: Backend = "auto",
    chunk_size: int | None = None,
    device: DeviceSpec = "auto",
) -> int:
    """Queries per chunk of `iter_knn` for ``n_ref`` references."""
    if chunk_size is None:
        resolved = _resolve(backend, device)
        if resolved == "faiss":
            return _FAISS_CHUNK
        return max(1, (_CUDA_BLOCK if resolved == "cuda" else _TORCH_BLOCK) // n_ref)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)):
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}.")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}.")
    return int(chunk_size)


def shard_rows(
    n_query: int,
    n_ref: int,
    shard: tuple[int, int],
    backend: Backend = "auto",
    chunk_size: int | None = None,
    device: DeviceSpec = "auto",
) -> np.ndarray:
    """``(n_query,)`` mask of the queries `iter_knn` searches for ``shard = (rank, world)``."""
    chunk = query_chunk(n_ref, backend, chunk_size, device)
    return (np.arange(n_query) // chunk) % shard[1] == shard[0]


@dataclass(frozen=True)
class Points:
    """What every back end searches (`_search_points`): ``q`` against ``ref`` in float32 (``ref is
    q`` for the leave-one-out search of a set against itself), scaled by ``unit``; ``exact``
    the float64 points the candidates are re-scored from (float64 inputs), else None."""

    q: np.ndarray  # (m, d) float32
    ref: np.ndarray  # (n, d) float32
    unit: float
    exact: tuple[np.ndarray, np.ndarray] | None
    exclude_self: bool

    @property
    def n_ref(self) -> int:
        """How many references."""
        return self.ref.shape[0]

    def tolerances(self) -> np.ndarray:
        """``(m,)`` float64 near-tie bound of each query: `NEAR_TIE_RTOL` of ``|q|^2 + max
        |r|^2``."""
        ref_sq = np.einsum("nd,nd->n", self.ref, self.ref)  # (n,)
        q_sq = ref_sq if self.exclude_self else np.einsum("nd,nd->n", self.q, self.q)  # (m,)
        return NEAR_TIE_RTOL * (q_sq.astype(np.float64) + float(ref_sq.max()))


Array = TypeVar("Array", np.ndarray, torch.Tensor)


class _SearchSteps(Protocol, Generic[Array]):
    """The steps `_ranked_chunks` runs, all on one kind of array: `HostSteps` (numpy) or
    `DeviceSteps` (torch)."""

    tolerances: Array  # (m,) float64

    def chunk(self, start: int, stop: int) -> tuple[Array, Array, Array]: ...
    def widen(self, values: Array) -> Array: ...
    def rescore_every(self, start: int, stop: int, idx: Array) -> Array: ...
    def kth(self, keys: Array, k: int) -> Array: ...
    def row_list(self, mask: Array) -> list[int]: ...
    def search_again(
        self, start: int, rows: list[int], width: int, within: Array
    ) -> tuple[Array, Array]: ...
    def rescore_near_ties(
        self, start: int, stop: int, qc: Array, keys: Array, tol: Array, idx: Array
    ) -> Array | None: ...
    def order(self, keys: Array, idx: Array, k: int, rows: Array | None) -> tuple[Array, Array]: ...
    def distances(self, keys: Array, distance: Distance) -> Array: ...


def _ranked_chunks(
    steps: _SearchSteps[Array],
    points: Points,
    k: int,
    distance: Distance,
    chunk: int,
    shard: tuple[int, int],
) -> Iterator[tuple[int, Array, Array]]:
    """The one search loop of every back end, over the chunks ``shard`` owns: each chunk's
    float32 candidates (`TIE_PAD` beyond ``k``), re-scored exactly in float64 (float64 inputs)
    or where near-ties need it, a doubtful row (`_may_miss_one`: a run of near-ties reaching from
    place ``k`` past the candidates, as among near-duplicates) searched again over every
    reference in float64, ordered by (distance, id) and cut to ``k``; yields ``(start, (c, k)
    distances, (c, k) ids)`` as ``steps`` holds them (numpy or torch)."""
    exclude_self = points.exclude_self
    rank, world = shard
    for start in range(rank * chunk, points.q.shape[0], world * chunk):
        stop = min(start + chunk, points.q.shape[0])
        qc, sq, idx = steps.chunk(start, stop)  # (c, kk') nearest first, the query dropped
        tol = steps.tolerances[start:stop]  # (c,)
        rows = None  # the rows to order again; None: every row
        if points.exact is not None:
            keys = steps.rescore_every(start, stop, idx)
        else:
            keys = steps.widen(sq)
            rows = steps.rescore_near_ties(start, stop, qc, keys, tol, idx)
        if keys.shape[1] < points.n_ref - int(exclude_self):
            kth = steps.kth(keys, k)  # (c,)
            last = steps.widen(sq[:, -1])  # (c,) each row's farthest float32 candidate
            doubtful = steps.row_list(_may_miss_one(last, tol, kth))
            if doubtful:
                # Every listed candidate's exact distance is within tol of its float32 one.
                within = (last + tol)[doubtful]
                idx[doubtful], keys[doubtful] = steps.search_again(
                    start, doubtful, keys.shape[1], within
                )
                rows = None  # rare: order the whole chunk
        keys, idx = steps.order(keys, idx, k, rows)
        yield start, steps.distances(keys, distance), idx


def _search(
    q: np.ndarray,
    k: int,
    ref: np.ndarray | None,
    distance: Distance,
    on: torch.device | None,
    chunk: int,
    shard: tuple[int, int],
    codes: np.ndarray | None,
    blocks: DistanceBlocks | None,
) -> Iterator[tuple[int, Any, Any]]:
    """`_ranked_chunks` of validated points on the host (``on`` None: faiss) or with torch on
    device ``on``."""
    points = _search_points(q, ref, distance)
    kk = min(k + int(points.exclude_self) + TIE_PAD, points.n_ref)  # the query may take a slot
    if on is None:
        every_row = points.exclude_self and shard[1] == 1  # all rows at once
        steps: HostSteps | DeviceSteps = HostSteps(points, kk, every_row, codes, blocks)
    else:
        steps = DeviceSteps(points, kk, codes, on)
    return _ranked_chunks(steps, points, k, distance, chunk, shard)


@refuse_renamed(metric="distance")
def iter_knn(
    query: Any,
    k: int,
    reference: Any = None,
    *,
    distance: Distance = "euclidean",
    backend: Backend = "auto",
    device: DeviceSpec = "auto",
    chunk_size: int | None = None,
    shard: tuple[int, int] = (0, 1),
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Exact k nearest neighbours, yielded one chunk of queries at a time.

    Parameters
    ----------
    query : array-like
        ``(m, d)`` query embeddings, numpy or torch.
    k : int
        Neighbours per query.
    reference : array-like, optional
        ``(n, d)`` the set searched. When omitted, ``query`` is searched against itself and each
        query's own row is removed from its neighbours (by index).
    distance : {"euclidean", "cosine"}
        Euclidean distance, or cosine distance ``1 - cos`` (rows are l2-normalised first).
    backend : {"auto", "faiss", "torch", "cuda"}
        ``auto`` searches on the GPU (torch) where ``device`` is one, else with faiss when
        importable, else with torch on the CPU. All give the same neighbours (see module
        docstring): only the ``(c, k)`` neighbours and their distances come back from the GPU.
    device : str or torch.device
        Where ``backend="auto"`` searches (`search_device`): a CUDA device, or the CPU;
        ``"auto"``: a GPU when torch sees one.
    chunk_size : int, optional
        Queries per chunk. Memory beyond the inputs is ``O(chunk_size * (k + n))`` for the torch
        back end and ``O(chunk_size * k)`` plus faiss's own fixed blocks for faiss.
    shard : tuple of int
        ``(rank, world_size)``: search only the chunks ``i`` with ``i % world_size == rank``, so
        that ``world_size`` processes share one search (see `clusterable.evaluate.sharded`).

    Yields
    ------
    start : int
        Index of the chunk's first query.
    distances : numpy.ndarray
        ``(c, k)`` ascending; float64 when either input is float64, else float32.
    indices : numpy.ndarray
        ``(c, k)`` int64 reference rows; equal distances are ordered by index.
    """
    q = as_points(as_embeddings(query, "query"), distance, "query")
    ref = None
    if reference is not None:
        ref = as_points(as_embeddings(reference, "reference"), distance, "reference")
        check_same_dimension(q, ref)
    check_k(k, q.shape[0] - 1 if ref is None else ref.shape[0], "k")
    query_chunk(q.shape[0] if ref is None else ref.shape[0], backend, chunk_size, device)
    return knn_chunks(
        q,
        k,
        ref,
        distance=distance,
        backend=backend,
        device=device,
        chunk_size=chunk_size,
        shard=shard,
    )


def knn_chunks(
    q: np.ndarray,
    k: int,
    ref: np.ndarray | None = None,
    *,
    distance: Distance = "euclidean",
    backend: Backend = "auto",
    device: DeviceSpec = "auto",
    chunk_size: int | None = None,
    shard: tuple[int, int] = (0, 1),
    codes: np.ndarray | None = None,
    blocks: DistanceBlocks | None = None,
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """The search of `iter_knn` on validated points (`as_points` of `as_embeddings`), ``ref``
    None for the leave-one-out search of ``q`` against itself; ``k`` already checked.

    ``codes``: ``(n,)`` class codes of a leave-one-out search whose caller reads only whether each
    neighbour shares the query's class: near-tied runs of one kind are then left in float32 order
    (see the module docstring), and the distances returned for them are the float32 ones.
    ``blocks``: the whole squared distance matrix of ``q`` (scaled by `power_of_two_scale`), in
    column blocks (`_host_search.search_distance_blocks`), for a leave-one-out search on the
    CPU to read instead of computing products; other searches ignore it. The torch back ends'
    chunks are brought to the host.
    """
    on = search_device_of(backend, device)
    n_ref = q.shape[0] if ref is None else ref.shape[0]
    chunk = query_chunk(n_ref, "faiss" if on is None else backend, chunk_size, device)
    for start, dist, idx in _search(q, k, ref, distance, on, chunk, shard, codes, blocks):
        if on is not None:
            dist, idx = dist.cpu().numpy(), idx.cpu().numpy()
        yield start, dist, idx


def knn_chunks_on_device(
    q: np.ndarray,
    k: int,
    ref: np.ndarray | None = None,
    *,
    distance: Distance = "euclidean",
    backend: Backend = "torch",
    device: DeviceSpec = "auto",
    chunk_size: int | None = None,
    shard: tuple[int, int] = (0, 1),
    codes: np.ndarray | None = None,
) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """`knn_chunks` for the torch back ends, whose chunks stay on the search's device
    (`search_device_of`): each chunk's ``(c, k)`` distances and int64 ids are tensors there.

    The same rules, and the same neighbours, as the host's search, in the same loop
    (`_ranked_chunks`). Near-tied candidates of one kind, which the host leaves in the search's
    order, are ordered by (float32 distance, id) here.
    """
    on = search_device_of(backend, device) or torch.device("cpu")
    n_ref = q.shape[0] if ref is None else ref.shape[0]
    chunk = query_chunk(n_ref, backend, chunk_size, device)
    return _search(q, k, ref, distance, on, chunk, shard, codes, None)


def _search_points(q: np.ndarray, ref: np.ndarray | None, distance: Distance) -> Points:
    """What every back end searches, ``ref`` being ``q`` itself for a leave-one-out search
    (``ref`` None).

    ``unit``: the power of two the points were scaled by (euclidean; squared distances of float32
    values overflow above ~1e19 and vanish below ~1e-19, where the order would be lost). Where
    either input is float64, ``exact`` holds the float64 points centred on the reference mean
    (``q``, ``ref``), and the returned ``q`` and ``ref`` are them rounded to float32.
    """
    exclude_self = ref is None
    if ref is None:
        ref = q
    # A power of two brings the values near 1, exactly.
    unit = power_of_two_scale(q, ref) if distance == "euclidean" else 1.0
    if unit != 1.0:
        q = q * unit
        ref = q if exclude_self else ref * unit
    exact = None
    if q.dtype == np.float64 or ref.dtype == np.float64:
        centre = ref.mean(axis=0, dtype=np.float64)  # (d,)
        q_exact = q.astype(np.float64) - centre
        ref_exact = q_exact if exclude_self else ref.astype(np.float64) - centre
        exact = (q_exact, ref_exact)
        q = q_exact.astype(np.float32)
        ref = q if exclude_self else ref_exact.astype(np.float32)
    return Points(q, ref, unit, exact, exclude_self)


def _may_miss_one(last: Any, tol: Any, kth: Any) -> Any:
    """``(c,)`` the rows whose float32 candidates may miss one of their ``k`` nearest, numpy or
    torch, all float64: ``last`` each row's farthest float32 candidate, ``kth`` its ``k``-th
    distance (exact where near-ties were re-scored; else its float32 one, whose gaps to its
    neighbours exceed ``tol``).

    A reference left out of a row's candidates has a float32 distance of at least the last
    candidate's, so an exact one of at least that less the rounding bound ``tol``. Where that
    could still reach the row's ``k``-th exact distance (more points than the list holds
    coincide in float32: near-duplicates, or points closer than float32 resolves), the list
    cannot be trusted, and the row's nearest are taken from all references, exactly
    (`_host_search.exact_nearest`, or its twin on the search's device).
    """
    return last - tol <= kth


def power_of_two_scale(q: np.ndarray, ref: np.ndarray) -> float:
    """``2**e`` that brings the largest magnitude of ``q`` and ``ref`` near 1 (1.0 when it is
    already within ``[2**-20, 2**20]``, or all values are 0)."""
    # max and -min instead of abs: no (n, d) temporary; ref is often q itself.
    arrays = [q] if ref is q else [q, ref]
    peak = max((max(float(a.max()), -float(a.min())) for a in arrays if a.size), default=0.0)
    if peak == 0.0 or 2.0**-20 <= peak <= 2.0**20:
        return 1.0
    return float(2.0 ** -np.round(np.log2(peak)))


@refuse_renamed(metric="distance")
def knn_search(
    query: Any,
    k: int,
    reference: Any = None,
    *,
    distance: Distance = "euclidean",
    backend: Backend = "auto",
    device: DeviceSpec = "auto",
    chunk_size: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact k nearest neighbours of every query, as two ``(m, k)`` arrays.

    The same search as `iter_knn` (its arguments), concatenated; prefer `iter_knn` when
    ``m * k`` is large.

    Returns
    -------
    distances : numpy.ndarray
        ``(m, k)`` float32, ascending along each row.
    indices : numpy.ndarray
        ``(m, k)`` int64 reference rows.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0], [1.0], [3.0]])
    >>> knn_search(x, 1)[1].ravel().tolist()
    [1, 0, 1]
    """
    dists, idxs = [], []
    for _, d, i in iter_knn(
        query,
        k,
        reference,
        distance=distance,
        backend=backend,
        device=device,
        chunk_size=chunk_size,
    ):
        dists.append(d)
        idxs.append(i)
    return np.concatenate(dists), np.concatenate(idxs)
