"""The network every model name builds: a backbone, a linear embedding head, optional l2-norm."""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn


class EmbeddingNet(nn.Module):
    """A backbone followed by a linear embedding head, optionally l2-normalised.

    The head is the randomly initialised layer of a fine-tuned network: Oh Song et al.
    (CVPR 2016, Sec. 6) train it with 10 times the backbone's learning rate, so
    :meth:`parameter_groups` gives it its own optimiser group.

    Parameters
    ----------
    backbone : nn.Module
        Maps a batch of inputs to ``(n, feature_dim)`` features.
    feature_dim : int
        Width of the backbone's output.
    embedding_dim : int
        Width of the embedding.
    normalize : bool
        Divide each embedding by its l2 norm (unit rows), as FaceNet-style losses expect.

    Attributes
    ----------
    backbone : nn.Module
    head : nn.Linear
        ``feature_dim -> embedding_dim``.
    """

    def __init__(
        self, backbone: nn.Module, feature_dim: int, embedding_dim: int, *, normalize: bool = False
    ) -> None:
        super().__init__()
        if embedding_dim < 1:
            raise ValueError(f"embedding_dim must be a positive integer, got {embedding_dim}")
        self.backbone = backbone
        self.head = nn.Linear(feature_dim, embedding_dim)
        self.feature_dim = feature_dim
        self.embedding_dim = embedding_dim
        self.normalize = normalize

    def parameter_groups(self, lr: float, head_lr_multiplier: float = 1.0) -> list[dict[str, Any]]:
        """Optimiser parameter groups: the backbone at ``lr``, then the head at
        ``lr * head_lr_multiplier`` (the lifted paper's 10x on the new layer)."""
        return [
            {"params": list(self.backbone.parameters()), "lr": lr},
            {"params": list(self.head.parameters()), "lr": lr * head_lr_multiplier},
        ]

    def forward(self, x: Tensor) -> Tensor:
        """Embed a batch: ``(n, *input_shape) -> (n, embedding_dim)``."""
        features = self.backbone(x)  # (n, feature_dim)
        embeddings = self.head(features)  # (n, embedding_dim)
        if self.normalize:
            embeddings = F.normalize(embeddings, dim=1)
        return embeddings
