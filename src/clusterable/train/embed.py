"""Embedding a whole dataset with a trained model, in batches, without gradient."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from clusterable.device import DeviceSpec, module_device, resolve_device


@torch.no_grad()
def embed_dataset(
    model: nn.Module,
    dataset: Dataset,
    batch_size: int = 512,
    device: DeviceSpec = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings ``(n, d)`` float32 and labels ``(n,)`` of every item, in dataset order.

    Batches go where the model is (``device``: only to name it for a model with no parameters);
    the embeddings come back to the host, for numpy. The model is put in eval mode for the pass
    and returned to its previous mode after.
    """
    device = module_device(model) if device is None else resolve_device(device)
    was_training = model.training
    model.eval()
    chunks, labels = [], []
    for x, y in DataLoader(dataset, batch_size=batch_size, shuffle=False):
        chunks.append(model(x.to(device, non_blocking=True)).float().cpu())  # (b, d)
        labels.append(torch.as_tensor(y))
    model.train(was_training)
    return torch.cat(chunks).numpy(), torch.cat(labels).numpy().astype(np.int64)
