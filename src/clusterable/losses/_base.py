"""The call convention every loss of :mod:`clusterable.losses` shares.

``loss(embeddings, labels)`` checks its inputs once, here, so every loss rejects bad input with the
same clear message, and computes in float32 or float64 whatever autocast hands it: half-precision
log-sum-exp and pseudo-inverses are not trustworthy, and a loss is cheap next to the network.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def check_embeddings_and_labels(embeddings: Tensor, labels: Tensor) -> None:
    """Raise a ``ValueError`` that says what is wrong with a ``(embeddings, labels)`` batch.

    Parameters
    ----------
    embeddings : Tensor
        ``(n, d)`` floating-point tensor.
    labels : Tensor
        ``(n,)`` integer tensor.
    """
    if not isinstance(embeddings, Tensor):
        raise TypeError(
            f"embeddings must be a torch.Tensor, got {type(embeddings).__name__}; "
            "wrap arrays with torch.as_tensor(...)"
        )
    if not isinstance(labels, Tensor):
        raise TypeError(
            f"labels must be a torch.Tensor, got {type(labels).__name__}; "
            "wrap arrays with torch.as_tensor(...)"
        )
    if embeddings.dim() != 2:
        raise ValueError(
            f"embeddings must be 2-D (n, d), got shape {tuple(embeddings.shape)}; "
            "flatten extra dimensions with embeddings.flatten(1) or add one with unsqueeze(0)"
        )
    if not embeddings.is_floating_point():
        raise ValueError(
            f"embeddings must be floating point, got {embeddings.dtype}; convert with .float()"
        )
    if labels.dim() != 1:
        raise ValueError(f"labels must be 1-D (n,), got shape {tuple(labels.shape)}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(
            f"labels must be integer class ids, got {labels.dtype}; convert with .long()"
        )
    if labels.shape[0] != embeddings.shape[0]:
        raise ValueError(
            f"labels has {labels.shape[0]} entries but embeddings has {embeddings.shape[0]} rows; "
            "pass one label per embedding"
        )
    if embeddings.shape[0] == 0:
        raise ValueError("embeddings is empty (0 rows); pass a batch of at least one item")
    if not bool(torch.isfinite(embeddings.detach()).all()):
        bad = int((~torch.isfinite(embeddings.detach())).any(dim=1).sum())
        raise ValueError(
            f"embeddings has {bad} rows with NaN or inf; check the model output "
            "(learning rate too high, or bad input data)"
        )


class EmbeddingLoss(nn.Module):
    """Base of every loss: ``forward(embeddings (n, d), labels (n,)) -> scalar``.

    Subclasses implement :meth:`compute`, which receives checked inputs in float32 or float64 with
    autocast switched off.
    """

    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        check_embeddings_and_labels(embeddings, labels)
        if embeddings.dtype in _LOW_PRECISION:
            embeddings = embeddings.float()
        labels = labels.to(device=embeddings.device, dtype=torch.long)
        with torch.autocast(device_type=embeddings.device.type, enabled=False):
            return self.compute(embeddings, labels)

    def compute(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        """The loss on checked inputs: ``embeddings`` (n, d) float, ``labels`` (n,) long."""
        raise NotImplementedError
