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

import torch
import torch.nn.functional as F
from torch import Tensor

from clusterable.losses._base import EmbeddingLoss
from clusterable.losses._pairs import masked_logsumexp, partner_distances, partner_masks
from clusterable.losses._registry import register_loss


def _masked_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """Row-wise softmax over the entries in ``mask``; rows with none are all 0, never NaN."""
    normaliser = masked_logsumexp(logits, mask, dim=1)  # (n,)
    # -inf outside the mask gives exp(...) = 0 with a zero gradient, even for huge logits.
    return (logits.masked_fill(~mask, float("-inf")) - normaliser[:, None]).exp()


def _expectation(probability: Tensor, embeddings: Tensor, references: Tensor | None) -> Tensor:
    """``sum_j P_ij f_j`` over the partners (the batch, then the references): ``(n, d)``.

    One product per block, so that the backward pass builds no gradient for the ``m`` reference
    rows, which a memory's are not asking for.
    """
    if references is None:
        return probability @ embeddings
    n = embeddings.shape[0]
    return probability[:, :n] @ embeddings + probability[:, n:] @ references


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
    hit, miss = partner_masks(labels, ref_labels)  # (n, n + m) each
    partners = embeddings if ref_embeddings is None else torch.cat([embeddings, ref_embeddings])
    # r_i depends on differences only: centring every item on one (constant) point keeps
    # f_i - E[f] exact far from the origin.
    origin = partners.detach().mean(0)  # (d,)
    embeddings = embeddings - origin  # (n, d)
    references = None if ref_embeddings is None else ref_embeddings - origin  # (m, d)
    if detach_weights:
        source = embeddings.detach()
        source_references = None if references is None else references.detach()
    else:
        source, source_references = embeddings, references
    # Softmax of -D / sigma in the log domain: sigma = 1e-4 would underflow exp(-D / sigma).
    logits = -partner_distances(source, source_references, squared=squared) / sigma  # (n, n + m)
    hit_probability = _masked_softmax(logits, hit)  # (n, n + m), P_NH
    miss_probability = _masked_softmax(logits, miss)  # (n, n + m), P_NM
    expected_hit = _expectation(hit_probability, embeddings, references)  # (n, d)
    expected_miss = _expectation(miss_probability, embeddings, references)  # (n, d)
    valid = hit.any(dim=1) & miss.any(dim=1)  # (n,)
    margin = (embeddings - expected_miss).square().sum(1) - (
        embeddings - expected_hit
    ).square().sum(1)  # (n,)
    return margin.masked_fill(~valid, 0.0), valid


@register_loss("msdnn")
class MsDNNLoss(EmbeddingLoss):
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

    def __init__(
        self, sigma: float = 1.0, squared: bool = False, detach_weights: bool = True
    ) -> None:
        super().__init__()
        if not float(sigma) > 0.0:
            raise ValueError(f"sigma is the kernel scale and must be positive, got {sigma}")
        self.sigma = float(sigma)
        self.squared = bool(squared)
        self.detach_weights = bool(detach_weights)

    accepts_references = True

    def compute(
        self,
        embeddings: Tensor,
        labels: Tensor,
        ref_embeddings: Tensor | None = None,
        ref_labels: Tensor | None = None,
    ) -> Tensor:
        margin, valid = expected_margin(
            embeddings,
            labels,
            self.sigma,
            self.squared,
            self.detach_weights,
            ref_embeddings,
            ref_labels,
        )  # (n,), (n,)
        terms = F.softplus(-margin).masked_fill(~valid, 0.0)  # (n,)
        return terms.sum() / len(labels)
