"""The torch back end of the exact kNN search, every step on the search's device.

`TorchSearch` computes each chunk's distances and selects its candidates (`select_smallest`,
by `TOPK_STRATEGY`), and re-scores candidates exactly in float64. The
ranking steps of `clusterable.evaluate.neighbors` have their torch forms here:
`order_by_value_then_id` (one sort of 64-bit keys, as `_host_search.sort_rows` on the host),
`order_by_key_then_id` (float64 keys: two stable sorts) and `near_ties` (the runs of
`_host_search.near_ties` numbered densely: no per-row loop, no host round trip). A chunk's
candidates never leave the device; `DeviceSteps` are these steps as the search loop of
`clusterable.evaluate.neighbors` takes them. Where `CANDIDATE_PASS` names one for the device, the
candidates come from a low-precision pass re-scored in float32 (`_low_precision`): the same
references, fewer float32 products.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from clusterable.evaluate._host_search import screen_margin
from clusterable.evaluate._inputs import Metric as Distance
from clusterable.evaluate._low_precision import CandidatePass, Precision

if TYPE_CHECKING:
    from clusterable.evaluate.neighbors import Points

TopkStrategy = Literal["sorted", "unsorted", "segmented"]

#: How each chunk's ``kk`` smallest distances are selected (`select_smallest`): ``"sorted"``
#: ``torch.topk(sorted=True)``; ``"unsorted"`` ``torch.topk(sorted=False)``, the candidates
#: being sorted by (distance, id) afterwards anyway; ``"segmented"`` the row cut into
#: `TOPK_SEGMENTS` segments, the ``kk`` smallest of each, then the ``kk`` smallest of those.
#: ``benchmarks/bench_gpu_evaluate.py --probe-topk`` times the three on a GPU; until it has run,
#: ``"unsorted"``, since the candidates' own sort makes topk's sorting redundant work.
TOPK_STRATEGY: TopkStrategy = "unsorted"

#: Segments of a row for the ``"segmented"`` strategy; the reference is padded to a multiple of
#: it (the padding at distance +inf, never selected).
TOPK_SEGMENTS = 16

#: Elements of the float64 ``(pairs, d)`` block re-scored at once (128 MB).
RESCORE_BLOCK = 1 << 24

#: The candidate pass of the search on each kind of device: None, the float32 products; or a
#: low-precision pass (``"bf16"``, ``"tf32"`` on CUDA) whose candidates are re-scored in float32,
#: with the same neighbours (`_low_precision`). Opt-in until ``make gpu-check`` (step e,
#: ``bench_gpu_evaluate.py``) shows it faster on a GPU; then ``"cuda": "tf32"``.
CANDIDATE_PASS: dict[str, Precision | None] = {"cuda": None, "cpu": None}


@contextmanager
def ieee_float32_products() -> Iterator[None]:
    """float32 matrix products in IEEE float32 within the block, whatever the user set: with
    TF32 (``torch.backends.cuda.matmul.allow_tf32``, ``set_float32_matmul_precision("high")``)
    a product keeps 10 bits of mantissa, and distances off by about 1e-3 of their size would
    escape the float32 near-tie bound that sends candidates to the exact re-scoring."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def select_smallest(
    x: torch.Tensor, kk: int, strategy: TopkStrategy | None = None, segments: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``kk`` smallest values of each row of ``(c, n)`` ``x`` and their columns, ``(c, kk)``
    each, in an order that depends on ``strategy`` (`TOPK_STRATEGY` when None).

    ``"segmented"`` needs ``n`` a multiple of ``segments`` (`TOPK_SEGMENTS` when None) and
    segments of at least ``kk``; otherwise the row is selected whole, unsorted.
    """
    strategy = TOPK_STRATEGY if strategy is None else strategy
    segments = TOPK_SEGMENTS if segments is None else segments
    c, n = x.shape
    width = n // segments
    if strategy == "segmented" and segments > 1 and n % segments == 0 and width >= kk:
        values, local = x.view(c, segments, width).topk(kk, dim=2, largest=False, sorted=False)
        columns = local + width * torch.arange(segments, device=x.device)[:, None]  # (c, S, kk)
        values, pick = values.reshape(c, -1).topk(kk, dim=1, largest=False, sorted=False)
        return values, columns.reshape(c, -1).gather(1, pick)
    return x.topk(kk, dim=1, largest=False, sorted=strategy == "sorted")


def order_by_value_then_id(
    values: torch.Tensor, ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(c, kk)`` float32 ``values`` (non-negative, or +inf) and int64 ``ids`` (``< 2**31``),
    each row ordered by (value, id): one sort of 64-bit keys, the value's bits above the id's."""
    # A non-negative float32's bits sort as the float does; clearing the sign makes -0.0 0.0.
    bits = values.view(torch.int32) & 0x7FFFFFFF
    keys, _ = ((bits.to(torch.int64) << 32) | ids).sort(dim=1)
    return (keys >> 32).to(torch.int32).view(torch.float32), keys & 0xFFFFFFFF


def order_by_key_then_id(
    keys: torch.Tensor, ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(c, kk)`` float64 ``keys`` and int64 ``ids``, each row ordered by (key, id): by id, then
    stably by key."""
    by_id = ids.argsort(dim=1)  # a row's ids are distinct
    keys, ids = keys.gather(1, by_id), ids.gather(1, by_id)
    by_key = keys.argsort(dim=1, stable=True)
    return keys.gather(1, by_key), ids.gather(1, by_key)


def near_ties(keys: torch.Tensor, tol: torch.Tensor, same: torch.Tensor | None) -> torch.Tensor:
    """``(c, kk)`` mask of the candidates to re-score exactly: `_host_search.near_ties` on a
    device, for ``(c, kk)`` ascending float64 ``keys``, ``(c,)`` ``tol`` and ``(c, kk)`` bool
    ``same`` (or None).

    Each candidate's run is numbered by the breaks (gaps beyond ``tol``) before it, run 0 of a
    row holding the query itself (of its own class); a run mixes both kinds where its count of
    candidates of the query's class is neither 0 nor its size.
    """
    c, kk = keys.shape
    near_gap = torch.diff(keys, dim=1, prepend=keys.new_zeros(c, 1)) <= tol[:, None]  # (c, kk)
    rescore = near_gap.clone()
    rescore[:, :-1] |= near_gap[:, 1:]
    if same is None:
        return rescore
    run = (~near_gap).cumsum(dim=1) + (kk + 1) * torch.arange(c, device=keys.device)[:, None]
    members = torch.zeros(c * (kk + 1), dtype=torch.int64, device=keys.device)
    alike = torch.zeros_like(members)
    members.scatter_add_(0, run.reshape(-1), torch.ones_like(run).reshape(-1))
    alike.scatter_add_(0, run.reshape(-1), same.reshape(-1).to(torch.int64))
    members[:: kk + 1] += 1  # the query itself
    alike[:: kk + 1] += 1
    return rescore & ((alike > 0) & (alike < members))[run]


class TorchSearch:
    """The references on one device: each chunk's candidates (`candidates`) and their exact
    re-scoring (`rescore`), both there.

    ``exact_reference``: the float64 references that float64 inputs are re-scored against. The
    references are held padded to a multiple of `TOPK_SEGMENTS` rows, the padding's squared
    norm +inf. ``precision``: the low-precision candidate pass (`_low_precision.CandidatePass`),
    or None for the float32 products alone.
    """

    def __init__(
        self,
        reference: np.ndarray,
        device: torch.device,
        exact_reference: np.ndarray | None,
        precision: Precision | None = None,
    ) -> None:
        n, d = reference.shape
        padded = torch.zeros(-(-n // TOPK_SEGMENTS) * TOPK_SEGMENTS, d, device=device)
        padded[:n].copy_(torch.from_numpy(reference))  # no second copy on the device
        self.padded = padded  # (n', d) float32
        self.ref = padded[:n]  # (n, d)
        self.ref_sq = (padded * padded).sum(1)  # (n',)
        self.ref_sq[n:] = torch.inf
        self.exact_ref: torch.Tensor | None = None
        if exact_reference is not None:
            self.exact_ref = torch.from_numpy(exact_reference).to(device)  # (n, d) float64
        self.low_pass = None
        if precision is not None:
            self.low_pass = CandidatePass(padded, self.ref_sq, n, precision)

    def candidates(self, queries: torch.Tensor, kk: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``kk`` nearest references of each of the ``(c, d)`` float32 ``queries`` by float32
        squared distance: ``(c, kk)`` distances (non-negative) and int64 ids, in no set order;
        through the low-precision pass where there is one (the same references)."""
        if self.low_pass is not None:
            return self.low_pass.candidates(queries, kk, self.float32_candidates)
        return self.float32_candidates(queries, kk)

    def float32_candidates(
        self, queries: torch.Tensor, kk: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`candidates` from the float32 products of every reference."""
        # |r|^2 - 2 q.r in one product: |q|^2, the same along a row, is added to the kk only.
        with ieee_float32_products():
            partial = torch.addmm(self.ref_sq, queries, self.padded.T, alpha=-2.0)  # (c, n')
        values, ids = select_smallest(partial, kk)
        values += (queries * queries).sum(1, keepdim=True)
        return values.clamp_min_(0.0), ids

    def rescore(
        self, queries: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, exact: bool
    ) -> torch.Tensor:
        """``(e,)`` float64 ``|queries[rows] - reference[cols]|^2``, against the float64
        references when ``exact`` (``queries`` then float64 too)."""
        reference = self.exact_ref if exact else self.ref
        assert reference is not None  # exact only for float64 inputs, which hold exact_ref
        out = torch.empty(rows.shape[0], dtype=torch.float64, device=reference.device)
        step = max(1, RESCORE_BLOCK // reference.shape[1])
        for s in range(0, rows.shape[0], step):
            diff = reference[cols[s : s + step]].double() - queries[rows[s : s + step]].double()
            out[s : s + step] = diff.square().sum(1)  # (b,)
        return out


class DeviceSteps:
    """The steps of the search loop (`neighbors._ranked_chunks`) in torch, every one on
    ``device`` (`TorchSearch`).

    Candidates come ordered by (float32 distance, id), so only the rows whose near-ties were
    re-scored are ordered again (every row, by its exact keys, for float64 inputs). On a GPU a
    chunk waits on the device only to learn where its near-ties are (and, for float64 inputs,
    its doubtful rows).
    """

    def __init__(
        self, points: Points, kk: int, codes: np.ndarray | None, device: torch.device
    ) -> None:
        self.points, self.kk, self.device = points, kk, device
        exact_ref = None if points.exact is None else points.exact[1]
        self.search = TorchSearch(points.ref, device, exact_ref, CANDIDATE_PASS.get(device.type))
        self.codes = None if codes is None else torch.from_numpy(codes).to(device)
        self.tolerances = torch.from_numpy(points.tolerances()).to(device)  # (m,)
        # (n,) float64 squared norms of the references `search_again` scores, made at first use.
        self._reference_sq: torch.Tensor | None = None

    def chunk(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The queries ``start:stop`` and their float32 candidates, ordered by (distance, id)."""
        if self.points.exclude_self:
            qc = self.search.ref[start:stop]  # (c, d)
        else:
            qc = torch.from_numpy(self.points.q[start:stop]).to(self.device)
        sq, idx = self.search.candidates(qc, self.kk)  # (c, kk)
        if self.points.exclude_self:
            # The query itself to the end, to be cut off; a row without it loses its farthest.
            own = torch.arange(start, stop, device=self.device)[:, None]
            sq.masked_fill_(idx == own, torch.inf)
        sq, idx = order_by_value_then_id(sq, idx)
        if self.points.exclude_self:
            sq, idx = sq[:, :-1], idx[:, :-1].contiguous()
        return qc, sq, idx

    @staticmethod
    def widen(values: torch.Tensor) -> torch.Tensor:
        """``values`` in float64."""
        return values.double()

    def rescore_every(self, start: int, stop: int, idx: torch.Tensor) -> torch.Tensor:
        """``(c, kk')`` exact float64 keys of every candidate (float64 inputs)."""
        exact, exact_ref = self.points.exact, self.search.exact_ref
        assert exact is not None and exact_ref is not None  # float64 inputs only, which hold them
        if self.points.exclude_self:
            exact_qc = exact_ref[start:stop]  # (c, d) float64
        else:
            exact_qc = torch.from_numpy(exact[0][start:stop]).to(self.device)
        rows = torch.arange(stop - start, device=self.device).repeat_interleave(idx.shape[1])
        return self.search.rescore(exact_qc, rows, idx.reshape(-1), exact=True).view(idx.shape)

    @staticmethod
    def kth(keys: torch.Tensor, k: int) -> torch.Tensor:
        """Each row's ``k``-th smallest key."""
        return keys.kthvalue(k, dim=1).values

    @staticmethod
    def row_list(mask: torch.Tensor) -> list[int]:
        """The indices of the True rows of ``mask``."""
        return mask.nonzero()[:, 0].tolist()

    def search_again(
        self, start: int, rows: list[int], width: int, within: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``width`` nearest of every reference, exactly, for the queries ``start + rows``
        (`exact_nearest`, on the device), whose ``width``-th exact squared distances lie within
        ``within``."""
        own = start + torch.tensor(rows, device=self.device)  # (b,)
        exact = self.points.exact
        reference = self.search.ref if exact is None else self.search.exact_ref
        assert reference is not None  # float64 inputs hold exact_ref
        if self.points.exclude_self:
            queries = reference[own]
        else:
            host = self.points.q if exact is None else exact[0]
            queries = torch.from_numpy(host[own.cpu().numpy()]).to(self.device)
        if self._reference_sq is None:  # once per search, where a row is first searched again
            self._reference_sq = reference.double().square().sum(1)  # (n,)
        return exact_nearest(
            queries,
            reference,
            self._reference_sq,
            own,
            width,
            within,
            self.points.exclude_self,
            self.search,
        )

    def rescore_near_ties(
        self,
        start: int,
        stop: int,
        qc: torch.Tensor,
        keys: torch.Tensor,
        tol: torch.Tensor,
        idx: torch.Tensor,
    ) -> torch.Tensor:
        """Re-score ``keys`` in place where near-ties need it; the rows to order again."""
        same = None if self.codes is None else self.codes[idx] == self.codes[start:stop, None]
        rows, cols = near_ties(keys, tol, same).nonzero(as_tuple=True)
        if rows.numel():
            keys[rows, cols] = self.search.rescore(qc, rows, idx[rows, cols], exact=False)
        return rows.unique()

    @staticmethod
    def order(
        keys: torch.Tensor, idx: torch.Tensor, k: int, rows: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``rows`` (None: all) ordered by (key, id), cut to ``k``: ``(c, k)`` keys and ids."""
        if rows is None:
            keys, idx = order_by_key_then_id(keys, idx)
        elif rows.numel():
            keys[rows], idx[rows] = order_by_key_then_id(keys[rows], idx[rows])
        return keys[:, :k], idx[:, :k]

    def distances(self, keys: torch.Tensor, distance: Distance) -> torch.Tensor:
        """The squared ``keys`` as ``distance`` values, back in the inputs' scale."""
        dist = keys.sqrt() / self.points.unit if distance == "euclidean" else keys / 2.0
        return dist.to(torch.float32 if self.points.exact is None else torch.float64)


#: Elements of the ``(queries, references)`` block of `exact_nearest` (64 MB in float32).
SCREEN_ELEMENTS = 1 << 24


def exact_nearest(
    queries: torch.Tensor,
    reference: torch.Tensor,
    ref_sq: torch.Tensor,
    own: torch.Tensor,
    width: int,
    within: torch.Tensor,
    exclude_self: bool,
    search: TorchSearch,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`_host_search.exact_nearest` on the references' device: the ``width`` nearest of every
    reference for each of the ``(b, d)`` ``queries`` (``ref_sq``: the references' ``(n,)``
    float64 squared norms), exactly, as ``(b, width)`` int64 ids
    ordered by (float64 squared distance, id) and those distances; screened by products in the
    references' precision (IEEE float32 products, whatever the TF32 setting), the few within
    ``within`` plus twice `screen_margin` scored exactly (`TorchSearch.rescore`)."""
    n, d = reference.shape
    exact = reference.dtype == torch.float64
    unit = torch.finfo(reference.dtype).eps / 2.0
    ids = torch.empty(len(queries), width, dtype=torch.int64, device=reference.device)
    keys = torch.empty(len(queries), width, dtype=torch.float64, device=reference.device)
    step = max(1, SCREEN_ELEMENTS // n)
    for s in range(0, len(queries), step):
        q = queries[s : s + step]  # (b, d)
        b = len(q)
        q_sq = q.double().square().sum(1)  # (b,)
        with ieee_float32_products():
            screened = torch.addmm(ref_sq.to(reference.dtype), q, reference.T, alpha=-2.0)
        screened += q_sq.to(reference.dtype)[:, None]  # (b, n)
        block_own = own[s : s + step]
        if exclude_self:
            screened[torch.arange(b, device=q.device), block_own] = torch.inf
        margin = screen_margin(q_sq, float(ref_sq.max()), d, unit)  # (b,)
        limit = within[s : s + step] + 2.0 * margin  # (b,)
        short = ((screened <= limit[:, None]).sum(1) < width).nonzero()[:, 0]
        if short.numel():
            kth = screened[short].kthvalue(width, dim=1).values
            limit[short] = kth.double() + 2.0 * margin[short]
        at, cols = (screened <= limit[:, None]).nonzero(as_tuple=True)
        if exclude_self:  # the query itself, where the limit is infinite
            keep = cols != block_own[at]
            at, cols = at[keep], cols[keep]
        distances = search.rescore(q, at, cols, exact)  # (m,) exact
        # By query, then (distance, index): nonzero gives each query's columns ascending.
        order = distances.argsort(stable=True)
        order = order[at[order].argsort(stable=True)]
        first = torch.searchsorted(at[order], torch.arange(b, device=q.device))  # (b,)
        taken = order[first[:, None] + torch.arange(width, device=q.device)]  # (b, width)
        ids[s : s + step], keys[s : s + step] = cols[taken], distances[taken]
    return ids, keys
