"""MsDNN: the expected leave-one-out 1-NN margin under a logistic loss.

Chauhan, Davoudi, Komeili. "Multi-scale Deep Nearest Neighbors". IJCNN 2021 (arXiv:2104.08494).

For each item i, the hits ``H_i`` (same label, j != i) and misses ``M_i`` (other labels) are weighed
by the kernel ``k(D) = exp(-D / sigma)`` into the probabilities of being i's nearest hit and nearest
miss (Eq. 3, 4); the expected margin is (Eq. 2)::

    r_i = ||f_i - sum_{j in M_i} P_NM(j) f_j||^2 - ||f_i - sum_{j in H_i} P_NH(j) f_j||^2

and the loss is ``softplus(-r_i)`` (Eq. 5). sigma sets the scale: small sigma looks at the nearest
neighbours and keeps sub-classes apart, large sigma looks at the whole class and merges them.
MsDNN-AE adds a reconstruction term (Eq. 6): :class:`~clusterable.losses.AutoencoderLoss`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import torch.nn.functional as F
from torch import Tensor

from clusterable._ranges import Bounds
from clusterable.losses._pairs import masked_softmax
from clusterable.losses._registry import register_loss
from clusterable.losses.pair_loss import PairLoss, Pairs, partner_pairs


def _expectation(probability: Tensor, embeddings: Tensor, references: Tensor | None) -> Tensor:
    """``sum_j P_ij f_j`` over the partners (the batch, then the references): ``(n, d)``.

    One product per block, so that the backward pass builds no gradient for the ``m`` reference
    rows, which a memory's are not asking for.
    """
    if references is None:
        return probability @ embeddings
    n = embeddings.shape[0]
    return probability[:, :n] @ embeddings + probability[:, n:] @ references


#: The range of the kernel scale sigma of ``exp(-D / sigma)`` (MsDNN Eq. 2-3): a width, > 0.
KERNEL_SCALE = Bounds(0, low_open=True)


def expected_margin_of_pairs(
    pairs: Pairs, sigma: float, detach_weights: bool = True
) -> tuple[Tensor, Tensor]:
    """MsDNN expected margin ``r_i`` (Eq. 2-4) from the batch's :class:`Pairs`.

    ``pairs`` must hold centred points (``partner_pairs(..., centre=True)``): ``r_i`` depends on
    differences only, and centred points keep ``f_i - E[f]`` exact far from the origin.
    See :func:`expected_margin` for the parameters and the result.
    """
    # Softmax of -D / sigma in the log domain: sigma = 1e-4 would underflow exp(-D / sigma).
    logits = -pairs.distances / sigma  # (n, n + m)
    if detach_weights:
        logits = logits.detach()
    hit_probability = masked_softmax(logits, pairs.positive, dim=1)  # (n, n + m), P_NH
    miss_probability = masked_softmax(logits, pairs.negative, dim=1)  # (n, n + m), P_NM
    embeddings, references = pairs.embeddings, pairs.references  # (n, d), (m, d)
    expected_hit = _expectation(hit_probability, embeddings, references)  # (n, d)
    expected_miss = _expectation(miss_probability, embeddings, references)  # (n, d)
    valid = pairs.positive.any(dim=1) & pairs.negative.any(dim=1)  # (n,)
    margin = (embeddings - expected_miss).square().sum(1) - (
        embeddings - expected_hit
    ).square().sum(1)  # (n,)
    return margin.masked_fill(~valid, 0.0), valid


def expected_margin(
    embeddings: Tensor,
    labels: Tensor,
    sigma: float,
    squared: bool = False,
    detach_weights: bool = True,
    ref_embeddings: Tensor | None = None,
    ref_labels: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """MsDNN expected margin ``r_i`` of every item (Eq. 2-4) and which items have one.

    The hits and misses of item i are the other batch items and, when given, the references (a
    cross-batch memory): the expectations then run over both.

    Parameters
    ----------
    embeddings : Tensor
        ``(n, d)``.
    labels : Tensor
        ``(n,)`` integer labels.
    sigma : float
        Kernel scale of ``k(D) = exp(-D / sigma)``.
    squared : bool
        Use squared Euclidean distances in the kernel (the paper says "Euclidean").
    detach_weights : bool
        Compute the nearest-hit/miss probabilities without gradient, as Algorithm 1 does with the
        previous parameters; ``False`` differentiates through them too.
    ref_embeddings, ref_labels : Tensor, optional
        ``(m, d)`` and ``(m,)`` reference items.

    Returns
    -------
    margin : Tensor
        ``(n,)`` expected margins; 0 for items without a hit or without a miss.
    valid : Tensor
        ``(n,)`` bool, the items with at least one hit and one miss.
    """
    pairs = partner_pairs(
        embeddings, labels, ref_embeddings, ref_labels, squared=squared, centre=True
    )
    return expected_margin_of_pairs(pairs, sigma, detach_weights)


@register_loss("msdnn")
class MsDNNLoss(PairLoss):
    """Multi-scale Deep Nearest Neighbours loss (MsDNN Eq. 5), averaged over the batch.

    ``loss = (1 / n) sum_i softplus(-r_i)`` with ``r_i`` the expected margin of
    :func:`expected_margin`. The paper sums over the batch (Eq. 5); we divide by the batch size n,
    the library's convention, which only rescales the learning rate. Items with no hit or no miss
    in the batch contribute 0 (and still count in n, since the paper's sum runs over all items).

    With references (a :class:`~clusterable.losses.CrossBatchMemory`), each item's hits and
    misses include them (see :func:`expected_margin`); the mean is still over the batch.

    Parameters
    ----------
    sigma : float
        Kernel scale, > 0 (the paper searches 2^-10 .. 2^10; Fig. 1 uses 1 and 25).
    squared : bool
        Squared distances in the kernel; default False (the paper says Euclidean distance).
    detach_weights : bool
        Default True: the hit/miss probabilities are constants in the gradient (Algorithm 1 computes
        them with the previous parameters). False gives the fully differentiable variant.

    Examples
    --------
    >>> import torch
    >>> loss = MsDNNLoss(sigma=1.0)
    >>> value = loss(torch.randn(8, 2), torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]))
    """

    centres_points = True

    argument_bounds: ClassVar[Mapping[str, Bounds]] = {"sigma": KERNEL_SCALE}

    def __init__(
        self, sigma: float = 1.0, squared: bool = False, detach_weights: bool = True
    ) -> None:
        self.check_arguments(sigma=sigma)
        self.check_flags(detach_weights=detach_weights)
        super().__init__(squared=squared)
        self.sigma = float(sigma)
        self.detach_weights = bool(detach_weights)

    def loss_on_pairs(self, pairs: Pairs) -> Tensor:
        margin, valid = expected_margin_of_pairs(pairs, self.sigma, self.detach_weights)  # (n,)
        terms = F.softplus(-margin).masked_fill(~valid, 0.0)  # (n,)
        return terms.sum() / len(pairs.labels)
