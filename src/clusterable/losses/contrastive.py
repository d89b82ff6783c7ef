"""Contrastive loss over every pair of the batch.

Hadsell, Chopra, LeCun. Dimensionality Reduction by Learning an Invariant Mapping. CVPR 2006;
in the form of Oh Song et al., Deep Metric Learning via Lifted Structured Feature Embedding,
CVPR 2016, Eq. (1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import torch
from torch import Tensor

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
        distances = pairs.distances  # (n, n + m)
        positive, negative = pairs.positive, pairs.negative  # (n, n + m) each
        hinge = (self.margin - distances).clamp_min(0).square()  # (n, n + m)
        # Every pair i < j of the batch appears twice in its block: the mean over ordered pairs
        # is the mean over unordered ones. The diagonal (the anchor itself) is neither.
        pair_terms = torch.where(
            positive, distances.square(), torch.where(negative, hinge, 0.0)
        )  # (n, n + m)
        n, partners = distances.shape
        return pair_terms.sum() / max(n * (partners - 1), 1)
