"""The batch sampler of lifted structured embedding: random positive pairs and, for each pair
member, a hard negative (Oh Song et al., CVPR 2016, Sec. 4), registered as
``"pairs-hard-negatives"`` (:mod:`clusterable.mining.samplers` holds the others and the registry).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor

from clusterable.data import labelled_mask
from clusterable.mining.samplers import (
    ArrayLike,
    DistributedBatchSampler,
    SamplerSettings,
    batches_per_epoch_of,
    class_members,
    label_array,
    register_sampler,
    replicas_of,
)


@register_sampler("pairs-hard-negatives")
class PairsWithHardNegativesSampler(DistributedBatchSampler):
    """Random positive pairs and their hard negatives (Oh Song et al., CVPR 2016, Sec. 4).

    A batch of size ``b`` holds ``b / 4`` random positive pairs (half the batch) and, for each of
    the ``b / 2`` pair members, one hard negative: "for each image in a positive pair we find its
    close (hard) negative images" (Sec. 4, Fig. 3), mined for the left and the right image alike.
    The exact rule:

    1. Pairs. Anchors are taken in the order of a per-epoch permutation of the labelled items
       whose class has at least two items (skipping those already in the batch); each anchor's
       positive is drawn uniformly from its class's items not yet in the batch.
    2. Pool. A candidate pool of ``pool_size`` labelled items is drawn without replacement for
       the batch (``pool_size=None``: every labelled item).
    3. Negatives, for each pair member ``x`` in batch order (anchor, then positive, pair by
       pair): among the pool's items of another class that are not yet in the batch, the one
       nearest to ``x`` in Euclidean distance between the embeddings last given to
       :meth:`update_embeddings` (ties: the lowest index). Before any update the choice
       is uniformly random. If the pool has no such item, all labelled items are searched; if
       even they are exhausted, a negative already in the batch may repeat.

    Indices are therefore distinct except in that last case. The batch is laid out in groups
    ``[anchor, positive, negative of anchor, negative of positive]``, so a rank's slice holds whole
    groups when ``batch_size / num_replicas`` is divisible by 4.

    Embeddings go stale as the network trains; the trainer refreshes them (typically once per
    epoch, on the whole training set, in dataset order). Under DDP every rank must pass the same
    (all-gathered) embeddings so that the ranks agree on the global batch.

    Parameters
    ----------
    labels : array-like of int
        ``(n,)`` labels; items labelled below 0 are never sampled.
    batch_size : int
        Global batch size, a multiple of 4 (128 in the paper), divisible by ``num_replicas``.
    seed : int
        Seed.
    pool_size : int or None
        Candidates searched for each batch's negatives; larger is harder and slower.
    batches_per_epoch : int, optional
        Default ``max(1, n_labelled // batch_size)``.
    num_replicas, rank : int, optional
        See :class:`DistributedBatchSampler`.
    """

    requires_embeddings = True

    def __init__(
        self,
        labels: ArrayLike,
        batch_size: int = 128,
        seed: int = 0,
        *,
        pool_size: int | None = 1024,
        batches_per_epoch: int | None = None,
        num_replicas: int | None = None,
        rank: int | None = None,
    ) -> None:
        super().__init__(seed, num_replicas, rank)
        self.labels = label_array(labels)
        members = class_members(self.labels)
        if batch_size < 4 or batch_size % 4:
            raise ValueError(
                f"batch_size must be a positive multiple of 4 (pairs plus a negative for each "
                f"member), got {batch_size}"
            )
        self._check_divisible(batch_size)
        n_pairs = batch_size // 4
        # Pairs are drawn before any negative, so at most floor(size / 2) come from one class.
        max_pairs = sum(len(m) // 2 for m in members.values())
        if len(members) < 2 or max_pairs < n_pairs:
            raise ValueError(
                f"a batch of {batch_size} needs {n_pairs} disjoint positive pairs and a second "
                f"class for negatives; the labels give {max_pairs} pairs in {len(members)} classes"
            )
        if pool_size is not None and pool_size < 1:
            raise ValueError(f"pool_size must be positive or None, got {pool_size}")
        self.batch_size = batch_size
        self.pool_size = pool_size
        self.members = members
        self.labelled = np.flatnonzero(labelled_mask(self.labels))
        self.anchors = np.concatenate([m for m in members.values() if len(m) >= 2])
        self.batches_per_epoch = batches_per_epoch_of(
            batches_per_epoch, len(self.labelled), batch_size
        )
        self.embeddings: np.ndarray | None = None

    @classmethod
    def for_training(
        cls, labels: np.ndarray, settings: SamplerSettings, **sampler_args: Any
    ) -> PairsWithHardNegativesSampler:
        """Batches of ``batch_size``; the candidate pool is 1024 items unless ``pool_size`` is
        given."""
        return cls(
            labels, settings.batch_size, settings.seed, **replicas_of(settings), **sampler_args
        )

    def update_embeddings(self, embeddings: np.ndarray | Tensor) -> None:
        """Set the ``(n, d)`` embeddings of all dataset items, row ``i`` for index ``i``."""
        if isinstance(embeddings, Tensor):
            embeddings = embeddings.detach().to("cpu", torch.float64).numpy()
        embeddings = np.array(
            embeddings, dtype=np.float64
        )  # a copy: the caller may reuse its buffer
        if embeddings.ndim != 2 or len(embeddings) != len(self.labels):
            raise ValueError(
                f"embeddings must be shaped (n, d) with n={len(self.labels)} (one row per dataset "
                f"item), got {embeddings.shape}"
            )
        if not np.isfinite(embeddings).all():
            raise ValueError("embeddings contain NaN or infinity")
        self.embeddings = embeddings

    def _pairs(
        self, anchors: Iterator[int], in_batch: np.ndarray, rng: np.random.Generator
    ) -> list[int]:
        """``b / 2`` items: disjoint positive pairs, anchor then positive; marks them in_batch."""
        items: list[int] = []
        while len(items) < self.batch_size // 2:
            anchor = next(anchors)
            if in_batch[anchor]:
                continue
            in_batch[anchor] = True
            mates = self.members[int(self.labels[anchor])]
            mates = mates[~in_batch[mates]]
            if len(mates) == 0:
                # Its class is used up in this batch; the anchor stays free for later batches.
                in_batch[anchor] = False
                continue
            positive = int(rng.choice(mates))
            in_batch[positive] = True
            items += [anchor, positive]
        return items

    def _anchor_stream(self, rng: np.random.Generator) -> Iterator[int]:
        """Eligible anchors in random order, reshuffled whenever exhausted."""
        while True:
            yield from rng.permutation(self.anchors).tolist()

    def _negative(self, x: int, candidates: np.ndarray, rng: np.random.Generator) -> int:
        """The nearest candidate to ``x`` (random before any embeddings)."""
        if self.embeddings is None:
            return int(rng.choice(candidates))
        diff = self.embeddings[candidates] - self.embeddings[x]  # (c, d)
        return int(candidates[np.argmin(np.einsum("cd,cd->c", diff, diff))])

    def _candidates(self, x: int, pool: np.ndarray, in_batch: np.ndarray) -> np.ndarray:
        """Negatives of ``x`` to search, by the fallback order of the class docstring."""
        label = self.labels[x]
        candidates = pool[(self.labels[pool] != label) & ~in_batch[pool]]
        if len(candidates) == 0:
            negatives = self.labelled[self.labels[self.labelled] != label]
            candidates = negatives[~in_batch[negatives]]
            if len(candidates) == 0:
                candidates = negatives
        return candidates

    def _batch(self, anchors: Iterator[int], rng: np.random.Generator) -> list[int]:
        in_batch = np.zeros(len(self.labels), dtype=bool)
        members = self._pairs(anchors, in_batch, rng)
        if self.pool_size is None or self.pool_size >= len(self.labelled):
            pool = self.labelled
        else:
            # Sorted, so that ties in distance go to the lowest index.
            pool = np.sort(rng.choice(self.labelled, size=self.pool_size, replace=False))
        negatives = []
        for x in members:
            negative = self._negative(x, self._candidates(x, pool, in_batch), rng)
            in_batch[negative] = True
            negatives.append(negative)
        groups = [members[0::2], members[1::2], negatives[0::2], negatives[1::2]]
        return np.stack(groups, axis=1).ravel().tolist()  # (b / 4, 4) -> (b,)

    def global_batches(self) -> Iterator[list[int]]:
        rng = self._rng()
        anchors = self._anchor_stream(rng)
        for _ in range(self.batches_per_epoch):
            yield self._batch(anchors, rng)

    def __len__(self) -> int:
        return self.batches_per_epoch
