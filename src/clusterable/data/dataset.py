"""The one dataset type every loader returns and the trainer consumes.

A :class:`LabelledDataset` pairs items with two label arrays: ``labels``, which training uses, and
``fine_labels``, the original classes kept for sub-class evaluation (they differ once a coarse view
is applied). Items are stored in one of two forms that index alike:

- a float32 array ``(n, *input_shape)`` held in memory (values in [0, 1] for images), or
- :class:`ImageFiles`, paths of images decoded with PIL on access, resized to a fixed square size
  (or decoded once beforehand, :class:`DecodedImages`: the same pixels), each view from the
  image it stores (:mod:`clusterable.data.stored_images`).

Label :data:`UNLABELLED` (-1) marks an item without a class (an OPML distractor, a pseudo-label's
noise point): it is trained on where a loss allows and never scored as a class;
:func:`labelled_mask` and :meth:`LabelledDataset.labelled` pick the others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar, overload

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from clusterable.data.stored_images import (
    DecodedImages,
    StoredForm,
    in_threads,
    named_read_errors,
)
from clusterable.data.transforms import (
    RESAMPLING,
    Preprocessing,
    evaluation_view,
    training_generator,
    training_view,
)

#: The label of an item that has no class.
UNLABELLED = -1

LabelArray = TypeVar("LabelArray", np.ndarray, torch.Tensor)


def labelled_mask(labels: LabelArray) -> LabelArray:
    """``(n,)`` boolean mask of the items that have a class, i.e. whose label is not
    :data:`UNLABELLED` (numpy array in, numpy array out; tensor in, tensor out)."""
    return labels > UNLABELLED


def labelled_classes(labels: np.ndarray) -> np.ndarray:
    """The distinct classes of the labelled items of ``labels`` (``(n,)`` codes), in increasing
    order; unlabelled items (:func:`labelled_mask`) are none."""
    return np.unique(labels[labelled_mask(labels)])


#: Side of the square that image files are resized to unless a loader is told otherwise. The papers
#: crop 224-227 pixels for ImageNet backbones; 64 keeps CPU training of the small models practical.
DEFAULT_IMAGE_SIZE = 64


class ImageFiles:
    """Image files read lazily: each item is a float32 ``(channels, size, size)`` array in [0, 1].

    Indexing with an int decodes one image; indexing with an int array returns another
    :class:`ImageFiles` over those paths, so it can stand where an in-memory array stands.

    Parameters
    ----------
    paths : sequence of str or Path
        One image file per item.
    size : int or (int, int)
        Images are resized (bilinear, aspect ratio not kept, as the lifted-structure reference code
        does before cropping) to ``size x size`` (or ``height x width``); an image already of that
        size is kept as it is.
    channels : int
        3 converts every image to RGB (CUB has a few grayscale images), 1 to grayscale.
    preprocessing : Preprocessing, optional
        An image backbone's: instead of the stretch to a square, the evaluation view (resized as
        its crop mode says, centre crop) of :mod:`clusterable.data.transforms`, at its
        interpolation.
    augment_seed : int, optional
        With ``preprocessing``: the training view instead (random resized crop, flip), drawn from
        a generator seeded by ``(augment_seed, epoch, index)`` so that a resumed run draws the
        same crops; the epoch comes with the index, ``files[index, epoch]``. The crop is taken
        from the image stored at the working resolution (:attr:`stored_form`: the shorter side
        at the evaluation resize, whatever the crop mode, a JPEG decoded in draft mode), not
        from the whole file.
    decoded : DecodedImages, optional
        The images already decoded in :attr:`stored_form` (:meth:`with_decoded`, or a disk
        cache, :mod:`clusterable.data.image_cache`), read instead of the files: the same pixels,
        every epoch alike. A copy that stores its images alike (:meth:`replace`) and a subset
        keep them.
    """

    def __init__(
        self,
        paths: Sequence[str | Path],
        size: int | tuple[int, int] = DEFAULT_IMAGE_SIZE,
        channels: int = 3,
        preprocessing: Preprocessing | None = None,
        augment_seed: int | None = None,
        decoded: DecodedImages | None = None,
    ) -> None:
        height, width = (size, size) if isinstance(size, (int, np.integer)) else size
        if height < 1 or width < 1:
            raise ValueError(f"image size must be a positive number of pixels, got {size}")
        if channels not in (1, 3):
            raise ValueError(f"channels must be 1 (grayscale) or 3 (RGB), got {channels}")
        if preprocessing is not None and height != width:
            # A backbone's views (random resized crop, centre crop) are squares; a timm model
            # whose own input is a rectangle (sapiens2: 1024 x 768) would otherwise be
            # viewed, silently, as a square of one of its sides.
            raise ValueError(
                f"image size {height} x {width} px (height x width; the backbone's own input "
                "size where no --image-size is given) is no square, and a backbone's images "
                "are viewed as squares here: give --image-size N (image_size: N) to view them "
                "as N x N px"
            )
        self.paths = [Path(p) for p in paths]
        self.size: int | tuple[int, int] = size
        self.height, self.width = int(height), int(width)
        self.channels = channels
        self.preprocessing = preprocessing
        self.augment_seed = augment_seed if preprocessing is not None else None
        if decoded is not None and (len(decoded) != len(paths) or decoded.form != self.stored_form):
            raise ValueError(
                f"decoded images ({len(decoded)}, {decoded.form}) do not match {len(paths)} "
                f"files read as {self.stored_form}; decode these files (with_decoded)"
            )
        self.decoded = decoded

    @property
    def shape(self) -> tuple[int, ...]:
        """``(n, C, H, W)``, as an array of the decoded images would have it."""
        return (len(self.paths), self.channels, self.height, self.width)

    @property
    def resize_size(self) -> int:
        """The evaluation view's resize before its centre crop (256 for 224): the
        preprocessing's, at this size."""
        if self.preprocessing is None:
            raise ValueError("images stretched to a square (no preprocessing) have no resize")
        return dataclasses.replace(self.preprocessing, size=self.height).resize_size

    @property
    def stored_form(self) -> StoredForm:
        """What is kept of each file for this view (:mod:`clusterable.data.stored_images`): the
        stretched square itself; for a backbone's evaluation view, the image resized to
        :attr:`resize_size` as its crop mode says; for its training view, the shorter side at
        :attr:`resize_size`, decoded in JPEG draft mode."""
        prep = self.preprocessing
        if prep is None:
            return StoredForm(self.channels, size=(self.width, self.height))
        resize, interpolation = self.resize_size, prep.interpolation
        if self.augment_seed is not None:
            return StoredForm(self.channels, resize, interpolation=interpolation, draft=True)
        if prep.crop_mode == "squash":
            return StoredForm(self.channels, size=(resize, resize), interpolation=interpolation)
        if prep.crop_mode == "border":
            return StoredForm(self.channels, longer_side=resize, interpolation=interpolation)
        return StoredForm(self.channels, resize, interpolation=interpolation)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int | tuple[int, int] | np.ndarray) -> np.ndarray | ImageFiles:
        if isinstance(index, (int, np.integer, tuple)):
            pixels = self.pixels(index)
            # The division by 255 in float32 that the trainer does on the device for a uint8
            # batch (clusterable.train.loading.pixels_to_unit): the same values either way.
            items = pixels.astype(np.float32)
            items /= 255.0  # in place: the same values as a division into a new array
            return items
        positions = np.asarray(index)
        decoded = None if self.decoded is None else self.decoded.take(positions)
        return self.replace([self.paths[i] for i in positions], decoded=decoded)

    def pixels(self, index: int | tuple[int, int]) -> np.ndarray:
        """Item ``index`` (``(index, epoch)``: its training view of that epoch) as uint8
        ``(channels, size, size)`` pixels, 0-255: what loader workers hand over, a quarter of
        the float32 item's bytes. It is a view of the decoded ``(size, size, channels)`` pixels
        (strides of channels last), which a batch copy reads in either layout. The view is
        taken from the stored image (:attr:`stored_form`), held decoded or read now alike."""
        position, epoch = index if isinstance(index, tuple) else (index, 0)
        stored = self.stored(position)
        pixels = np.asarray(self._view(stored, int(position), int(epoch)))  # (H, W[, C])
        return pixels[None] if self.channels == 1 else pixels.transpose(2, 0, 1)  # (C, H, W)

    def stored(self, position: int) -> Image.Image:
        """Item ``position``'s stored image (:attr:`stored_form`), the one its views are taken
        from: held decoded, or read now."""
        if self.decoded is not None:
            return Image.fromarray(self.decoded.image(position))
        return self.stored_form.read(self.paths[position])

    @overload
    def stored_shapes(self, threads: int, max_bytes: None = None) -> np.ndarray: ...

    @overload
    def stored_shapes(self, threads: int, max_bytes: int | None) -> np.ndarray | None: ...

    def stored_shapes(self, threads: int, max_bytes: int | None = None) -> np.ndarray | None:
        """``(n, 2)`` height and width of every stored image (:attr:`stored_form`), from the
        file headers (PIL reads them without decoding), on ``threads`` threads; None as soon as
        the stored bytes (``height * width * channels``) add up to more than ``max_bytes``.

        Raises
        ------
        FileNotFoundError, ValueError
            A file that is missing or not an image, named as :meth:`pixels` names it.
        """
        shapes = np.zeros((len(self.paths), 2), dtype=np.int64)
        form = self.stored_form

        def read_header(position: int) -> None:
            path = self.paths[position]
            with named_read_errors(path), Image.open(path) as image:
                width, height = form.stored_size(*image.size)
                shapes[position] = height, width

        # In blocks, to stop early on a set far above the limit (a header costs ~0.05 ms).
        block = 64 * max(1, threads)
        for start in range(0, len(self.paths), block):
            stop = min(start + block, len(self.paths))
            in_threads(read_header, range(start, stop), threads)
            stored_bytes = int(shapes[:stop].prod(axis=1).sum()) * self.channels
            if max_bytes is not None and stored_bytes > max_bytes:
                return None
        return shapes

    def with_decoded(
        self, threads: int, shapes: np.ndarray | None = None, progress: bool = False
    ) -> ImageFiles:
        """A copy that reads every image from memory, decoded here once on ``threads`` threads
        (:class:`DecodedImages`); ``shapes``: :meth:`stored_shapes`, when read already;
        ``progress``: a progress bar on standard error."""
        shapes = self.stored_shapes(threads) if shapes is None else shapes
        decoded = DecodedImages.decode(
            self.paths, self.stored_form, shapes, threads, progress=progress
        )
        return self.replace(decoded=decoded)

    def replace(self, paths: Sequence[Path] | None = None, **changes: object) -> ImageFiles:
        """A copy over ``paths`` (default: the same) with constructor arguments changed; it
        keeps the decoded images over the same paths where it stores them alike (an evaluation
        view of a training view does not: the training view's JPEGs are decoded in draft)."""
        settings: dict[str, object] = {
            "size": self.size,
            "channels": self.channels,
            "preprocessing": self.preprocessing,
            "augment_seed": self.augment_seed,
        }
        settings.update(changes)
        copy = ImageFiles(self.paths if paths is None else paths, **settings)  # type: ignore[arg-type]
        kept = self.decoded if paths is None and "decoded" not in changes else None
        if kept is not None and kept.form == copy.stored_form:
            copy.decoded = kept
        return copy

    def _view(self, stored: Image.Image, index: int, epoch: int) -> Image.Image:
        """The item of ``stored``, an image in :attr:`stored_form`."""
        prep = self.preprocessing
        if prep is None:
            return stored  # stretched already
        resample = RESAMPLING[prep.interpolation]
        if self.augment_seed is None:
            fill = prep.padding_fill(self.channels)
            return evaluation_view(
                stored, self.height, self.resize_size, resample, prep.crop_mode, fill
            )
        rng = training_generator(self.augment_seed, epoch, index)
        return training_view(stored, self.height, rng, resample)


class LabelledDataset(Dataset):
    """Items with training labels and original (fine) labels.

    Parameters
    ----------
    name : str
        What the data is, e.g. ``"fashion-mnist/train"``; shown in logs and reports.
    x : np.ndarray or ImageFiles
        ``(n, *input_shape)`` float32 array, or lazily read image files.
    labels : array-like of int
        ``(n,)`` labels that training uses; -1 marks an unlabelled distractor.
    fine_labels : array-like of int, optional
        ``(n,)`` original classes (-1 for distractors); defaults to ``labels``.
    class_names : list of str, optional
        ``class_names[c]`` names label ``c``; defaults to the label numbers.
    fine_class_names : list of str, optional
        ``fine_class_names[c]`` names fine label ``c``; defaults to ``class_names``.
    source : str, optional
        Where the items were read from (files or folder), shown when a run starts.
    is_query : array-like of bool, optional
        ``(n,)`` True for the query items and False for the gallery items of a set evaluated by
        querying a gallery (In-Shop's test split): each query then ranks the gallery, not the
        other items (`clusterable.evaluate.evaluate_embeddings`'s ``queries``). None: every item
        queries all the others (leave-one-out).

    Attributes
    ----------
    labels, fine_labels : np.ndarray
        ``(n,)`` int64.
    input_shape : tuple of int
        Shape of one item, e.g. ``(1, 28, 28)``, ``(64,)`` or ``(3, 64, 64)``.

    Examples
    --------
    >>> ds = LabelledDataset("toy", np.zeros((4, 2), np.float32), [0, 0, 1, -1])
    >>> ds.num_classes, ds[2][1], ds.subset([0, 2]).labels.tolist()
    (2, 1, [0, 1])
    """

    def __init__(
        self,
        name: str,
        x: np.ndarray | ImageFiles,
        labels: Sequence[int] | np.ndarray,
        *,
        fine_labels: Sequence[int] | np.ndarray | None = None,
        class_names: list[str] | None = None,
        fine_class_names: list[str] | None = None,
        source: str = "",
        is_query: Sequence[bool] | np.ndarray | None = None,
    ) -> None:
        if isinstance(x, np.ndarray):
            x = np.asarray(x, dtype=np.float32)
        self.name = name
        self.source = source
        self.x = x
        self.labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        self.fine_labels = (
            self.labels.copy()
            if fine_labels is None
            else np.asarray(fine_labels, dtype=np.int64).reshape(-1)
        )
        if not len(self.x) == len(self.labels) == len(self.fine_labels):
            raise ValueError(
                f"dataset {name!r}: {len(self.x)} items but {len(self.labels)} labels and "
                f"{len(self.fine_labels)} fine labels; give one label of each kind per item"
            )
        if class_names is None:
            class_names = [str(c) for c in range(int(self.labels.max(initial=-1)) + 1)]
        self.class_names = list(class_names)
        self.fine_class_names = (
            self.class_names if fine_class_names is None else list(fine_class_names)
        )
        self.input_shape: tuple[int, ...] = tuple(int(s) for s in self.x.shape[1:])
        self.is_query = None if is_query is None else np.asarray(is_query, dtype=bool).reshape(-1)
        if self.is_query is not None and len(self.is_query) != len(self.labels):
            raise ValueError(
                f"dataset {name!r}: {len(self.labels)} items but {len(self.is_query)} query "
                "flags; give one is_query flag per item (True: query, False: gallery)"
            )

    @property
    def num_classes(self) -> int:
        """Number of distinct labels, distractors (-1) not counted."""
        return len(labelled_classes(self.labels))

    def features(self, *, flat: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Every item as one float32 array, and the ``(n,)`` labels.

        Parameters
        ----------
        flat : bool
            ``(n, prod(input_shape))`` rows (raw pixels as vectors, what k-means or t-SNE of the
            inputs take) instead of ``(n, *input_shape)``.

        Returns
        -------
        x : np.ndarray
            ``(n, *input_shape)`` or ``(n, d)`` float32: the stored array itself when the items
            are held in memory (do not write to it), the images decoded when they are files.
        labels : np.ndarray
            ``(n,)`` int64 training labels, -1 for unlabelled items.

        Examples
        --------
        >>> ds = LabelledDataset("toy", np.zeros((3, 1, 2, 2)), [0, 1, -1])
        >>> x, y = ds.features(flat=True)
        >>> x.shape, y.tolist()
        ((3, 4), [0, 1, -1])
        """
        if isinstance(self.x, np.ndarray):
            x = self.x
        else:
            x = np.empty((len(self), *self.input_shape), dtype=np.float32)
            for i in range(len(self)):
                x[i] = self.x[i]
        return (x.reshape(len(self), -1) if flat else x), self.labels

    def labelled(self) -> LabelledDataset:
        """The items that have a class (label not :data:`UNLABELLED`), in order."""
        return self.subset(labelled_mask(self.labels))

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int | tuple[int, int]) -> tuple[torch.Tensor, int]:
        """Item ``index`` and its label; ``(index, epoch)`` gives image files' training view of
        that epoch (augmentation seeded per item and epoch)."""
        if isinstance(index, tuple) and not isinstance(self.x, ImageFiles):
            index = index[0]
        position = index[0] if isinstance(index, tuple) else index
        return torch.from_numpy(np.asarray(self.x[index])), int(self.labels[position])

    def subset(self, indices: Sequence[int] | np.ndarray) -> LabelledDataset:
        """The items at ``indices`` (ints, or a boolean mask of length n), in that order."""
        indices = np.asarray(indices)
        if indices.dtype == bool:
            indices = np.flatnonzero(indices)
        return self.replace(
            x=self.x[indices],
            labels=self.labels[indices],
            fine_labels=self.fine_labels[indices],
            is_query=None if self.is_query is None else self.is_query[indices],
        )

    def replace(self, **changes: object) -> LabelledDataset:
        """A copy with the given constructor arguments changed (the label views build on this)."""
        fields: dict[str, object] = {
            "name": self.name,
            "x": self.x,
            "labels": self.labels,
            "fine_labels": self.fine_labels,
            "class_names": self.class_names,
            "fine_class_names": self.fine_class_names,
            "source": self.source,
            "is_query": self.is_query,
        }
        fields.update(changes)
        return LabelledDataset(**fields)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return (
            f"LabelledDataset({self.name!r}, n={len(self)}, num_classes={self.num_classes}, "
            f"input_shape={self.input_shape})"
        )


def concatenate(first: LabelledDataset, *others: LabelledDataset) -> LabelledDataset:
    """The items of several datasets, one after the other, under the first one's name and names.

    All must have the same ``input_shape`` and the same storage form (arrays, or image files of the
    same size and channels), and label numbers must mean the same class in all of them.
    """
    parts = (first, *others)
    for part in others:
        if part.input_shape != first.input_shape:
            raise ValueError(
                f"cannot concatenate {part.name!r} with items of shape {part.input_shape} to "
                f"{first.name!r} with items of shape {first.input_shape}"
            )
    if all(isinstance(part.x, np.ndarray) for part in parts):
        x: np.ndarray | ImageFiles = np.concatenate([part.x for part in parts])
    elif all(isinstance(part.x, ImageFiles) for part in parts):
        x = first.x.replace(  # type: ignore[union-attr]
            [path for part in parts for path in part.x.paths]  # type: ignore[union-attr]
        )
    else:
        raise TypeError(
            "cannot concatenate in-memory arrays with image files "
            f"({', '.join(p.name for p in parts)}); load the image files into an array first, "
            "e.g. ds.replace(x=ds.features()[0])"
        )
    flagged = [part.is_query is not None for part in parts]
    if any(flagged) and not all(flagged):
        raise ValueError(
            "cannot concatenate sets with query/gallery roles (is_query) and sets without: "
            f"{', '.join(p.name for p in parts if p.is_query is None)} have none"
        )
    return first.replace(
        x=x,
        labels=np.concatenate([part.labels for part in parts]),
        fine_labels=np.concatenate([part.fine_labels for part in parts]),
        is_query=np.concatenate([part.is_query for part in parts]) if all(flagged) else None,
    )
