"""The validation of a model during training: its table on the held-out set, on the run's device.

:meth:`~clusterable.train.Trainer.evaluate` embeds the set (each torchrun process one contiguous
shard, :func:`embed_shard`), scores the embeddings (:func:`validation_table`: the kNN search and
k-means run on the run's device, ``env.device``, never an ambient one) and, for a loss that
predicts classes, their classification accuracy (:func:`classification_accuracy`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from clusterable.data import LabelledDataset
from clusterable.evaluate import evaluate_embeddings
from clusterable.losses import EmbeddingLoss
from clusterable.train.answerable import answerable_table
from clusterable.train.distributed import Distributed
from clusterable.train.embed import embed_dataset

#: The Recall@K a validation reports, those a small set cannot answer left out.
RECALL_KS = (1, 2, 4, 8)


def embed_shard(
    model: torch.nn.Module, val_set: LabelledDataset, env: Distributed
) -> tuple[np.ndarray, np.ndarray]:
    """``(n_local, d)`` embeddings and ``(n_local,)`` labels of this process's contiguous shard of
    ``val_set`` (the whole set outside torchrun), embedded on ``env.device``."""
    if env.enabled:
        n, rank, world = len(val_set), env.rank, env.world_size
        val_set = val_set.subset(np.arange(n * rank // world, n * (rank + 1) // world))
    return embed_dataset(model, val_set, device=env.device)


def validation_table(
    embeddings: np.ndarray,
    labels: np.ndarray,
    val_set: LabelledDataset,
    env: Distributed,
    seed: int,
    note: Callable[[str], None],
) -> dict[str, float]:
    """The evaluation table of this process's labelled ``embeddings`` ``(n_local, d)`` and
    ``labels`` ``(n_local,)``, searched and clustered on ``env.device``.

    Under torchrun `evaluate_embeddings` puts the shards together and splits the kNN search
    between the ranks: every rank gets the single-process table. A set with query and gallery
    roles (``is_query``) is scored as its queries ranking its gallery. What the set is too small
    to answer is left out, and ``note`` is told why.
    """
    # From the whole set: under torchrun each rank holds one shard of the labelled items.
    labelled = val_set.labels >= 0
    roles = val_set.is_query
    queries = None if roles is None else roles[labelled]  # (n,) of the whole set
    gallery = None if queries is None else int((~queries).sum())
    table = answerable_table(val_set.labels[labelled], RECALL_KS, gallery)
    for text in table.notes:
        note(text)
    return evaluate_embeddings(
        embeddings,
        labels,
        metrics=table.metrics,
        ks=table.ks,
        seed=seed,
        process_group=True if env.enabled else None,
        queries=queries,
        device=env.device,
    )


@torch.no_grad()
def classification_accuracy(
    loss: EmbeddingLoss, embeddings: np.ndarray, labels: np.ndarray, env: Distributed
) -> float | None:
    """The share of labelled items whose class ``loss.predict`` gets right, over every process;
    None for a loss that predicts no classes. The prediction runs on ``env.device``."""
    predicted = loss.predict(torch.from_numpy(embeddings).to(env.device))
    if predicted is None:
        return None
    counts = torch.tensor(
        [float((predicted.cpu().numpy() == labels).sum()), float(labels.size)],
        dtype=torch.float64,
        device=env.device,
    )
    if env.enabled:
        torch.distributed.all_reduce(counts)
    return float(counts[0] / counts[1])
