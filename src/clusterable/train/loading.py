"""How the trainer loads its batches: how many DataLoader processes (``TrainConfig.workers``),
and image files as uint8 pixels.

Items held in memory are a slice of an array: worker processes would only add start-up and
copying, so they load in the main process. Image files are decoded (and augmented) by workers,
as many as the machine's CPUs allow up to 8, keeping one CPU for the training loop.

Workers hand image files over as uint8 pixels (:class:`PixelItems`, :func:`collate_pixels`), a
quarter of the float32 bytes through shared memory, pinning and the copy to the device; the
training step turns them into [0, 1] floats on the device, the whole batch at once
(:func:`pixels_to_unit`), with the float32 division the dataset's items use, so that the model
sees the values it would see from ``dataset[i]``. (ResNet-50 at 224 px, batch 128: 19 MB a batch
instead of 77 MB.) The backbone's mean/std normalisation stays the model's first step
(``clusterable.models.pretrained.InputNormalization``), on the device as before.

Decoding a JPEG costs more than cropping and resizing it (400 x 300: 0.67 against 0.26 ms at
64 px), and on a machine with few CPUs a worker that decodes takes a core from the training step.
``TrainConfig.cache_images`` (:func:`decoded_images`) decodes the training set's images once,
before the workers start, at their working resolution (the shorter side at the evaluation
resize, JPEGs in draft mode: :mod:`clusterable.data.stored_images`), into one buffer that the
forked workers share, in memory or memory-mapped from a cache on disk that later runs reuse
(:mod:`clusterable.data.image_cache`); each epoch then only crops, resizes and flips, from the
same pixels that decoding at every access gives.
"""

from __future__ import annotations

import copy
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset, get_worker_info

from clusterable.data import ImageFiles, LabelledDataset
from clusterable.data.image_cache import CacheUnavailable, disk_cached
from clusterable.data.stored_images import DecodedImages

MAX_DEFAULT_WORKERS = 8

T = TypeVar("T")

#: The most decoded bytes ``cache_images: auto`` holds, beside a quarter of the memory available:
#: 6,000 photos of 500 x 375 (a CUB-200 training half) decode to 3.4 GB, which a GPU host holds
#: easily; a bound nonetheless, so that no machine finds a run holding tens of GB it did not ask
#: for (``cache_images: ram`` asks).
AUTO_CACHE_BYTES = 8 * 2**30

#: A container's memory limit and use, cgroup v2 then v1 (the machine's MemAvailable ignores it).
_CGROUP_MEMORY = (
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
    ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
)


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


def _system_memory_available() -> int | None:
    """The machine's available memory in bytes (Linux's MemAvailable, else free pages)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # given in kB
    except OSError:
        pass
    for pages in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):  # free pages, else all (macOS)
        try:
            return os.sysconf(pages) * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            continue
    return None


def _container_memory_available() -> int | None:
    """What this process's cgroup limit leaves, in bytes; None without a limit."""
    for limit_file, usage_file in _CGROUP_MEMORY:
        try:
            limit = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text())
        except (OSError, ValueError):
            continue
        if limit.isdigit():  # v2 writes "max" when there is no limit
            return max(0, int(limit) - usage)
    return None


def available_memory() -> int | None:
    """Bytes of memory this process may still take: the machine's available memory, or what
    its container's limit leaves where that is less; None where the OS does not say."""
    found = (_system_memory_available(), _container_memory_available())
    known = [memory for memory in found if memory is not None]
    return min(known) if known else None


def auto_cache_budget() -> int:
    """Decoded bytes ``cache_images: auto`` holds: the lesser of :data:`AUTO_CACHE_BYTES` and a
    quarter of :func:`available_memory` (the model, batches and evaluation need the rest)."""
    available = available_memory()
    return AUTO_CACHE_BYTES if available is None else min(AUTO_CACHE_BYTES, available // 4)


def image_holders(workers: int) -> int:
    """Processes of this machine that each hold a training set's decoded images: each training
    process (torchrun's ``LOCAL_WORLD_SIZE``), and where the loader's ``workers`` are not
    forked (start method ``spawn`` or ``forkserver``: they receive the dataset pickled) each of
    those too. Forked workers share their process's pages: they only read them."""
    method = (
        multiprocessing.get_start_method(allow_none=True)
        or multiprocessing.get_all_start_methods()[0]  # the default, not fixed by asking
    )
    per_process = 1 if workers == 0 or method == "fork" else 1 + workers
    return int(os.environ.get("LOCAL_WORLD_SIZE", 1)) * per_process


def _mib(count: int) -> str:
    return f"{count / 2**20:,.0f} MiB"


def _on_disk(
    files: ImageFiles, setting: str, threads: int, progress: bool
) -> tuple[ImageFiles, str]:
    """``files`` reading their disk cache (:mod:`clusterable.data.image_cache`), and its note."""
    started = time.perf_counter()
    cached, built = disk_cached(files, threads, progress)
    decoded: DecodedImages = cached.decoded  # type: ignore[assignment]
    how = (
        f"decoded in {time.perf_counter() - started:.1f} s on {threads} thread(s)"
        if built
        else "reused"
    )
    return cached, (
        f"images cached on disk: {len(files):,} {how}, {_mib(decoded.nbytes)} in "
        f"{decoded.file} (cache_images: {setting})"
    )


def decoded_images(
    files: ImageFiles, setting: str, workers: int, progress: bool = False
) -> tuple[ImageFiles, str]:
    """``files`` reading their images decoded once, at their working resolution, where
    ``setting`` says so, and one line that says what was done.

    Parameters
    ----------
    files : ImageFiles
        A training set's images.
    setting : str
        ``TrainConfig.cache_images``: ``"none"``, decoded at every access; ``"ram"``, decoded
        once here into memory whatever their size; ``"disk"``, read memory-mapped from a cache
        on disk that a later run over the same files reuses, built here where there is none
        (:func:`clusterable.data.image_cache.disk_cached`); ``"auto"``, ``"ram"`` where their
        stored bytes (``height * width * channels`` of their stored form, from the file headers,
        times :func:`image_holders`) fit :func:`auto_cache_budget`, else ``"disk"``, else
        (no writable cache folder with room) ``"none"``.
    workers : int
        The loader's worker processes (forked ones share the images).
    progress : bool
        A progress bar while images are decoded, where standard error is a terminal.

    Returns
    -------
    files : ImageFiles
        ``files``, or a copy holding the decoded images (:meth:`ImageFiles.with_decoded`): the
        same pixels, so training and its seeds are unchanged.
    note : str
        Whether and where the images were cached, how many MiB, and how long decoding took.

    Raises
    ------
    ValueError
        ``"ram"`` and the decoded images exceed the memory available; ``"disk"`` and the cache
        folder cannot be written or has no room (``CacheUnavailable``).
    FileNotFoundError, ValueError
        A file that is missing or cannot be decoded, named as at access (here, before training
        starts, rather than in a worker).
    """
    if setting == "none":
        return files, "images decoded at every access (cache_images: none)"
    # torchrun's processes on this machine decode at once: each takes its share of the CPUs.
    local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    threads = max(1, available_cpus() // local_processes)
    progress = progress and sys.stderr.isatty()  # a redirected log keeps no bar updates
    if setting == "disk":
        return _on_disk(files, setting, threads, progress)
    holders, started = image_holders(workers), time.perf_counter()
    held = f", held by {holders} processes" if holders > 1 else ""
    budget = auto_cache_budget() if setting == "auto" else None
    shapes = files.stored_shapes(threads, None if budget is None else budget // holders)
    if shapes is None:
        try:
            return _on_disk(files, setting, threads, progress)
        except CacheUnavailable as error:
            return files, (
                f"images decoded at every access: the {len(files):,} images, decoded{held}, "
                f"pass the {_mib(budget or 0)} that cache_images auto holds in memory (the "
                f"lesser of {_mib(AUTO_CACHE_BYTES)} and a quarter of the memory available), "
                f"and no disk cache: {error}"
            )
    decoded_bytes = int(shapes.prod(axis=1).sum()) * files.channels
    available = available_memory()
    if budget is None and available is not None and decoded_bytes * holders > available:
        raise ValueError(
            f"cache_images ram: the {len(files):,} images decode to {_mib(decoded_bytes)}{held}, "
            f"more than the {_mib(available)} of memory available; choose cache_images auto "
            "(memory where they fit, else disk), disk or none"
        )
    cached = files.with_decoded(threads, shapes, progress)
    seconds = time.perf_counter() - started
    return cached, (
        f"images cached: {len(files):,} decoded in {seconds:.1f} s on {threads} thread(s), "
        f"{_mib(decoded_bytes)} in memory{held} (cache_images: {setting})"
    )


class EpochTaggedBatches:
    """A batch sampler's batches as ``(index, epoch)`` pairs: the dataset's augmentation is
    seeded per item and epoch, in whichever worker process reads it, so a resumed run draws the
    crops the uninterrupted run drew (set ``epoch`` before each epoch)."""

    def __init__(self, batches: Iterable[list[int]]) -> None:
        self.batches = batches
        self.epoch = 0

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        for batch in self.batches:
            yield [(int(i), self.epoch) for i in batch]

    def __len__(self) -> int:
        return len(self.batches)  # type: ignore[arg-type]


class EpochSampler(Protocol):
    """A batch sampler that draws its epochs' batches by ``set_epoch`` and knows how many."""

    def __iter__(self) -> Iterator[list[int]]: ...
    def __len__(self) -> int: ...
    def set_epoch(self, epoch: int) -> None:
        """Draw the batches of ``epoch`` next."""


class EpochBatches:
    """A batch sampler's batches of ``epochs``, one epoch after the other, in one pass; as
    ``(index, epoch)`` pairs with ``tag`` (the dataset's augmentation is seeded per item and
    epoch). Epoch ``e``'s batches are those the sampler draws after ``set_epoch(e)`` (on a copy:
    the sampler itself is left alone), so that a loader over them keeps its workers busy across
    the end of an epoch instead of letting the queue run dry there, and draws what a loader
    started each epoch draws."""

    def __init__(self, sampler: EpochSampler, epochs: range, tag: bool) -> None:
        self.sampler, self.epochs, self.tag = sampler, epochs, tag

    def __iter__(self) -> Iterator[list[int] | list[tuple[int, int]]]:
        for epoch in self.epochs:
            drawn = copy.copy(self.sampler)
            drawn.set_epoch(epoch)
            count = 0
            for batch in drawn:
                count += 1
                yield [(int(i), epoch) for i in batch] if self.tag else batch
            if count != len(self.sampler):  # the trainer takes len(sampler) batches an epoch
                raise RuntimeError(
                    f"{type(self.sampler).__name__} drew {count} batches in epoch {epoch + 1} "
                    f"but its len() says {len(self.sampler)}: a batch sampler must draw len() "
                    "batches every epoch"
                )

    def __len__(self) -> int:
        return len(self.epochs) * len(self.sampler)


def worker_errors_named(batches: Iterable[T]) -> Iterator[T]:
    """``batches`` of a DataLoader, its worker processes' errors raised as the worker raised
    them: torch wraps one in "Caught ValueError in DataLoader worker process 0" and the worker's
    whole traceback; the message a user needs (an unreadable image, named) is its last line."""
    iterator = iter(batches)
    while True:
        try:
            batch = next(iterator)
        except StopIteration:
            return
        except Exception as error:  # re-raised, as its own type
            text = str(error)
            if not (text.startswith("Caught ") and "DataLoader worker process" in text):
                raise
            last = text.rstrip().splitlines()[-1]
            original = last.removeprefix(f"{type(error).__name__}: ")
            raise type(error)(original) from None
        yield batch


def augments(dataset: LabelledDataset) -> bool:
    """Whether ``dataset``'s items are image files with a seeded training view."""
    return getattr(dataset.x, "augment_seed", None) is not None


def reads_pixels(dataset: LabelledDataset) -> bool:
    """Whether ``dataset``'s items are image files, loaded as uint8 pixels for training."""
    return isinstance(dataset.x, ImageFiles)


class PixelItems(Dataset):
    """``dataset``'s image files as ``(uint8 (C, H, W) pixels, label)`` items, indexed as the
    dataset is (an int, or ``(index, epoch)`` for the training view of that epoch)."""

    def __init__(self, dataset: LabelledDataset) -> None:
        if not reads_pixels(dataset):
            raise TypeError(f"{dataset.name!r} holds no image files: its items are its array's")
        self.files: ImageFiles = dataset.x  # type: ignore[assignment]
        self.labels = dataset.labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int | tuple[int, int]) -> tuple[np.ndarray, int]:
        position = index[0] if isinstance(index, tuple) else index
        return self.files.pixels(index), int(self.labels[position])


def collate_pixels(
    items: Sequence[tuple[np.ndarray, int]], channels_last: bool = False
) -> tuple[Tensor, Tensor]:
    """One uint8 batch ``(B, C, H, W)`` and its int64 labels from :class:`PixelItems` items.

    In a worker the batch is written straight into shared memory (as ``default_collate`` does),
    so that it reaches the main process without another copy. ``channels_last``: the batch is
    stored as ``(B, H, W, C)`` (the decoded images' own layout, so each item is one plain copy)
    and returned as its ``(B, C, H, W)`` view, the layout cuDNN's convolutions take; pinning and
    the copy to the device keep those strides.
    """
    channels, height, width = items[0][0].shape
    shape = (len(items), *((height, width, channels) if channels_last else items[0][0].shape))
    if get_worker_info() is not None:
        storage = torch.UntypedStorage._new_shared(math.prod(shape))  # as default_collate does
        batch = torch.empty(0, dtype=torch.uint8).set_(storage).view(shape)
    else:
        batch = torch.empty(shape, dtype=torch.uint8)
    target = batch.numpy()
    for row, (pixels, _) in zip(target, items, strict=True):
        row[...] = pixels.transpose(1, 2, 0) if channels_last else pixels
    labels = torch.tensor([label for _, label in items], dtype=torch.int64)
    return (batch.permute(0, 3, 1, 2) if channels_last else batch), labels


def pixels_to_unit(x: Tensor, channels_last: bool = False) -> Tensor:
    """uint8 pixels ``(B, C, H, W)`` as float32 in [0, 1] on their device, ``channels_last`` or
    contiguous: ``float32(x) / 255``, the division of ``ImageFiles.__getitem__``, so the
    values are those of the dataset's float items, bit for bit."""
    layout = torch.channels_last if channels_last and x.dim() == 4 else torch.contiguous_format
    unit = x.to(torch.float32, memory_format=layout)
    # By a tensor on the device, not the number 255: CUDA divides by a host scalar as a
    # multiplication by its reciprocal, which rounds some values differently.
    return unit.div_(torch.full((), 255.0, device=x.device))
