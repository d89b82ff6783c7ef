"""Lifted structured feature embedding loss (smooth version), in O(n^2) memory.

Oh Song, Xiang, Jegelka, Savarese. Deep Metric Learning via Lifted Structured Feature Embedding.
CVPR 2016, Eq. (4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import torch
from torch import Tensor

from clusterable._ranges import Bounds
from clusterable.losses._pairs import masked_logsumexp
from clusterable.losses._registry import register_loss
from clusterable.losses.pair_loss import PairLoss, Pairs


@register_loss("lifted")
class LiftedStructureLoss(PairLoss):
    r"""Smooth lifted structured loss (Oh Song et al., CVPR 2016, Eq. 4).

    .. math::

        \tilde J_{ij} = \log\Big(\sum_{(i,k) \in N} e^{a - D_{ik}}
                               + \sum_{(j,l) \in N} e^{a - D_{jl}}\Big) + D_{ij}, \qquad
        \tilde J = \frac{1}{2|P|} \sum_{(i,j) \in P} \max(0, \tilde J_{ij})^2,

    with ``D`` the Euclidean (not squared) distance, ``a`` the margin, ``N`` the negative pairs
    (different labels) and ``P`` the positive pairs. The sum and ``|P|`` run over *unordered*
    positive pairs ``{i, j}``, ``i != j``, as in the authors' Caffe code (loop over ``j > i``,
    divide by twice the number of constraints), which is what the paper's gradient
    ``dJ/dD_ij = J_ij 1[J_ij > 0] / |P|`` (Eq. 5) implies. Summing over ordered pairs instead
    gives the same value (each term and ``|P|`` both double).

    Value convention: the paper's normaliser ``1 / (2|P|)``, not a plain mean.

    Both ends of a positive pair share their negatives (same label), so
    ``J_ij = logaddexp(l_i, l_j) + D_ij`` with ``l_i = log sum_{k: y_k != y_i} exp(a - D_ik)``:
    ``n`` row log-sum-exps (max-subtracted) replace the ``|P| x |N|`` pair mask of
    pytorch-metric-learning, so time and memory are ``O(n^2)`` (``O(n^2 d)`` time for distances).

    Parameters
    ----------
    margin : float
        ``a`` in Eq. (4), >= 0: the log-sum-exp asks each negative to lie ``a`` beyond the
        positive pair; the paper uses 1.0.
    normalize : bool
        l2-normalise the embeddings first. The paper uses raw embeddings (default False);
        pytorch-metric-learning normalises, and with ``normalize=True`` this loss equals its
        ``LiftedStructureLoss(neg_margin=margin, pos_margin=0)``.

    Notes
    -----
    With references (``loss(embeddings, labels, ref_embeddings, ref_labels)``, e.g. a
    :class:`~clusterable.losses.CrossBatchMemory`), the positive pairs are every anchor ``i`` of
    the batch with every same-label partner ``j`` (the other batch items, then the references),
    and ``N`` runs over the same partners. A reference is no anchor, so its own negatives are not
    summed: for a reference ``j``, ``J_ij = l_i + D_ij``. This is pytorch-metric-learning's
    convention with ``ref_emb`` (its negatives of ``j`` are those anchored at ``j``); the sums over
    reference-to-reference pairs would cost ``O(m^2)`` and carry no gradient.

    A batch without a positive pair or without a negative pair gives 0, which back-propagates
    (a zero gradient). Identical points give a finite gradient: the distance's gradient is 0
    where two points coincide (see ``clusterable.losses._pairs``).

    Examples
    --------
    >>> import torch
    >>> loss = LiftedStructureLoss(margin=1.0)
    >>> value = loss(torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))
    """

    argument_bounds: ClassVar[Mapping[str, Bounds]] = {"margin": Bounds(0)}

    def __init__(self, margin: float = 1.0, normalize: bool = False) -> None:
        self.check_arguments(margin=margin)
        super().__init__(normalize=normalize)
        self.margin = margin

    def loss_on_pairs(self, pairs: Pairs) -> Tensor:
        distances = pairs.distances  # (n, n + m)
        positive, negative = pairs.positive, pairs.negative  # (n, n + m) each
        # l_i; a row with no negative (one-class batch) gets a finite placeholder, masked below.
        row_terms = masked_logsumexp(self.margin - distances, negative, dim=1)  # (n,)
        # log 0 for the references: no anchors, their negatives are not summed.
        partner_terms = torch.cat(
            [row_terms, row_terms.new_full((pairs.num_references,), float("-inf"))]
        )  # (n + m,)
        lifted = torch.logaddexp(row_terms[:, None], partner_terms[None, :]) + distances
        has_negative = negative.any(1)  # (n,)
        active = positive & has_negative[:, None]  # (n, n + m)
        squared_hinge = torch.where(active, lifted.clamp_min(0).square(), 0.0)  # (n, n + m)
        # Ordered pairs: within the batch, sum and count both double, so without references this
        # is the unordered 1 / (2|P|) sum.
        num_ordered_pairs = positive.sum().clamp_min(1)
        return squared_hinge.sum() / (2 * num_ordered_pairs)
