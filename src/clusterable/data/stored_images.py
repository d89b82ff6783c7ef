"""How an image file is decoded and kept: at the working resolution of the view that reads it
(:class:`StoredForm`), and, decoded once, in one uint8 buffer (:class:`DecodedImages`), in
memory or memory-mapped from a file (:mod:`clusterable.data.image_cache`).

What :class:`~clusterable.data.dataset.ImageFiles` keeps of a file, by view:

- the stretch to a square (no backbone): the item itself, ``width x height``;
- a backbone's evaluation view: the image resized to the evaluation resize (256 for 224 crops)
  as its crop mode says (:func:`clusterable.data.transforms.evaluation_size`: the shorter side,
  the whole image to a square, or the longer side), from the whole decoded file; the view then
  takes the centre crop: the pixels the view always had;
- a backbone's training view (issue 40): the shorter side at that size, aspect ratio kept,
  whatever the crop mode, but a JPEG is first decoded with PIL's
  draft mode at the smallest DCT scale (1/1, 1/2, 1/4, 1/8) that is at or above that size (a
  1600 x 1200 photo at 400 x 300, about a third of the time: benchmarks/README.md, "Decoding at
  the working resolution"). The random resized crop and the flip are then drawn from that
  stored image, as FFCV does, whether it is held decoded or decoded at every access, so
  ``cache_images`` never changes a batch. Other formats are resized alike, without draft.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import PIL
from PIL import Image, UnidentifiedImageError
from tqdm import tqdm

from clusterable.data.transforms import RESAMPLING, longer_side_size, shorter_side_size


@contextmanager
def named_read_errors(path: Path) -> Iterator[None]:
    """A missing or undecodable image file as an error that names it and says what to do."""
    try:
        yield
    except FileNotFoundError:
        raise FileNotFoundError(
            f"image file {path} is missing: the dataset's list names it but it is not on disk; "
            "check that the archive was extracted completely"
        ) from None
    except (UnidentifiedImageError, OSError) as error:
        raise ValueError(
            f"cannot decode image file {path} ({error}); replace or delete the file"
        ) from error


#: PIL's modes of 16-bit grayscale images (a 16-bit PNG or TIFF), which its ``convert`` clips
#: to white above 255.
SIXTEEN_BIT_MODES = ("I;16", "I;16B", "I;16L", "I;16N")


def in_mode(image: Image.Image, channels: int) -> Image.Image:
    """``image`` as RGB (3 channels) or grayscale (1); a 16-bit grayscale image is first scaled
    to 8 bits (its values divided by 256), as PIL's own conversion would clip it to white."""
    if image.mode in SIXTEEN_BIT_MODES:
        image = Image.fromarray((np.asarray(image) >> 8).astype(np.uint8))  # (H, W), mode L
    mode = "RGB" if channels == 3 else "L"
    # convert() to the mode an image has already is a copy of it; decoding is the cost that
    # remains (benchmarks/README.md, "Training throughput").
    return image if image.mode == mode else image.convert(mode)


def in_threads(
    task: Callable[[int], None], positions: range, threads: int, done: Callable[[], Any] = int
) -> None:
    """``task(i)`` for each of ``positions`` on ``threads`` threads, calling ``done()`` after
    each; the first error is raised here, in the calling thread (``map`` then cancels the tasks
    not yet started)."""
    with ThreadPoolExecutor(max(1, threads)) as pool:
        for _ in pool.map(task, positions):
            done()


@dataclass(frozen=True)
class StoredForm:
    """What is kept of an image file: its pixels in ``channels`` (3: RGB, 1: grayscale), at
    ``size`` (``(width, height)``, stretched) or, where ``shorter_side`` is given, with the
    shorter side resized to it (aspect ratio kept, torchvision's ``Resize(int)``), or where
    ``longer_side`` is, the longer side (timm's ``ResizeKeepRatio(longest=1)``), resized with
    ``interpolation``; ``draft``: a JPEG decoded at the smallest DCT scale at or above that size
    first (``PIL.Image.Image.draft``)."""

    channels: int
    shorter_side: int | None = None
    size: tuple[int, int] = (0, 0)
    interpolation: str = "bilinear"
    draft: bool = False
    longer_side: int | None = None

    @property
    def mode(self) -> str:
        """PIL's mode of the images: ``"RGB"`` or ``"L"`` (grey)."""
        return "RGB" if self.channels == 3 else "L"

    @property
    def decoder(self) -> str:
        """The library that decodes, with its version: its pixels are what a cache holds."""
        return f"Pillow {PIL.__version__}"

    def stored_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` kept of an image of ``width x height``."""
        if self.shorter_side is not None:
            return shorter_side_size(width, height, self.shorter_side)
        if self.longer_side is not None:
            return longer_side_size(width, height, self.longer_side)
        return self.size

    def read(self, path: Path) -> Image.Image:
        """The file at ``path`` decoded and resized to its stored size, in :attr:`mode`.

        Raises
        ------
        FileNotFoundError, ValueError
            The file is missing or cannot be decoded; the message names it.
        """
        with named_read_errors(path), Image.open(path) as image:
            target = self.stored_size(*image.size)
            if self.draft:  # JPEG only; other formats ignore it
                image.draft(self.mode, target)
            image.load()
            image = in_mode(image, self.channels)
            if image.size != target:
                image = image.resize(target, RESAMPLING[self.interpolation])
            return image


class DecodedImages:
    """Images decoded once, where :class:`~clusterable.data.dataset.ImageFiles` reads its pixels
    instead of its files (``TrainConfig.cache_images``, :mod:`clusterable.train.loading`).

    Each image, in its stored form, lies in one uint8 buffer: ``shapes[i]`` (height, width)
    times ``form.channels`` bytes from ``offsets[i]``. One allocation (or one memory-mapped
    file), which DataLoader workers forked after it share (they only read it); a worker started
    by ``spawn`` or ``forkserver`` receives the dataset pickled: a copy of an allocation, or the
    file mapped again.

    Parameters
    ----------
    buffer : np.ndarray
        ``(bytes,)`` uint8, in memory or a ``numpy.memmap``.
    offsets : np.ndarray
        ``(n,)`` int64: where each image starts in ``buffer``.
    shapes : np.ndarray
        ``(n, 2)`` int64: each stored image's height and width.
    form : StoredForm
        What each image is (:meth:`StoredForm.read` of its file).
    file : Path, optional
        The ``.npy`` file ``buffer`` maps, mapped again where the images are unpickled.
    """

    def __init__(
        self,
        buffer: np.ndarray,
        offsets: np.ndarray,
        shapes: np.ndarray,
        form: StoredForm,
        file: Path | None = None,
    ) -> None:
        self.buffer, self.offsets, self.shapes = buffer, offsets, shapes
        self.form, self.file = form, file

    @classmethod
    def decode(
        cls,
        paths: Sequence[Path],
        form: StoredForm,
        shapes: np.ndarray,
        threads: int,
        *,
        buffer: np.ndarray | None = None,
        progress: bool = False,
    ) -> DecodedImages:
        """``paths`` read in ``form`` on ``threads`` threads (PIL decodes without the GIL).

        Parameters
        ----------
        paths : sequence of Path
            The image files.
        form : StoredForm
            What is kept of each.
        shapes : np.ndarray
            ``(n, 2)`` stored heights and widths (:meth:`StoredForm.stored_size` of the headers).
        threads : int
            Decoding threads.
        buffer : np.ndarray, optional
            ``(bytes,)`` uint8 to decode into (a memory-mapped file); default a new allocation.
        progress : bool
            A progress bar on standard error.

        Raises
        ------
        FileNotFoundError, ValueError
            A file that is missing or cannot be decoded, named as at access.
        """
        shapes = np.asarray(shapes, dtype=np.int64).reshape(-1, 2)
        sizes = shapes.prod(axis=1) * form.channels  # (n,) bytes
        if buffer is None:
            buffer = np.empty(int(sizes.sum()), dtype=np.uint8)
        decoded = cls(buffer, np.cumsum(sizes) - sizes, shapes, form)

        def decode_one(position: int) -> None:
            decoded.image(position)[...] = np.asarray(form.read(paths[position]))

        with tqdm(
            total=len(paths), desc="decoding images", unit="image", disable=not progress
        ) as bar:
            in_threads(decode_one, range(len(paths)), threads, bar.update)
        return decoded

    @property
    def nbytes(self) -> int:
        """Bytes the decoded images take in memory."""
        return int(self.buffer.nbytes)

    def __len__(self) -> int:
        return len(self.offsets)

    def image(self, position: int) -> np.ndarray:
        """Image ``position``: a ``(height, width, channels)`` view, ``(height, width)`` for
        grayscale."""
        height, width = (int(v) for v in self.shapes[position])
        start = int(self.offsets[position])
        pixels = self.buffer[start : start + height * width * self.form.channels]
        return pixels.reshape((height, width, 3) if self.form.channels == 3 else (height, width))

    def take(self, positions: np.ndarray) -> DecodedImages:
        """The images at ``positions``, in that order, in the same buffer (nothing is copied)."""
        positions = np.asarray(positions, dtype=np.int64)
        return DecodedImages(
            self.buffer, self.offsets[positions], self.shapes[positions], self.form, self.file
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self.file is not None:  # mapped again where unpickled, not copied
            state["buffer"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.file is not None:
            self.buffer = np.load(self.file, mmap_mode="r")
