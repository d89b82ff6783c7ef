"""Tensor helpers every loss shares: pairwise distances, label masks, masked log-sum-exp.

All are O(n^2) in memory for a batch of n items (never O(n^2 d) or O(n^3)).
"""

from __future__ import annotations

import torch
from torch import Tensor

#: Added under the square root so that identical points give a finite gradient, not NaN.
DISTANCE_EPS = 1e-12


def squared_distances(x: Tensor, y: Tensor | None = None) -> Tensor:
    """Squared Euclidean distances ``||x_i - y_j||^2``, clamped at 0.

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
    """
    same = y is None
    y = x if y is None else y
    gram = x @ y.T  # (n, m)
    sq = (x * x).sum(1, keepdim=True) + (y * y).sum(1) - 2 * gram  # (n, m)
    sq = sq.clamp_min(0)
    if same:
        eye = torch.eye(sq.shape[0], dtype=torch.bool, device=sq.device)
        sq = sq.masked_fill(eye, 0.0)
    return sq


def euclidean_distances(x: Tensor, y: Tensor | None = None, eps: float = DISTANCE_EPS) -> Tensor:
    """Euclidean distances ``sqrt(||x_i - y_j||^2 + eps)``: ``(n, m)``, finite gradient at 0."""
    return (squared_distances(x, y) + eps).sqrt()


def pairwise_distances(x: Tensor, squared: bool = False) -> Tensor:
    """Distances within one batch, ``(n, n)``, squared or not."""
    return squared_distances(x) if squared else euclidean_distances(x)


def label_masks(labels: Tensor) -> tuple[Tensor, Tensor]:
    """Positive and negative pair masks of a batch.

    Parameters
    ----------
    labels : Tensor
        ``(n,)`` integer labels.

    Returns
    -------
    positive : Tensor
        ``(n, n)`` bool, ``y_i == y_j`` and ``i != j``.
    negative : Tensor
        ``(n, n)`` bool, ``y_i != y_j``.
    """
    same = labels[:, None] == labels[None, :]  # (n, n)
    eye = torch.eye(labels.shape[0], dtype=torch.bool, device=labels.device)
    return same & ~eye, ~same


def masked_logsumexp(x: Tensor, mask: Tensor, dim: int = -1, empty: float = 0.0) -> Tensor:
    """``log sum_{j: mask_j} exp(x_j)`` along ``dim``, stable and NaN-free.

    The maximum is subtracted before exponentiating; entries outside ``mask`` contribute neither
    value nor gradient; a slice with no entry in ``mask`` gives ``empty`` and zero gradient.

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
    masked = x.masked_fill(~mask, float("-inf"))
    has_any = mask.any(dim=dim, keepdim=True)
    peak = masked.amax(dim=dim, keepdim=True).detach()
    peak = torch.where(has_any, peak, torch.zeros_like(peak))
    total = (masked - peak).exp().sum(dim=dim, keepdim=True)
    total = torch.where(has_any, total, torch.ones_like(total))
    out = torch.where(has_any, total.log() + peak, torch.full_like(total, empty))
    return out.squeeze(dim)
