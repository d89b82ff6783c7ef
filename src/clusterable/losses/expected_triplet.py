"""Expected triplet loss: a triplet loss whose positive and negative are kernel expectations.

Chauhan, Davoudi, Komeili. "Multi-scale Deep Nearest Neighbors". IJCNN 2021, Sec. III (end): hard
nearest hit/miss triplets (sigma -> 0) did not converge, so the paper "modified the triplet loss
accordingly", replacing the positive and the negative by their expected values under the MsDNN
nearest-hit and nearest-miss probabilities, and reports about 99% accuracy on MNIST for a wide range
of sigma. The paper gives no formula; we take FaceNet's triplet loss (squared distances, hinge)::

    loss_i = max(0, ||f_i - E_H[f]||^2 - ||f_i - E_M[f]||^2 + margin) = max(0, margin - r_i)

where ``r_i`` is the MsDNN expected margin, so the two losses differ only in hinge vs logistic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from torch import Tensor

from clusterable._ranges import Bounds
from clusterable.losses._registry import register_loss
from clusterable.losses.msdnn import KERNEL_SCALE, expected_margin_of_pairs
from clusterable.losses.pair_loss import PairLoss, Pairs


@register_loss("expected-triplet")
class ExpectedTripletLoss(PairLoss):
    """Triplet hinge on the expected nearest hit and miss (MsDNN paper, Sec. III), batch mean.

    ``loss = (1 / n) sum_i max(0, margin - r_i)``; items with no hit or no miss contribute 0 and
    count in n, as in :class:`~clusterable.losses.MsDNNLoss`. With references (a cross-batch
    memory), the expectations run over the other batch items and the references.

    Parameters
    ----------
    sigma : float
        Kernel scale of ``exp(-D / sigma)``, > 0.
    margin : float
        Triplet margin, >= 0. The paper gives none; 1.0, the margin of the lifted-structure paper's
        triplet baseline, suits unnormalised embeddings.
    squared : bool
        Squared distances in the kernel (as :class:`~clusterable.losses.MsDNNLoss`).
    detach_weights : bool
        Default True: the expectation weights are constants in the gradient, as in MsDNN's
        Algorithm 1.
    """

    centres_points = True

    argument_bounds: ClassVar[Mapping[str, Bounds]] = {"sigma": KERNEL_SCALE, "margin": Bounds(0)}

    def __init__(
        self,
        sigma: float = 1.0,
        margin: float = 1.0,
        squared: bool = False,
        detach_weights: bool = True,
    ) -> None:
        self.check_arguments(sigma=sigma, margin=margin)
        self.check_flags(detach_weights=detach_weights)
        super().__init__(squared=squared)
        self.sigma = float(sigma)
        self.margin = float(margin)
        self.detach_weights = bool(detach_weights)

    def loss_on_pairs(self, pairs: Pairs) -> Tensor:
        margin, valid = expected_margin_of_pairs(pairs, self.sigma, self.detach_weights)  # (n,)
        terms = (self.margin - margin).clamp_min(0.0).masked_fill(~valid, 0.0)  # (n,)
        return terms.sum() / len(pairs.labels)
