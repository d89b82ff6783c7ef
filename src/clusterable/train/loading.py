"""How many DataLoader processes a run uses (``TrainConfig.workers``).

Items held in memory are a slice of an array: worker processes would only add start-up and
copying, so they load in the main process. Image files are decoded (and augmented) by workers,
as many as the machine's CPUs allow up to 8, keeping one CPU for the training loop.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from clusterable.data import LabelledDataset

MAX_DEFAULT_WORKERS = 8


def available_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS tells it, else the count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_workers(dataset: LabelledDataset, workers: int | None) -> int:
    """``workers`` when given; else 0 for data in memory, and ``min(8, CPUs - 1)`` for files."""
    if workers is not None:
        return workers
    in_memory = getattr(dataset, "x", None) is not None and hasattr(dataset.x, "dtype")
    if in_memory:
        return 0
    return max(0, min(MAX_DEFAULT_WORKERS, available_cpus() - 1))


class EpochTaggedBatches:
    """A batch sampler's batches as ``(index, epoch)`` pairs: the dataset's augmentation is
    seeded per item and epoch, in whichever worker process reads it, so a resumed run draws the
    crops the uninterrupted run drew (set :attr:`epoch` before each epoch)."""

    def __init__(self, batches: Iterable[list[int]]) -> None:
        self.batches = batches
        self.epoch = 0

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        for batch in self.batches:
            yield [(int(i), self.epoch) for i in batch]

    def __len__(self) -> int:
        return len(self.batches)  # type: ignore[arg-type]


def augments(dataset: LabelledDataset) -> bool:
    """Whether ``dataset``'s items are image files with a seeded training view."""
    return getattr(dataset.x, "augment_seed", None) is not None
