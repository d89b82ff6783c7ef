"""Contrastive loss over every pair of the batch.

Hadsell, Chopra, LeCun. Dimensionality Reduction by Learning an Invariant Mapping. CVPR 2006;
in the form of Oh Song et al., Deep Metric Learning via Lifted Structured Feature Embedding,
CVPR 2016, Eq. (1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from clusterable._ranges import Bounds
from clusterable.losses._registry import register_loss
from clusterable.losses.pair_loss import PairLoss, Pairs


@register_loss("contrastive")
class ContrastiveLoss(PairLoss):
    r"""Contrastive loss (lifted-structure paper, Eq. 1), on all pairs ``i < j`` of the batch.

    .. math:: \frac{1}{|\{i<j\}|} \sum_{i<j} y_{ij} D_{ij}^2 + (1 - y_{ij}) [a - D_{ij}]_+^2,

    with ``D`` the Euclidean distance, ``y_ij = 1`` for same-label pairs and ``a`` the margin.

    Value convention: the mean over the ``n (n - 1) / 2`` unordered pairs. Eq. (1) draws ``m / 2``
    disjoint pairs from ``m`` images and divides by ``m``, i.e. half the mean over its pairs; the
    factor 2 is a learning-rate constant, and every pair of the batch is used here because the
    distances are computed for all of them anyway.

    With references (a :class:`~clusterable.losses.CrossBatchMemory`), the pairs are every batch
    item with every other batch item and every reference, and the mean runs over those
    ``n (n - 1) + n m`` ordered pairs (within the batch each pair appears twice, as before).

    Parameters
    ----------
    margin : float
        ``a`` > 0: negative pairs closer than this are pushed apart (at 0 none would be); the
        lifted-structure paper uses 1.0.
    normalize : bool
        l2-normalise the embeddings first (pytorch-metric-learning's default distance does);
        the paper uses raw embeddings.

    Notes
    -----
    A batch of one item gives 0, which back-propagates. Identical points give a finite gradient:
    the distance's gradient is 0 where two points coincide (see ``clusterable.losses._pairs``).

    Examples
    --------
    >>> import torch
    >>> loss = ContrastiveLoss(margin=1.0)
    >>> value = loss(torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))
    """

    argument_bounds: ClassVar[Mapping[str, Bounds]] = {"margin": Bounds(0, low_open=True)}

    def __init__(self, margin: float = 1.0, normalize: bool = False) -> None:
        self.check_arguments(margin=margin)
        super().__init__(normalize=normalize)
        self.margin = margin

    def loss_on_pairs(self, pairs: Pairs) -> Tensor:
        # Every pair i < j of the batch appears twice in its block: the mean over ordered pairs
        # is the mean over unordered ones. The diagonal (the anchor itself) is neither.
        total = _ContrastiveSum.apply(pairs.distances, pairs.positive, self.margin)
        n, partners = pairs.distances.shape
        return total / max(n * (partners - 1), 1)


class _ContrastiveSum(torch.autograd.Function):
    """``sum_P D^2 + sum_N [a - D]_+^2`` over ``(n, n + m)`` partner distances, whose gradient
    is ``2 D`` on the positives and ``-2 [a - D]_+`` on the negatives.

    Positives are few (a class's items), so the block is one hinge over every entry, with the
    positives and the anchors themselves (the diagonal) set to 0, and the positives a gather:
    three passes over the block forward and one backward, where masked selections (``where`` on
    both masks, and autograd's copy of each) took about ten (on a CPU, where a mask without
    pattern is slow, 0.71x of pytorch-metric-learning's ``ContrastiveLoss`` at n = 4,096). Each
    sum stays a sum of squares, so nothing cancels.
    """

    @staticmethod
    def forward(ctx: Any, distances: Tensor, positive: Tensor, margin: float) -> Tensor:
        hinge = (margin - distances).clamp_min_(0.0)  # (n, n + m)
        hinge.diagonal().zero_()  # the anchor itself: neither positive nor negative
        rows, cols = positive.nonzero(as_tuple=True)  # (p,) each
        hinge[rows, cols] = 0.0  # negatives alone keep their hinge
        positive_distances = distances[rows, cols]  # (p,)
        ctx.save_for_backward(hinge, rows, cols, positive_distances)
        return hinge.square().sum() + positive_distances.square().sum()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        hinge, rows, cols, positive_distances = ctx.saved_tensors
        grad_distances = hinge * (-2 * grad)  # (n, n + m)
        grad_distances[rows, cols] = (2 * grad) * positive_distances
        return grad_distances, None, None
