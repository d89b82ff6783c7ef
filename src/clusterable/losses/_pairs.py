"""Tensor helpers every loss shares: pairwise distances, centring, unit rows, masks, log-sum-exp.

Pairwise distances are the one mechanism behind every distance-based loss and miner, accurate to a
few units in the last place of the input precision wherever the result is representable:

- the points are rescaled by a power of two (exact) and centred on their mean (on the reference
  set's mean for distances to a reference set), so the Gram form
  ``|c_i|^2 + |c_j|^2 - 2 c_i.c_j`` sees the batch's spread, not its offset from the origin, and
  neither overflows nor underflows;
- a pair the Gram form cannot resolve (squared distance below ``NEAR_PAIR_RTOL`` of
  ``|c_i|^2 + |c_j|^2``: near-duplicates) is recomputed from the exact difference ``x_i - x_j``;
- the backward pass uses the difference form ``sum_j w_ij (x_i - x_j)``: the Gram form for the
  resolved pairs (their differences are not small against the points), the exact differences for
  the near pairs, never the cancelling ``w_ij x_i - w_ij x_j`` of autograd through the Gram matrix;
- the Euclidean distance has gradient ``(x_i - x_j) / D_ij``, and 0 at ``D_ij = 0`` (the minimal
  subgradient), so no epsilon under the square root bends distances at small scales.

Memory is O(n^2) for a batch of n items: the near pairs are processed in blocks of
``DIFFERENCE_BLOCK`` elements, never as an O(n^2 d) tensor.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

#: A pair whose Gram-form squared distance is below this fraction of ``|c_i|^2 + |c_j|^2`` (centred
#: points) is recomputed from its exact difference. The Gram form's absolute error is a few
#: ``eps (|c_i|^2 + |c_j|^2)``, so every pair kept has a relative error of at most ~100 eps.
NEAR_PAIR_RTOL = 1e-2

#: Elements of the ``(pairs, d)`` block of exact differences built at once (16 MiB in float32).
DIFFERENCE_BLOCK = 1 << 22

#: Largest power-of-two step one multiplication applies: 2^100 is a normal float32.
_MAX_STEP = 100


def peak_magnitude(x: Tensor) -> float:
    """``max |x|`` of a non-empty tensor: NaN when an entry is NaN, inf when one is infinite.

    One pass without an ``|x|`` copy and one read back: this runs on every batch and memory
    matrix. (``vector_norm(x, inf)`` makes the same pass, measured ten times slower on a CPU.)
    """
    low, high = torch.aminmax(x.detach())
    return float(torch.maximum(high, -low))


def _exponent_of_peak(x: Tensor) -> int:
    """``e`` with ``max |x| < 2^e <= 2 max |x|`` (0 for an empty or all-zero tensor)."""
    return math.frexp(peak_magnitude(x))[1] if x.numel() else 0


def _times_power_of_two(x: Tensor, exponent: int) -> Tensor:
    """``x * 2^exponent``: exact wherever the result is a normal number, in representable steps."""
    while exponent:
        step = max(-_MAX_STEP, min(_MAX_STEP, exponent))
        x = x * 2.0**step
        exponent -= step
    return x


def _exact_differences(
    points_x: Tensor, points_y: Tensor, rows: Tensor, cols: Tensor, exponent: int
) -> Tensor:
    """``(x_i - x_j) * 2^exponent`` of the pairs ``(rows, cols)``: ``(p, d)``, one rounding each."""
    return _times_power_of_two(points_x[rows] - points_y[cols], exponent)


def _blocks(rows: Tensor, cols: Tensor, dim: int) -> Iterator[tuple[Tensor, Tensor]]:
    """The near pairs in slices of at most ``DIFFERENCE_BLOCK`` difference elements."""
    step = max(1, DIFFERENCE_BLOCK // max(dim, 1))
    for start in range(0, rows.numel(), step):
        yield rows[start : start + step], cols[start : start + step]


def _raise_if_unrepresentable(peak: float, exponent: int, dtype: torch.dtype, what: str) -> None:
    """Raise a ``ValueError`` when ``peak * 2^exponent`` (the largest result) leaves ``dtype``."""
    info = torch.finfo(dtype)
    largest = math.ldexp(peak, exponent)
    if largest > info.max:
        raise ValueError(
            f"{what} between these embeddings reach {largest:.1e}, beyond the {dtype} range "
            f"({info.max:.1e}): scale the embeddings down, l2-normalise them (normalize=True where "
            "the loss offers it), or compute the loss in float64"
        )
    if 0.0 < largest < info.tiny:
        raise ValueError(
            f"the largest of the {what} between these embeddings is {largest:.1e}, below the "
            f"smallest normal {dtype} ({info.tiny:.1e}), so they cannot be told apart: scale the "
            "embeddings up, l2-normalise them (normalize=True where the loss offers it), or "
            "compute the loss in float64"
        )


class _PairDistances(torch.autograd.Function):
    """``D_ij = ||x_i - y_j||`` or ``D_ij^2``, exact to a few ulps, with a difference-form backward.

    See the module docstring. ``y=None`` means ``y = x``: the diagonal is then exactly 0 and each
    unordered pair is computed once.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor | None, squared: bool) -> Tensor:
        same = y is None
        n = x.shape[0]
        points = x if y is None else torch.cat([x, y])  # (n + m, d)
        outer = _exponent_of_peak(points)
        points = _times_power_of_two(points, -outer)  # (n + m, d), largest |entry| in [0.5, 1)
        # Against a reference set y (class centres, a memory bank) centre on y: its rows set the
        # geometry, and a loss whose weights over y cancel (a softmax against a target) then
        # meets its rounding at the scale of y's spread, not of x's offset from y.
        reference = points if same else points[n:]  # (m, d)
        centred = points - reference.mean(0)  # (n + m, d)
        inner = _exponent_of_peak(centred)
        centred = _times_power_of_two(centred, -inner)  # (n + m, d)
        # x_i - y_j = 2^exponent (c_i - c_j): distances come out in units of 2^exponent.
        exponent = outer + inner
        centred_x = centred[:n]  # (n, d)
        centred_y = centred_x if same else centred[n:]  # (m, d)
        norms_x = centred_x.square().sum(1)  # (n,)
        norms_y = norms_x if same else centred_y.square().sum(1)  # (m,)
        norm_sums = norms_x[:, None] + norms_y  # (n, m)
        # |c_i|^2 + |c_j|^2 - 2 c_i.c_j in one GEMM (the factor 2 is exact).
        squares = torch.addmm(norm_sums, centred_x, centred_y.T, alpha=-2).clamp_min_(0)  # (n, m)
        # At most the bound: two points at the centre itself (norm sum 0) count as near too,
        # so every zero distance off the diagonal is a near pair's (the backward relies on it).
        near = squares <= NEAR_PAIR_RTOL * norm_sums  # (n, m)
        if same:
            near = near.triu(1)  # (n, n), each unordered pair once
            squares.fill_diagonal_(0.0)
        rows, cols = near.nonzero(as_tuple=True)  # (p,) each
        points_x = points[:n]  # (n, d)
        points_y = points_x if same else points[n:]  # (m, d)
        for block_rows, block_cols in _blocks(rows, cols, x.shape[1]):
            exact = (
                _exact_differences(points_x, points_y, block_rows, block_cols, -inner)
                .square()
                .sum(1)
            )  # (b,)
            squares[block_rows, block_cols] = exact
            if same:
                squares[block_cols, block_rows] = exact
        peak = float(squares.max()) if squares.numel() else 0.0
        if squared:
            _raise_if_unrepresentable(peak, 2 * exponent, x.dtype, "squared distances")
            distances = _times_power_of_two(squares, 2 * exponent)  # (n, m)
            roots = None
        else:
            _raise_if_unrepresentable(math.sqrt(peak), exponent, x.dtype, "distances")
            roots = squares.sqrt_()  # (n, m), in units of 2^exponent (squares are not kept)
            distances = _times_power_of_two(roots, exponent)  # (n, m)
        ctx.same, ctx.squared, ctx.exponent, ctx.inner = same, squared, exponent, inner
        ctx.save_for_backward(centred_x, centred_y, points_x, points_y, rows, cols, roots)
        return distances

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        centred_x, centred_y, points_x, points_y, rows, cols, roots = ctx.saved_tensors
        near_grad = grad[rows, cols] + grad[cols, rows] if ctx.same else grad[rows, cols]  # (p,)
        if ctx.squared:
            # d D_ij^2 / d x_i = 2 (x_i - x_j) = 2^(exponent + 1) (c_i - c_j)
            weights, near_weights = grad, near_grad  # (n, m), (p,)
            out_exponent = ctx.exponent + 1
        else:
            # d D_ij / d x_i = (x_i - x_j) / D_ij = (c_i - c_j) / roots_ij, scale-free; 0 at D = 0.
            # A zero root is on the diagonal or a near pair's (forward), and both are set below:
            # the quotient's inf and nan there never reach the result, and no (n, m) mask is
            # built.
            weights = grad / roots  # (n, m)
            near_roots = roots[rows, cols]  # (p,)
            near_weights = torch.where(near_roots > 0, near_grad / near_roots, 0.0)  # (p,)
            out_exponent = 0
        if ctx.same:
            # (n, n): x_i is both ends of a pair. The transpose copied first (always a new
            # tensor): an elementwise sum that reads one side transposed runs 4x slower at
            # n = 1,024 on a CPU, whose strided reads miss the cache.
            weights = weights.T.clone(memory_format=torch.contiguous_format).add_(weights)
            weights.fill_diagonal_(0.0)
        if rows.numel():  # near pairs are rare: the others' weights, in place where it is new
            resolved = grad.clone() if weights is grad else weights  # (n, m)
            resolved.index_put_((rows, cols), resolved.new_zeros(()))
            if ctx.same:
                resolved.index_put_((cols, rows), resolved.new_zeros(()))
        else:
            resolved = weights  # (n, m)
        # sum_j w_ij (c_i - c_j) for the pairs the Gram form resolves.
        grad_x = torch.addmm(
            resolved.sum(1, keepdim=True) * centred_x, resolved, centred_y, alpha=-1
        )  # (n, d)
        # The far ends' gradient is needed to finish x's (y = x) or when y is trainable.
        needs_grad_y = not ctx.same and ctx.needs_input_grad[1]
        grad_y = (
            resolved.sum(0)[:, None] * centred_y - resolved.T @ centred_x if needs_grad_y else None
        )  # (m, d)
        grad_ends = grad_x if ctx.same else grad_y
        start = 0
        for block_rows, block_cols in _blocks(rows, cols, centred_x.shape[1]):
            block_weights = near_weights[start : start + block_rows.numel()]  # (b,)
            start += block_rows.numel()
            differences = _exact_differences(
                points_x, points_y, block_rows, block_cols, -ctx.inner
            )  # (b, d), c_i - c_j exactly
            terms = block_weights[:, None] * differences  # (b, d)
            grad_x.index_add_(0, block_rows, terms)
            if grad_ends is not None:
                grad_ends.index_add_(0, block_cols, -terms)
        grad_x = _times_power_of_two(grad_x, out_exponent)
        grad_y = None if grad_y is None else _times_power_of_two(grad_y, out_exponent)
        return grad_x, grad_y, None


def squared_distances(x: Tensor, y: Tensor | None = None) -> Tensor:
    """Squared Euclidean distances ``||x_i - y_j||^2``, accurate near duplicates and far from 0.

    Parameters
    ----------
    x : Tensor
        ``(n, d)``.
    y : Tensor, optional
        ``(m, d)``; ``x`` itself when omitted, and then the diagonal is exactly 0.

    Returns
    -------
    Tensor
        ``(n, m)``.

    Raises
    ------
    ValueError
        When the largest squared distance overflows the dtype, or underflows below its smallest
        normal number (the distances could no longer be compared).
    """
    return _PairDistances.apply(x, y, True)


def euclidean_distances(x: Tensor, y: Tensor | None = None) -> Tensor:
    """Euclidean distances ``||x_i - y_j||``: ``(n, m)``, gradient 0 where two points coincide.

    See :func:`squared_distances`; distances are representable down to the dtype's smallest
    normal number, so tiny embeddings keep their geometry. Raises ``ValueError`` on overflow.
    """
    return _PairDistances.apply(x, y, False)


def pairwise_distances(x: Tensor, squared: bool = False) -> Tensor:
    """Distances within one batch, ``(n, n)``, squared or not."""
    return squared_distances(x) if squared else euclidean_distances(x)


def centred(x: Tensor) -> Tensor:
    """``x`` minus its (constant) row mean: ``(n, d) -> (n, d)``, for translation-invariant terms.

    A term that depends on differences only (``x_i - E[x]``, ``L^T (a - p)``) has the same value
    and gradient on centred rows, but far from the origin float32 rounds the rows at the scale of
    the offset: centred, the rounding is at the scale of the batch's spread. The mean is detached,
    so the gradient is exactly the translation-invariant term's own.
    """
    return x - x.detach().mean(0)


def unit_rows(x: Tensor) -> Tensor:
    """Rows l2-normalised at any scale the dtype holds (zero rows stay 0): ``(n, d) -> (n, d)``.

    ``F.normalize`` squares the entries, so rows of 1e20 normalise to 0 in float32 (the norm
    overflows) and rows of 1e-25 to about 1e-13 (its epsilon); rescaling each row by a power of
    two first (exact, and invisible to the normalised result and its gradient) avoids both.
    """
    peak = x.detach().abs().amax(dim=1, keepdim=True)  # (n, 1)
    exponent = torch.frexp(peak).exponent.clamp(-_MAX_STEP, _MAX_STEP)  # (n, 1)
    return F.normalize(x * torch.exp2(-exponent.to(x.dtype)), dim=1)


def partner_distances(
    x: Tensor, references: Tensor | None = None, squared: bool = False, normalize: bool = False
) -> Tensor:
    """Distances from each batch item to its partners (the batch, then the refs): ``(n, n + m)``.

    The batch block is :func:`pairwise_distances` (exact 0 on the diagonal, each pair once), the
    reference block :func:`euclidean_distances` or :func:`squared_distances` against the
    references: both through the one accurate mechanism of this module.

    Parameters
    ----------
    x : Tensor
        ``(n, d)`` batch.
    references : Tensor, optional
        ``(m, d)`` reference set (a memory of past embeddings); omitted, the result is ``(n, n)``.
    squared : bool
        Squared Euclidean distances.
    normalize : bool
        l2-normalise the rows of both first (losses defined on the unit sphere).
    """
    if normalize:
        x = unit_rows(x)
        references = None if references is None else unit_rows(references)
    within = pairwise_distances(x, squared=squared)  # (n, n)
    if references is None:
        return within
    across = squared_distances(x, references) if squared else euclidean_distances(x, references)
    return torch.cat([within, across], dim=1)  # (n, n + m)


def partner_masks(labels: Tensor, ref_labels: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Positive and negative masks between the batch and its partners (the batch, then the refs).

    Parameters
    ----------
    labels : Tensor
        ``(n,)`` batch labels.
    ref_labels : Tensor, optional
        ``(m,)`` reference labels.

    Returns
    -------
    positive : Tensor
        ``(n, n + m)`` bool, same label and not the anchor itself (column ``i`` of row ``i``).
    negative : Tensor
        ``(n, n + m)`` bool, different labels.
    """
    partners = labels if ref_labels is None else torch.cat([labels, ref_labels])  # (n + m,)
    same = labels[:, None] == partners[None, :]  # (n, n + m)
    positive = same.clone()  # (n, n + m)
    # Entries (i, i), the anchor itself, through a diagonal view: torch.compile cannot trace
    # fill_diagonal_ on a column slice (an as_strided view), and no (n, n + m) eye is built.
    positive.diagonal().fill_(False)
    return positive, ~same


def _masked_weights(x: Tensor, mask: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    """``(softmax weights over the entries in mask, log of their sum)`` along ``dim``: the
    weights 0 outside the mask and on an empty slice, whose log-sum is 0.

    A term whose weight would be subnormal (below ``finfo.tiny``, far under the precision of a
    slice whose peak weighs at least ``1 / size``) is taken as 0: a CPU computes with subnormal
    numbers tens of times slower, and the losses' products with these weights were most of the
    soft nearest neighbour loss's time. The log-sum and the other weights move by less than
    ``size * tiny`` (``1e-34`` in float32 at 4,096 a slice).
    """
    return filled_weights(x.masked_fill(~mask, float("-inf")), dim)


def filled_weights(masked: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    """:func:`_masked_weights` of a tensor whose entries outside the mask are already ``-inf``;
    ``masked`` is overwritten (the weights are computed in its memory)."""
    # An empty slice's peak is -inf: taken as 0 there, its exponentials are all 0.
    peak = masked.amax(dim=dim, keepdim=True).nan_to_num_(neginf=0.0)
    shifted = masked.sub_(peak)  # <= 0, the peak 0
    # exp(s) / total < tiny for every s below log(tiny * size) (total <= size): none of the
    # weights kept below is subnormal, before or after the division by the total.
    floor = _subnormal_floor(masked.dtype, masked.shape[dim])
    weights = shifted.masked_fill_(shifted < floor, float("-inf")).exp_()  # 0 outside mask
    # A non-empty slice sums to >= 1 (its peak gives exp(0)): the floor of 1 only turns an
    # empty slice's 0 into log 1 = 0 (and its weights stay 0).
    total = weights.sum(dim=dim, keepdim=True).clamp_min_(1.0)
    return weights.div_(total), total.log_().add_(peak)


def _subnormal_floor(dtype: torch.dtype, size: int) -> float:
    """The shifted logit below which a slice of ``size`` entries' softmax weight is subnormal."""
    return math.log(torch.finfo(dtype).tiny * max(size, 1))


def entry_weights(values: Tensor, rows: Tensor, num_rows: int, size: int) -> tuple[Tensor, Tensor]:
    """:func:`_masked_weights` of a sparse mask: ``values`` ``(p,)`` are the entries of row
    ``rows`` ``(p,)`` of a ``(num_rows, size)`` matrix that are in the mask. The ``(p,)``
    weights, and each row's ``(num_rows,)`` log of their sum (0 for a row with no entry), with
    the same subnormal floor; O(p), for masks of a few entries a row (a batch's positives)."""
    peak = values.new_full((num_rows,), float("-inf"))
    peak = peak.scatter_reduce_(0, rows, values, "amax").nan_to_num_(neginf=0.0)  # (num_rows,)
    shifted = values - peak[rows]  # (p,), <= 0
    floor = _subnormal_floor(values.dtype, size)
    weights = shifted.masked_fill_(shifted < floor, float("-inf")).exp_()  # (p,)
    total = values.new_zeros(num_rows).index_add_(0, rows, weights).clamp_min_(1.0)  # (num_rows,)
    return weights.div_(total[rows]), total.log_().add_(peak)


class _MaskedLogSumExp(torch.autograd.Function):
    """``log sum_{j: mask_j} exp(x_j)`` along ``dim`` (0 on an empty slice), gradient the softmax.

    The gradient is the slice's softmax weights, kept from the forward pass: one product in the
    backward pass, where autograd through the stable composition replays about ten kernels
    (the launches dominate at small batches).
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, mask: Tensor, dim: int) -> Tensor:
        weights, log_total = _masked_weights(x, mask, dim)
        ctx.dim = dim
        ctx.save_for_backward(weights)
        return log_total.squeeze(dim)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (weights,) = ctx.saved_tensors
        return grad.unsqueeze(ctx.dim) * weights, None, None


class _MaskedSoftmax(torch.autograd.Function):
    """The softmax over the entries in ``mask`` along ``dim`` (0 elsewhere and on an empty
    slice), from the same pass as :class:`_MaskedLogSumExp`; gradient ``p (g - sum p g)``."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, mask: Tensor, dim: int) -> Tensor:
        weights, _ = _masked_weights(x, mask, dim)
        ctx.dim = dim
        ctx.save_for_backward(weights)
        return weights

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (weights,) = ctx.saved_tensors
        weighted = grad * weights
        return weighted - weights * weighted.sum(ctx.dim, keepdim=True), None, None


def masked_softmax(x: Tensor, mask: Tensor, dim: int = -1) -> Tensor:
    """Softmax along ``dim`` over the entries in ``mask`` (bool, broadcastable to ``x``): 0
    outside it, and a slice with no entry in it all 0 (never NaN); stable for any scale of
    ``x``, subnormal weights taken as 0, as in :func:`masked_logsumexp`."""
    return _MaskedSoftmax.apply(x, mask, dim)


def masked_logsumexp(x: Tensor, mask: Tensor, dim: int = -1, empty: float = 0.0) -> Tensor:
    """``log sum_{j: mask_j} exp(x_j)`` along ``dim``, stable and NaN-free.

    The maximum is subtracted before exponentiating; entries outside ``mask`` contribute neither
    value nor gradient; a slice with no entry in ``mask`` gives ``empty`` and zero gradient. A
    term whose softmax weight would be subnormal is left out (it moves the result by less than
    ``size * finfo.tiny``): subnormal numbers slow a CPU's products tens of times.

    Parameters
    ----------
    x : Tensor
        Values, any shape.
    mask : Tensor
        Bool, broadcastable to ``x``.
    dim : int
        Dimension to reduce.
    empty : float
        Value for slices with no masked-in entry.
    """
    out = _MaskedLogSumExp.apply(x, mask, dim)
    if empty != 0.0:
        out = torch.where(mask.any(dim=dim), out, empty)
    return out
