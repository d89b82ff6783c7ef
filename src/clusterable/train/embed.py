"""Embedding a whole dataset with a trained model, in batches, without gradient."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


@torch.no_grad()
def embed_dataset(
    model: nn.Module,
    dataset: Dataset,
    batch_size: int = 512,
    device: torch.device | str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings ``(n, d)`` float32 and labels ``(n,)`` of every item, in dataset order.

    The model is put in eval mode for the pass and returned to its previous mode after.
    """
    was_training = model.training
    model.eval()
    chunks, labels = [], []
    for x, y in DataLoader(dataset, batch_size=batch_size, shuffle=False):
        chunks.append(model(x.to(device)).float().cpu())
        labels.append(torch.as_tensor(y))
    model.train(was_training)
    return torch.cat(chunks).numpy(), torch.cat(labels).numpy().astype(np.int64)
