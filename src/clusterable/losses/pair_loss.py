"""The base of the pair- and triplet-based losses: distances and label masks, computed once.

Modelled on pytorch-metric-learning's ``GenericPairLoss``: every loss of this kind is a function
of the distances from each anchor (a batch item) to its partners (the other batch items, then the
references of a :class:`~clusterable.losses.CrossBatchMemory`) and of which partners share the
anchor's label. :class:`PairLoss` computes both once, through the accurate distances of
``clusterable.losses._pairs``, and hands them to :meth:`PairLoss.loss_on_pairs`, the one method a
pair loss implements. The lifted, contrastive, triplet, MsDNN, expected-triplet and SNN losses
are pair losses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from clusterable.losses._base import EmbeddingLoss
from clusterable.losses._pairs import partner_distances, partner_masks, unit_rows


@dataclass(frozen=True, eq=False)
class Pairs:
    """Every anchor of a batch against every partner: the batch, then the references.

    Column ``j < n`` of the ``(n, n + m)`` matrices is batch item ``j``, column ``n + k`` is
    reference ``k``; column ``i`` of row ``i`` is the anchor itself (distance exactly 0, neither
    positive nor negative).

    Attributes
    ----------
    embeddings : Tensor
        ``(n, d)`` anchors, as the distances are measured between them: l2-normalised when the
        loss normalises, centred when it centres (:attr:`PairLoss.centres_points`).
    references : Tensor or None
        ``(m, d)`` references, likewise; None without references.
    labels : Tensor
        ``(n,)`` anchor labels.
    ref_labels : Tensor or None
        ``(m,)`` reference labels; None without references.
    distances : Tensor
        ``(n, n + m)`` Euclidean distances, or squared ones when the loss asks for them.
    positive : Tensor
        ``(n, n + m)`` bool: same label as the anchor, the anchor itself excluded.
    negative : Tensor
        ``(n, n + m)`` bool: another label than the anchor's.
    """

    embeddings: Tensor
    references: Tensor | None
    labels: Tensor
    ref_labels: Tensor | None
    distances: Tensor
    positive: Tensor
    negative: Tensor

    @property
    def num_references(self) -> int:
        """``m``, the number of reference partners (0 without references)."""
        return 0 if self.references is None else self.references.shape[0]


def _centred_on_partners(
    embeddings: Tensor, ref_embeddings: Tensor | None
) -> tuple[Tensor, Tensor | None]:
    """The batch ``(n, d)`` and references ``(m, d)`` minus the partners' (constant) mean."""
    partners = embeddings if ref_embeddings is None else torch.cat([embeddings, ref_embeddings])
    origin = partners.detach().mean(0)  # (d,)
    references = None if ref_embeddings is None else ref_embeddings - origin  # (m, d)
    return embeddings - origin, references


def partner_pairs(
    embeddings: Tensor,
    labels: Tensor,
    ref_embeddings: Tensor | None = None,
    ref_labels: Tensor | None = None,
    *,
    squared: bool = False,
    normalize: bool = False,
    centre: bool = False,
) -> Pairs:
    """The :class:`Pairs` of a batch ``(n, d)``, ``(n,)`` and its references ``(m, d)``, ``(m,)``.

    Inputs are assumed checked (as :meth:`EmbeddingLoss.forward` does).

    Parameters
    ----------
    embeddings : Tensor
        ``(n, d)`` batch.
    labels : Tensor
        ``(n,)`` integer labels.
    ref_embeddings, ref_labels : Tensor, optional
        ``(m, d)`` and ``(m,)`` references, both or neither.
    squared : bool
        Squared Euclidean distances.
    normalize : bool
        l2-normalise the rows of both first (losses defined on the unit sphere).
    centre : bool
        Centre both on the partners' mean, detached, after any normalisation: for a loss that uses
        the points themselves (not only their distances) through differences only, whose value
        and gradient this leaves unchanged while float32 keeps its precision far from the origin.
    """
    if normalize:
        embeddings = unit_rows(embeddings)  # (n, d)
        ref_embeddings = None if ref_embeddings is None else unit_rows(ref_embeddings)  # (m, d)
    if centre:
        embeddings, ref_embeddings = _centred_on_partners(embeddings, ref_embeddings)
    distances = partner_distances(embeddings, ref_embeddings, squared=squared)  # (n, n + m)
    positive, negative = partner_masks(labels, ref_labels)  # (n, n + m) each
    return Pairs(embeddings, ref_embeddings, labels, ref_labels, distances, positive, negative)


class PairLoss(EmbeddingLoss):
    """Base of the losses over pairs and triplets of items: ``loss_on_pairs(pairs) -> scalar``.

    :meth:`compute` measures the distances from every anchor to every partner and the
    positive/negative masks once (:func:`partner_pairs`); a subclass implements
    :meth:`loss_on_pairs` on them, as pytorch-metric-learning's ``GenericPairLoss`` subclasses
    implement ``_compute_loss(mat, pos_mask, neg_mask)``. Every pair loss takes a reference set
    (a cross-batch memory): its rows are extra partners, never anchors.

    Parameters
    ----------
    squared : bool
        Squared Euclidean distances in ``Pairs.distances``.
    normalize : bool
        l2-normalise the embeddings (and references) first.

    Examples
    --------
    A loss of one's own, here the mean distance to the positives:

    >>> import torch
    >>> class MeanPositiveDistance(PairLoss):
    ...     def loss_on_pairs(self, pairs):
    ...         return pairs.distances[pairs.positive].mean()
    >>> value = MeanPositiveDistance()(torch.randn(4, 2), torch.tensor([0, 0, 1, 1]))
    """

    accepts_references: ClassVar[bool] = True

    needs_pairs: ClassVar[bool] = True

    #: Whether the loss uses the points themselves through their differences (MsDNN's expected
    #: hit and miss): they then reach :meth:`loss_on_pairs` centred (see :func:`partner_pairs`).
    centres_points: ClassVar[bool] = False

    def __init__(self, squared: bool = False, normalize: bool = False) -> None:
        self.check_flags(squared=squared, normalize=normalize)
        super().__init__()
        self.squared = bool(squared)
        self.normalize = bool(normalize)

    def compute(
        self,
        embeddings: Tensor,
        labels: Tensor,
        ref_embeddings: Tensor | None = None,
        ref_labels: Tensor | None = None,
    ) -> Tensor:
        pairs = partner_pairs(
            embeddings,
            labels,
            ref_embeddings,
            ref_labels,
            squared=self.squared,
            normalize=self.normalize,
            centre=self.centres_points,
        )
        return self.loss_on_pairs(pairs)

    def loss_on_pairs(self, pairs: Pairs) -> Tensor:
        """The loss, a scalar, from the batch's distances ``(n, n + m)`` and masks."""
        raise NotImplementedError(
            f"{type(self).__name__} subclasses PairLoss but does not implement "
            "loss_on_pairs(pairs); define it to return the loss from pairs.distances, "
            "pairs.positive and pairs.negative"
        )
