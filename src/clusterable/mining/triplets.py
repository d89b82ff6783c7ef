"""In-batch triplet mining: which (anchor, positive, negative) index triples a triplet loss uses.

Miners read a distance matrix without gradient and return index tensors; the loss then computes
its terms on those indices with gradient. Memory is O(|P| n) for |P| positive pairs, never O(n^3).
The distances are the losses' own, from :func:`clusterable.losses._pairs.squared_distances`: exact
in float32 for near-duplicates and far from the origin, so float32 mines the triplets float64 would.

References
----------
Schroff, Kalenichenko, Philbin. FaceNet. CVPR 2015 (semi-hard negatives).
Hermans, Beyer, Leibe. In Defense of the Triplet Loss. 2017 (batch-hard).
"""

from __future__ import annotations

from typing import Literal

from torch import Tensor

Triplets = tuple[Tensor, Tensor, Tensor]
MiningStrategy = Literal["all", "semi-hard", "batch-hard"]
MINING_STRATEGIES: tuple[str, ...] = ("all", "semi-hard", "batch-hard")


def positive_pairs(labels: Tensor) -> tuple[Tensor, Tensor]:
    """Ordered positive pairs ``(a, p)``, ``y_a == y_p`` and ``a != p``: two ``(|P|,)`` tensors."""
    same = labels[:, None] == labels[None, :]  # (n, n)
    same.fill_diagonal_(False)
    anchor, positive = same.nonzero(as_tuple=True)
    return anchor, positive


def _pairs_with_negatives(labels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Positive pairs and, for each, the ``(|P|, n)`` mask of its anchor's negatives."""
    anchor, positive = positive_pairs(labels)
    is_negative = labels[anchor][:, None] != labels[None, :]  # (|P|, n)
    return anchor, positive, is_negative


def all_triplets(labels: Tensor) -> Triplets:
    """Every valid triplet: ``y_a == y_p``, ``a != p``, ``y_n != y_a``."""
    anchor, positive, is_negative = _pairs_with_negatives(labels)
    pair_index, negative = is_negative.nonzero(as_tuple=True)
    return anchor[pair_index], positive[pair_index], negative


def semi_hard_triplets(distances: Tensor, labels: Tensor, margin: float) -> Triplets:
    """FaceNet semi-hard triplets: every valid triplet with ``D_ap < D_an < D_ap + margin``.

    These are the negatives farther than the positive that still violate the margin. No fallback
    is made when a pair has none: a batch that already satisfies the margin mines nothing.

    Parameters
    ----------
    distances : Tensor
        ``(n, n)`` distances, in the same form the loss uses (squared for FaceNet).
    labels : Tensor
        ``(n,)`` integer labels.
    margin : float
        The triplet margin.
    """
    distances = distances.detach()
    anchor, positive, is_negative = _pairs_with_negatives(labels)
    d_ap = distances[anchor, positive][:, None]  # (|P|, 1)
    d_an = distances[anchor]  # (|P|, n)
    semi_hard = is_negative & (d_an > d_ap) & (d_an < d_ap + margin)  # (|P|, n)
    pair_index, negative = semi_hard.nonzero(as_tuple=True)
    return anchor[pair_index], positive[pair_index], negative


def batch_hard_triplets(distances: Tensor, labels: Tensor) -> Triplets:
    """Batch-hard triplets: for each anchor, its farthest positive and its nearest negative.

    Anchors without a positive or without a negative in the batch are skipped.
    """
    distances = distances.detach()
    same = labels[:, None] == labels[None, :]  # (n, n)
    positive_mask = same.clone()
    positive_mask.fill_diagonal_(False)
    valid = positive_mask.any(1) & (~same).any(1)  # (n,)
    hardest_positive = distances.masked_fill(~positive_mask, float("-inf")).argmax(1)  # (n,)
    hardest_negative = distances.masked_fill(same, float("inf")).argmin(1)  # (n,)
    anchor = valid.nonzero(as_tuple=True)[0]
    return anchor, hardest_positive[anchor], hardest_negative[anchor]


def mine_triplets(
    strategy: MiningStrategy, distances: Tensor, labels: Tensor, margin: float
) -> Triplets:
    """Mine with one of :data:`MINING_STRATEGIES`: ``"all"``, ``"semi-hard"``, ``"batch-hard"``."""
    if strategy == "all":
        return all_triplets(labels)
    if strategy == "semi-hard":
        return semi_hard_triplets(distances, labels, margin)
    if strategy == "batch-hard":
        return batch_hard_triplets(distances, labels)
    raise ValueError(
        f"unknown mining strategy {strategy!r}; choose one of: {', '.join(MINING_STRATEGIES)}"
    )
