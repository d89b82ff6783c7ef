"""Embedding a whole dataset with a trained model, in batches, without gradient.

Image files are decoded by DataLoader worker processes (``workers``; by default as many as
training uses, :func:`~clusterable.train.loading.default_workers`) and travel as uint8 pixels,
made floats on the model's device with the division of their float items: the same embeddings,
while the decoding of the next batches overlaps the model's pass (In-Shop's 26,830 test images,
SOP's 60,502, decoded on one core, would take a minute or more at 224 px).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from clusterable.data import ImageFiles, LabelledDataset
from clusterable.device import DeviceSpec, module_device, resolve_device
from clusterable.train.loading import (
    PixelItems,
    collate_pixels,
    default_workers,
    pixels_to_unit,
    reads_pixels,
    worker_errors_named,
)


@torch.no_grad()
def embed_dataset(
    model: nn.Module,
    dataset: Dataset,
    batch_size: int = 512,
    device: DeviceSpec = None,
    workers: int | None = None,
    progress: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings ``(n, d)`` float32 and labels ``(n,)`` of every item, in dataset order.

    Batches go where the model is (``device``: only to name it for a model with no parameters);
    the embeddings come back to the host, for numpy. The model is put in eval mode for the pass
    and returned to its previous mode after. ``workers``: processes decoding a
    :class:`~clusterable.data.LabelledDataset`'s image files (None: the training default; 0:
    in this process); items held in memory load here. Image files with a training view
    (``augment_seed``) are embedded in their evaluation view: the test table's k-NN reference,
    a sampler's mining and the pseudo-labels see no augmented crops. ``progress``: show a
    progress bar with this description (None: none).
    """
    device = module_device(model) if device is None else resolve_device(device)
    was_training = model.training
    model.eval()
    pixels = isinstance(dataset, LabelledDataset) and reads_pixels(dataset)
    if (
        isinstance(dataset, LabelledDataset)
        and isinstance(dataset.x, ImageFiles)  # pixels
        and dataset.x.augment_seed is not None
    ):
        # Embedding is evaluation: the resize and centre crop, never a training crop.
        dataset = dataset.replace(x=dataset.x.replace(augment_seed=None))
    if pixels:
        loader = DataLoader(
            PixelItems(dataset),  # type: ignore[arg-type]
            batch_size=batch_size,
            num_workers=default_workers(dataset, workers),  # type: ignore[arg-type]
            collate_fn=collate_pixels,
            pin_memory=device.type == "cuda",
        )
    else:
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=False)
    chunks, labels = [], []
    batches = tqdm(loader, desc=progress, unit="batch", disable=progress is None)
    for x, y in worker_errors_named(batches):
        x = x.to(device, non_blocking=True)
        x = pixels_to_unit(x) if pixels else x  # (b, C, H, W) floats, as the items' own
        chunks.append(model(x).float().cpu())  # (b, d)
        labels.append(torch.as_tensor(y))
    model.train(was_training)
    return torch.cat(chunks).numpy(), torch.cat(labels).numpy().astype(np.int64)
