"""The call convention every loss of :mod:`clusterable.losses` shares.

``loss(embeddings, labels)`` checks its inputs once, here, so every loss rejects bad input with the
same clear message, and computes in float32 or float64 whatever autocast hands it: half-precision
log-sum-exp and pseudo-inverses are not trustworthy, and a loss is cheap next to the network.
A loss that cannot be represented in that precision (embeddings of 1e19 and above in float32)
raises a ``ValueError`` that says what to do, never returns NaN or inf.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

#: Dtypes a loss does not compute in (see the module docstring).
LOW_PRECISION = (torch.float16, torch.bfloat16)


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
    if embeddings.shape[1] == 0:
        raise ValueError(
            f"embeddings have 0 dimensions (shape {tuple(embeddings.shape)}): a point without "
            "coordinates has no distance, direction or class score; give the model's output "
            "layer at least one unit"
        )
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

    #: Whether :meth:`forward` upcasts float16 and bfloat16 embeddings to float32 before
    #: :meth:`compute`. A loss that needs the caller's precision sets False and upcasts itself.
    upcasts_half_precision: ClassVar[bool] = True

    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        check_embeddings_and_labels(embeddings, labels)
        if self.upcasts_half_precision and embeddings.dtype in LOW_PRECISION:
            embeddings = embeddings.float()
        labels = labels.to(device=embeddings.device, dtype=torch.long)
        with torch.autocast(device_type=embeddings.device.type, enabled=False):
            value = self.compute(embeddings, labels)
        if not bool(torch.isfinite(value.detach())):
            peak = float(embeddings.detach().abs().max())
            raise ValueError(
                f"{type(self).__name__} is {float(value.detach())} on {embeddings.dtype} "
                f"embeddings of magnitude up to {peak:.1e}: the loss leaves the {embeddings.dtype} "
                "range. Scale the embeddings down or l2-normalise them (normalize=True where the "
                "loss offers it), or compute the loss in float64"
            )
        return value

    def compute(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        """The loss on checked inputs: ``embeddings`` (n, d) float, ``labels`` (n,) long."""
        raise NotImplementedError
