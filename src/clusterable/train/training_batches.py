"""The batches of each epoch of a run's training set, as its DataLoader hands them over.

Image files travel as uint8 pixels (the trainer's step makes them floats on the device), read
from memory where ``config.cache_images`` says, and one loader serves all the remaining epochs
(:meth:`TrainingBatches.of_epoch`); items held in memory come from one loader kept for the run
(persistent workers). A resumed run trains on the batches the uninterrupted run trained on.
Where the device makes the training view (``config.augment_on``), the loader hands over each
item's crop instead (:mod:`clusterable.data.device_augment`), drawn from the same stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from clusterable.data import ImageFiles, LabelledDataset
from clusterable.data.device_augment import CropBatch, CropItems, collate_crops
from clusterable.mining import DistributedBatchSampler
from clusterable.train.config import TrainConfig
from clusterable.train.loading import (
    EpochBatches,
    EpochTaggedBatches,
    PixelItems,
    augments,
    collate_pixels,
    decoded_images,
    default_workers,
    reads_pixels,
)


class TrainingBatches:
    """The batches of a training set drawn by its sampler, epoch after epoch.

    Parameters
    ----------
    train_set : LabelledDataset
    sampler : DistributedBatchSampler
        Draws each epoch's batches (this process's share under torchrun).
    config : TrainConfig
        ``workers``, ``cache_images``, ``epochs`` and ``seed`` are read.
    pin_memory : bool
        Pinned host batches, for a copy to CUDA that overlaps the step.
    channels_last : bool
        Pixels collated in the memory layout cuDNN's fast convolutions take.
    device_crops : bool
        Image files with a training view hand over their crops (:class:`CropBatch`), resized
        on the device by the trainer (``TrainConfig.augment_on``), not their views.
    note : callable
        Told once per set of files how its images are read (decoded into memory or not).
    progress : bool
        A progress bar while the images are decoded (``config.progress`` on the process that
        shows the training's bar: one bar under torchrun, not one a process).
    """

    def __init__(
        self,
        train_set: LabelledDataset,
        sampler: DistributedBatchSampler,
        config: TrainConfig,
        *,
        pin_memory: bool,
        channels_last: bool,
        device_crops: bool = False,
        note: Callable[[str], None],
        progress: bool = False,
    ) -> None:
        self.train_set, self.sampler, self.config = train_set, sampler, config
        self.pin_memory, self.channels_last, self.note = pin_memory, channels_last, note
        self.progress = progress
        self.device_crops = device_crops
        self._loader: DataLoader | None = None  # kept between epochs: persistent workers
        self._tagged = EpochTaggedBatches(())  # the loader's batches when it augments
        # the batches of all epochs
        self._stream: Iterator[tuple[Tensor | CropBatch, Tensor]] | None = None
        self._stream_epoch: int | None = None  # the epoch whose batches it gives next
        self._decoded: tuple[ImageFiles, ImageFiles] | None = None  # train_set.x, then decoded

    def replace(self, train_set: LabelledDataset, sampler: DistributedBatchSampler) -> None:
        """Draw from ``train_set`` with ``sampler`` from the next epoch on (new loaders)."""
        self.train_set, self.sampler = train_set, sampler
        self._loader, self._stream = None, None

    def close(self) -> None:
        """End the loaders' persistent workers and drop the decoded images."""
        self._loader, self._stream = None, None
        self._decoded = None

    def of_epoch(self, epoch: int) -> Iterator[tuple[Tensor | CropBatch, Tensor]]:
        """Epoch ``epoch``'s (0-based) batches: inputs and labels."""
        self.sampler.set_epoch(epoch)
        if reads_pixels(self.train_set) and not self.sampler.requires_embeddings:
            yield from self._streamed(epoch)
            return
        self._tagged.epoch = epoch
        if self._loader is None:
            self._tagged = EpochTaggedBatches(self.sampler)
            self._tagged.epoch = epoch
            tagged = augments(self.train_set)
            self._loader = self.loader(self._tagged if tagged else self.sampler)
        yield from self._loader

    def loader(self, batches: Any, generator: torch.Generator | None = None) -> DataLoader:
        """A DataLoader of the training set's items in ``batches`` (a batch sampler)."""
        workers = default_workers(self.train_set, self.config.workers)
        items, collate = self._items(workers)
        return DataLoader(
            items,
            batch_sampler=batches,
            collate_fn=collate,
            num_workers=workers,
            pin_memory=self.pin_memory,
            persistent_workers=workers > 0,
            prefetch_factor=4 if workers > 0 else None,
            generator=generator,
        )

    def _items(self, workers: int) -> tuple[Dataset, Callable[[Any], Any] | None]:
        """What the loader reads, and how it makes a batch of it: image files as uint8 pixels
        (the step makes them floats on the device), or as their crops where the device makes
        their training views; other data as they are."""
        if not reads_pixels(self.train_set):
            return self.train_set, None
        decoded = self._decoded_train_set(workers)
        if self.device_crops and augments(decoded):
            crops = CropItems(decoded)
            return crops, partial(collate_crops, size=crops.size, interpolation=crops.interpolation)
        return PixelItems(decoded), partial(collate_pixels, channels_last=self.channels_last)

    def _decoded_train_set(self, workers: int) -> LabelledDataset:
        """The training set reading its images from memory as ``config.cache_images`` says:
        decoded once per set of files, here, before the loader's workers start (forked, they
        share the pages)."""
        files: ImageFiles = self.train_set.x  # type: ignore[assignment]
        if self._decoded is None or self._decoded[0] is not files:
            setting = self.config.cache_images
            decoded, note = decoded_images(files, setting, workers, self.progress)
            self._decoded = (files, decoded)
            self.note(note)
        return self.train_set.replace(x=self._decoded[1])

    def _streamed(self, epoch: int) -> Iterator[tuple[Tensor | CropBatch, Tensor]]:
        """This epoch's batches of image files, from one loader over all the remaining epochs.

        Its workers decode the next epoch's first batches while this epoch's last ones train;
        a loader restarted each epoch leaves the device idle at every epoch's start for a whole
        batch's decoding in one worker (H200, ResNet-50 at 224 px, ten batches of 128 an
        epoch: fit ran at about half the step's rate whether 8, 12 or 15 workers decoded).
        A sampler's batches do not depend on when they are drawn, the augmentation is seeded
        per item and epoch, and the workers' seeds come from the run's seed rather than the
        global generator: a resumed run trains on what the uninterrupted run trained on.
        """
        if self._stream is None or self._stream_epoch != epoch:
            epochs = range(epoch, self.config.epochs)
            batches = EpochBatches(self.sampler, epochs, tag=augments(self.train_set))
            generator = torch.Generator().manual_seed(self.config.seed)
            self._stream = iter(self.loader(batches, generator))
        self._stream_epoch = None  # until the whole epoch is taken
        for _ in range(len(self.sampler)):
            yield next(self._stream)
        self._stream_epoch = epoch + 1
