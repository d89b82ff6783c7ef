"""Soft nearest neighbour (SNN) loss.

Salakhutdinov, Hinton. "Learning a Nonlinear Embedding by Preserving Class Neighbourhood Structure".
AISTATS 2007; Frosst, Papernot, Hinton. "Analyzing and Improving Representations with the Soft
Nearest Neighbor Loss". ICML 2019 (Eq. 1). The MsDNN paper uses it as a baseline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from clusterable._ranges import Bounds
from clusterable.losses._pairs import entry_weights, filled_weights
from clusterable.losses._registry import register_loss
from clusterable.losses.pair_loss import PairLoss, Pairs


@register_loss("snn")
class SoftNearestNeighborLoss(PairLoss):
    """Soft nearest neighbour loss (Frosst et al. 2019, Eq. 1)::

        -1/b sum_i log( sum_{j != i, y_j = y_i} exp(-D_ij^2 / T) / sum_{k != i} exp(-D_ik^2 / T) )

    with squared Euclidean distances ``D^2``, computed as a difference of two log-sum-exps: over
    the positives, a few a row, gathered; over every partner but the anchor, dense.
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
        terms = _LogRatios.apply(pairs.distances, pairs.positive, self.temperature)  # (n,)
        return terms.mean()


class _LogRatios(torch.autograd.Function):
    """Each anchor's ``log sum_{k != i} exp(l_ik) - log sum_{j in P_i} exp(l_ij)`` with logits
    ``l = -D^2 / T``, 0 for an anchor without a positive, from ``(n, n + m)`` squared distances;
    the gradient is the softmax over the partners less the softmax over the positives, ``/ -T``.

    The positives' log-sum-exp is a gather of a few entries a row (:func:`entry_weights`), the
    partners' one dense pass (:func:`filled_weights`, the anchor itself set to ``-inf``): no
    ``(n, n + m)`` mask is built and one weight matrix is kept, where two masked log-sum-exps
    made two of each (0.94x of pytorch-metric-learning's ``NCALoss`` at n = 4,096 on a CPU).
    Weights that would be subnormal are 0, as in :func:`~clusterable.losses._pairs.
    masked_logsumexp`.
    """

    @staticmethod
    def forward(ctx: Any, distances: Tensor, positive: Tensor, temperature: float) -> Tensor:
        n, size = distances.shape
        rows, cols = positive.nonzero(as_tuple=True)  # (p,) each
        same_logits = distances[rows, cols] / -temperature  # (p,)
        same_weights, log_same = entry_weights(same_logits, rows, n, size)  # (p,), (n,)
        logits = distances / -temperature  # (n, n + m), a new tensor
        logits.diagonal().fill_(float("-inf"))  # k != i
        all_weights, log_all = filled_weights(logits, dim=1)  # (n, n + m), (n, 1)
        has_positive = torch.zeros(n, dtype=torch.bool, device=distances.device)  # (n,)
        has_positive[rows] = True
        ctx.temperature = temperature
        ctx.save_for_backward(all_weights, same_weights, rows, cols, has_positive)
        return torch.where(has_positive, log_all.squeeze(1) - log_same, 0.0)  # (n,)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        all_weights, same_weights, rows, cols, has_positive = ctx.saved_tensors
        row_grad = torch.where(has_positive, grad, 0.0) / -ctx.temperature  # (n,)
        grad_distances = all_weights * row_grad[:, None]  # (n, n + m)
        same_grad = -(row_grad[rows] * same_weights)  # (p,)
        return grad_distances.index_put_((rows, cols), same_grad, accumulate=True), None, None
