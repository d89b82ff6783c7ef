"""Triplet margin loss on in-batch mined triplets (FaceNet defaults).

Schroff, Kalenichenko, Philbin. FaceNet. CVPR 2015; in the form of Oh Song et al., Deep Metric
Learning via Lifted Structured Feature Embedding, CVPR 2016, Eq. (2).
"""

from __future__ import annotations

from torch import Tensor

from clusterable.losses._registry import register_loss
from clusterable.losses.pair_loss import PairLoss, Pairs
from clusterable.mining.triplets import MINING_STRATEGIES, MiningStrategy, mine_triplets


@register_loss("triplet")
class TripletMarginLoss(PairLoss):
    r"""Triplet loss (lifted-structure paper, Eq. 2) on triplets mined in the batch.

    .. math:: \frac{1}{|T|} \sum_{(a, p, n) \in T} [D_{ap}^2 - D_{an}^2 + \alpha]_+,

    with squared Euclidean distances, as in FaceNet, and ``T`` the mined triplets.

    Value convention: the mean over mined triplets (zero-loss triplets included, which only
    ``mining="all"`` and ``"batch-hard"`` produce: semi-hard triplets all violate the margin).
    Eq. (2) divides by ``2m/3`` for ``m/3`` triplets, half this mean: a learning-rate constant.
    A batch where nothing is mined gives 0, which back-propagates.

    With references (a :class:`~clusterable.losses.CrossBatchMemory`), anchors are the batch
    items and positives and negatives are mined among the other batch items and the references.

    Parameters
    ----------
    margin : float
        ``alpha``; FaceNet uses 0.2 on unit-norm embeddings.
    mining : {"semi-hard", "batch-hard", "all"}
        ``"semi-hard"`` (FaceNet): every valid triplet with ``D_ap^2 < D_an^2 < D_ap^2 + alpha``.
        ``"batch-hard"`` (Hermans et al. 2017): per anchor, farthest positive and nearest negative.
        ``"all"``: every valid triplet. See :mod:`clusterable.mining.triplets`.
    normalize : bool
        l2-normalise the embeddings first (FaceNet's unit hypersphere), default True.

    Examples
    --------
    >>> import torch
    >>> loss = TripletMarginLoss(margin=0.2, mining="semi-hard")
    >>> value = loss(torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))
    """

    def __init__(
        self, margin: float = 0.2, mining: MiningStrategy = "semi-hard", normalize: bool = True
    ) -> None:
        # FaceNet's squared distances.
        super().__init__(squared=True, normalize=normalize)
        if mining not in MINING_STRATEGIES:
            raise ValueError(
                f"unknown mining strategy {mining!r} for the triplet loss; "
                f"choose one of: {', '.join(MINING_STRATEGIES)}"
            )
        self.margin = margin
        self.mining = mining

    def loss_on_pairs(self, pairs: Pairs) -> Tensor:
        distances = pairs.distances  # (n, n + m), squared
        anchor, positive, negative = mine_triplets(
            self.mining, distances, pairs.labels, self.margin, pairs.ref_labels
        )  # (t,) each
        violation = distances[anchor, positive] - distances[anchor, negative]  # (t,)
        hinge = (violation + self.margin).clamp_min(0)  # (t,)
        return hinge.sum() / max(hinge.numel(), 1)
