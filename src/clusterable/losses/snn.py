"""Soft nearest neighbour (SNN) loss.

Salakhutdinov, Hinton. "Learning a Nonlinear Embedding by Preserving Class Neighbourhood Structure".
AISTATS 2007; Frosst, Papernot, Hinton. "Analyzing and Improving Representations with the Soft
Nearest Neighbor Loss". ICML 2019 (Eq. 1). The MsDNN paper uses it as a baseline.
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


@register_loss("snn")
class SoftNearestNeighborLoss(PairLoss):
    """Soft nearest neighbour loss (Frosst et al. 2019, Eq. 1)::

        -1/b sum_i log( sum_{j != i, y_j = y_i} exp(-D_ij^2 / T) / sum_{k != i} exp(-D_ik^2 / T) )

    with squared Euclidean distances ``D^2``, computed as a difference of two masked log-sum-exps.
    An item with no same-label partner in the batch contributes 0 (its log-ratio is undefined) and
    still counts in b; a batch with one class gives 0 everywhere (each ratio is 1). With
    references (a :class:`~clusterable.losses.CrossBatchMemory`), ``j`` and ``k`` also run over
    them; the mean is still over the batch.

    Parameters
    ----------
    temperature : float
        T > 0; small T looks at the nearest neighbours, large T at the whole batch.

    Examples
    --------
    >>> import torch
    >>> loss = SoftNearestNeighborLoss(temperature=1.0)
    >>> value = loss(torch.randn(6, 3), torch.tensor([0, 0, 1, 1, 2, 2]))
    """

    argument_bounds: ClassVar[Mapping[str, Bounds]] = {"temperature": Bounds(0, low_open=True)}

    def __init__(self, temperature: float = 1.0) -> None:
        self.check_arguments(temperature=temperature)
        super().__init__(squared=True)
        self.temperature = float(temperature)

    def loss_on_pairs(self, pairs: Pairs) -> Tensor:
        positive, negative = pairs.positive, pairs.negative  # (n, n + m) each
        logits = pairs.distances / -self.temperature  # (n, n + m), -D^2 / T
        log_same = masked_logsumexp(logits, positive, dim=1)  # (n,)
        log_all = masked_logsumexp(logits, positive | negative, dim=1)  # (n,), k != i
        # An item without a partner contributes 0 (log_same's empty slice is 0, not log 0).
        terms = torch.where(positive.any(dim=1), log_all - log_same, 0.0)  # (n,)
        return terms.mean()
