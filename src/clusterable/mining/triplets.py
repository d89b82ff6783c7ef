"""In-batch triplet mining: which (anchor, positive, negative) index triples a triplet loss uses.

Miners read a distance matrix without gradient and return index tensors; the loss then computes
its terms on those indices with gradient. The anchors are the batch's ``n`` items; positives and
negatives are drawn from the partners, the batch followed by ``m`` reference items (a cross-batch
memory) when ``ref_labels`` is given: distances are then ``(n, n + m)`` and a partner index
``j >= n`` is reference ``j - n``. Memory is ``O(|P| n)`` for ``|P|`` positive pairs, never
``O(n^3)``.
The distances are the losses' own, from :func:`clusterable.losses._pairs.squared_distances`: exact
in float32 for near-duplicates and far from the origin, so float32 mines the triplets float64 would.

References
----------
Schroff, Kalenichenko, Philbin. FaceNet. CVPR 2015 (semi-hard negatives).
Hermans, Beyer, Leibe. In Defense of the Triplet Loss. 2017 (batch-hard).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

Triplets = tuple[Tensor, Tensor, Tensor]
MiningStrategy = Literal["all", "semi-hard", "batch-hard"]
#: The mining modes of :func:`mine_triplets` and of the triplet loss's ``mining``.
MINING_STRATEGIES: tuple[str, ...] = ("all", "semi-hard", "batch-hard")


def check_label_tensor(labels: object, what: str = "labels") -> None:
    """Raise an error that says what is wrong with ``labels``, unless a 1-D integer tensor: the
    one check of class ids that miners and losses (:mod:`clusterable.losses._base`) take. Shape
    and dtype only, no value read back. A label tensor of shape ``(n, 1)`` would otherwise
    broadcast the comparison of labels into a wrong ``(n, n)`` result."""
    if not isinstance(labels, Tensor):
        raise TypeError(
            f"{what} must be a torch.Tensor, got {type(labels).__name__}; "
            "wrap arrays with torch.as_tensor(...)"
        )
    if labels.dim() != 1:
        raise ValueError(
            f"{what} must be 1-D (one class id an item), got shape {tuple(labels.shape)}; "
            f"flatten them with {what}.reshape(-1)"
        )
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(
            f"{what} must be integer class ids, got {labels.dtype}; convert with .long()"
        )


def _check_labels(labels: Tensor, ref_labels: Tensor | None, distances: Tensor | None) -> None:
    """Raise an error that says what is wrong with a miner's labels ``(n,)``, references' labels
    ``(m,)`` and ``(n, n + m)`` distances (`check_label_tensor`)."""
    check_label_tensor(labels)
    if ref_labels is not None:
        check_label_tensor(ref_labels, "ref_labels")
    if distances is None:
        return
    n = labels.shape[0]
    partners = n + (0 if ref_labels is None else ref_labels.shape[0])
    if not isinstance(distances, Tensor) or tuple(distances.shape) != (n, partners):
        shape = tuple(distances.shape) if isinstance(distances, Tensor) else type(distances)
        raise ValueError(
            f"distances must have shape ({n}, {partners}), one row per label and one column per "
            f"label and reference label, got {shape}"
        )


def _partner_labels(labels: Tensor, ref_labels: Tensor | None) -> Tensor:
    """Labels of the partners: the batch's ``(n,)``, then the references' ``(m,)``."""
    return labels if ref_labels is None else torch.cat([labels, ref_labels])


def _same_label(labels: Tensor, ref_labels: Tensor | None) -> tuple[Tensor, Tensor]:
    """``(n, n + m)`` masks: same label as the anchor, and positive (same label, not itself)."""
    same = labels[:, None] == _partner_labels(labels, ref_labels)[None, :]  # (n, n + m)
    positive = same.clone()
    # Entries (i, i), the anchor itself, through a diagonal view: torch.compile cannot trace
    # fill_diagonal_ on a column slice (an as_strided view).
    positive.diagonal().fill_(False)
    return same, positive


def positive_pairs(labels: Tensor, ref_labels: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Ordered positive pairs ``(a, p)``, ``y_a == y_p`` and ``a != p``: two ``(|P|,)`` tensors."""
    _check_labels(labels, ref_labels, None)
    _, positive = _same_label(labels, ref_labels)
    anchor, partner = positive.nonzero(as_tuple=True)
    return anchor, partner


def _pairs_with_negatives(
    labels: Tensor, ref_labels: Tensor | None
) -> tuple[Tensor, Tensor, Tensor]:
    """Positive pairs and, for each, the ``(|P|, n + m)`` mask of its anchor's negatives."""
    anchor, positive = positive_pairs(labels, ref_labels)
    partners = _partner_labels(labels, ref_labels)  # (n + m,)
    is_negative = labels[anchor][:, None] != partners[None, :]  # (|P|, n + m)
    return anchor, positive, is_negative


def all_triplets(labels: Tensor, ref_labels: Tensor | None = None) -> Triplets:
    """Every valid triplet: ``y_a == y_p``, ``a != p``, ``y_n != y_a``."""
    anchor, positive, is_negative = _pairs_with_negatives(labels, ref_labels)
    pair_index, negative = is_negative.nonzero(as_tuple=True)
    return anchor[pair_index], positive[pair_index], negative


def semi_hard_triplets(
    distances: Tensor, labels: Tensor, margin: float, ref_labels: Tensor | None = None
) -> Triplets:
    """FaceNet semi-hard triplets: every valid triplet with ``D_ap < D_an < D_ap + margin``.

    These are the negatives farther than the positive that still violate the margin. No fallback
    is made when a pair has none: a batch that already satisfies the margin mines nothing.

    Parameters
    ----------
    distances : Tensor
        ``(n, n + m)`` distances, in the same form the loss uses (squared for FaceNet).
    labels : Tensor
        ``(n,)`` integer labels.
    margin : float
        The triplet margin.
    ref_labels : Tensor, optional
        ``(m,)`` labels of the references.
    """
    _check_labels(labels, ref_labels, distances)
    distances = distances.detach()
    anchor, positive, is_negative = _pairs_with_negatives(labels, ref_labels)
    d_ap = distances[anchor, positive][:, None]  # (|P|, 1)
    d_an = distances[anchor]  # (|P|, n + m)
    semi_hard = is_negative & (d_an > d_ap) & (d_an < d_ap + margin)  # (|P|, n + m)
    pair_index, negative = semi_hard.nonzero(as_tuple=True)
    return anchor[pair_index], positive[pair_index], negative


def batch_hard_triplets(
    distances: Tensor, labels: Tensor, ref_labels: Tensor | None = None
) -> Triplets:
    """Batch-hard triplets: for each anchor, its farthest positive and its nearest negative.

    Anchors without a positive or without a negative among their partners are skipped.
    """
    _check_labels(labels, ref_labels, distances)
    distances = distances.detach()
    same, positive_mask = _same_label(labels, ref_labels)  # (n, n + m) each
    valid = positive_mask.any(1) & (~same).any(1)  # (n,)
    hardest_positive = distances.masked_fill(~positive_mask, float("-inf")).argmax(1)  # (n,)
    hardest_negative = distances.masked_fill(same, float("inf")).argmin(1)  # (n,)
    anchor = valid.nonzero(as_tuple=True)[0]
    return anchor, hardest_positive[anchor], hardest_negative[anchor]


def mine_triplets(
    strategy: MiningStrategy,
    distances: Tensor,
    labels: Tensor,
    margin: float,
    ref_labels: Tensor | None = None,
) -> Triplets:
    """Mine with one of :data:`MINING_STRATEGIES`: ``"all"``, ``"semi-hard"``, ``"batch-hard"``."""
    if strategy == "all":
        return all_triplets(labels, ref_labels)
    if strategy == "semi-hard":
        return semi_hard_triplets(distances, labels, margin, ref_labels)
    if strategy == "batch-hard":
        return batch_hard_triplets(distances, labels, ref_labels)
    raise ValueError(
        f"unknown mining strategy {strategy!r}; choose one of: {', '.join(MINING_STRATEGIES)}"
    )
