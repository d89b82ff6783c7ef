"""Shared by the loss tests: seeded batches, an independent 1-NN score, gradient descent on points.

Imported as ``from _learning import ...``: pytest's default "prepend" import mode puts this
folder on ``sys.path`` for the test files in it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from sklearn.neighbors import NearestNeighbors


def loo_1nn_accuracy(points: np.ndarray, labels: np.ndarray) -> float:
    """Leave-one-out 1-NN accuracy with sklearn, the independent reference: the nearest other
    point votes."""
    neighbours = NearestNeighbors(n_neighbors=2).fit(points).kneighbors(points)[1][:, 1]
    return float((labels[neighbours] == labels).mean())


class PlainDescent:
    """``x -= lr * x.grad`` on each tensor, with an optimiser's ``zero_grad`` and ``step``.

    Not ``torch.optim.SGD``: its ``add_(grad, alpha=-lr)`` rounds differently in the last bits.
    """

    def __init__(self, params: list[torch.Tensor], lr: float) -> None:
        self.params, self.lr = params, lr

    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None

    @torch.no_grad()
    def step(self) -> None:
        for param in self.params:
            param -= self.lr * param.grad


def descend(
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    points: torch.Tensor,
    labels: torch.Tensor,
    steps: int,
    optimiser: torch.optim.Optimizer | PlainDescent,
    after_step: Callable[[], object] | None = None,
) -> None:
    """``steps`` steps of ``optimiser`` on ``loss(points, labels)``, in place; ``after_step``
    runs after each."""
    for _ in range(steps):
        optimiser.zero_grad()
        loss(points, labels).backward()
        optimiser.step()
        if after_step is not None:
            after_step()


def seeded_batch(
    labels: list[int], seed: int, scale: float = 1.0, *, dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``scale`` x N(0, 1) float64 points of shape (len(labels), dim) from ``seed``, requiring
    grad, and the labels as a tensor."""
    generator = torch.Generator().manual_seed(seed)
    x = scale * torch.randn(len(labels), dim, generator=generator, dtype=torch.float64)
    return x.requires_grad_(), torch.tensor(labels)
