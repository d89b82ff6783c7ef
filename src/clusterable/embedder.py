"""Embedding new inputs with a trained run: its model, input shape and preprocessing, loaded once.

``Embedder.from_run(run)`` rebuilds a run's model from its best checkpoint (the stored run spec
says how), and :meth:`Embedder.embed` turns what a user has into embeddings, in batches, without
gradient, on the device of the package's rule (:mod:`clusterable.device`):

- a :class:`~clusterable.data.LabelledDataset`, or a data-set name ``load_dataset`` knows
  (``"fashion-mnist"``, ``"folder:PATH"``, ``"table:PATH"``; its test split unless told);
- a folder of images (class sub-folders give labels), image files, or a list of them;
- a table: ``.csv`` (a ``label`` column and feature columns), ``.npz`` (``x``, ``y``) or ``.npy``;
- an array or tensor of items, ``(n, *input_shape)``.

Images are preprocessed as the run's image data was: converted to the run's channels (grayscale or
RGB), resized (bilinear) to its square size (an image backbone's run: its evaluation view, the
shorter side resized and the centre cropped), scaled to [0, 1], channels first. Arrays and tables
are taken as they are and must have the run's item shape; a mismatch is an error that names both.

An embedder knows its model's identity (the checksum of its weights, and its run), which a search
index keeps and :class:`ModelIdentity` writes beside saved embeddings (``model.json``), so that
embeddings of different models are never compared. :meth:`Embedder.load_split` gives a split of
the run's own data (or of other data of its item shape), read as the run read it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from clusterable.data import ImageFiles, LabelledDataset, load_dataset
from clusterable.data.generic import load_table
from clusterable.data.transforms import backbone_preprocessing
from clusterable.device import DeviceSpec, resolve_device

if TYPE_CHECKING:
    from clusterable.recipe import RunSpec

#: File suffixes read as images.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".pgm")

#: File suffixes read as tables of feature rows.
TABLE_SUFFIXES = (".csv", ".npz", ".npy")

#: The file written beside saved embeddings: which model made them, from which items.
MODEL_IDENTITY = "model.json"


@dataclass(frozen=True)
class ModelIdentity:
    """Which model embedded some saved embeddings, and which items (``model.json`` beside them).

    Attributes
    ----------
    model : str
        Checksum of the model's weights (:func:`clusterable.index.model_checksum`).
    run : str
        The run folder the model came from.
    data, root, split : str, optional
        The items embedded: a data-set name (None: the run's own data), its folder, its split.
    """

    model: str
    run: str
    data: str | None = None
    root: str | None = None
    split: str | None = None

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write ``folder/model.json``; returns its path."""
        path = Path(folder) / MODEL_IDENTITY
        path.write_text(json.dumps(asdict(self), indent=2))
        return path

    @classmethod
    def beside(cls, embeddings: str | os.PathLike[str]) -> ModelIdentity | None:
        """The identity saved in the folder of the file ``embeddings``; None when there is none."""
        path = Path(embeddings).with_name(MODEL_IDENTITY)
        if not path.is_file():
            return None
        values = json.loads(path.read_text())
        try:
            return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})
        except TypeError:
            raise ValueError(
                f"{path} does not name the model and run that made the embeddings beside it; "
                "write them again with `clusterable embed`"
            ) from None


@dataclass
class EmbeddedItems:
    """Embeddings of some items, with what identifies them.

    Attributes
    ----------
    embeddings : np.ndarray
        ``(n, d)`` float32.
    ids : np.ndarray
        ``(n,)`` item ids: file paths for images, row numbers otherwise.
    labels : np.ndarray or None
        ``(n,)`` labels where the source has them (class names when it names its classes).
    source : str
        What was embedded, for messages.
    """

    embeddings: np.ndarray
    ids: np.ndarray
    labels: np.ndarray | None
    source: str


class Embedder:
    """A trained model ready to embed new items.

    Parameters
    ----------
    model : nn.Module
        Maps a batch ``(b, *input_shape)`` float32 to ``(b, d)`` embeddings.
    input_shape : tuple of int
        Shape of one item, e.g. ``(1, 28, 28)`` or ``(64,)``.
    model_id : str, optional
        Identity of the model (:func:`clusterable.index.model_checksum` of its weights).
    run : str, optional
        The run folder the model came from.
    spec : RunSpec, optional
        The run's settings: its data, label view and image settings (:meth:`load_split`).
    checkpoint : Path, optional
        The checkpoint the weights were read from.
    device : str or torch.device, optional
        Where to run (:mod:`clusterable.device`): ``"auto"`` takes CUDA, then Apple's MPS, then
        the CPU.

    Examples
    --------
    >>> embedder = Embedder.from_run("runs/fm-lifted")  # doctest: +SKIP
    >>> items = embedder.embed("photos/")  # doctest: +SKIP
    >>> items.embeddings.shape, items.ids[:2]  # doctest: +SKIP
    ((12, 128), array(['photos/boot.png', 'photos/shirt.png'], dtype='<U16'))
    """

    def __init__(
        self,
        model: nn.Module,
        input_shape: Sequence[int],
        *,
        model_id: str | None = None,
        run: str | None = None,
        spec: RunSpec | None = None,
        checkpoint: Path | None = None,
        device: DeviceSpec = "auto",
    ) -> None:
        self.device = resolve_device(device)
        self.model = model.eval().to(self.device)
        self.input_shape = tuple(int(s) for s in input_shape)
        self.model_id = model_id
        self.run = run
        self.spec = spec
        self.checkpoint = checkpoint

    @classmethod
    def from_run(cls, run: str | os.PathLike[str], device: DeviceSpec = "auto") -> Embedder:
        """Load the best checkpoint of a training run (its folder, or one checkpoint folder).

        Raises
        ------
        FileNotFoundError
            If ``run`` holds no checkpoint.
        """
        from clusterable.index import model_checksum
        from clusterable.recipe import load_trained
        from clusterable.train.checkpoint import load_run_record

        model, _, spec, checkpoint = load_trained(run)
        input_shape = load_run_record(checkpoint)["input_shape"]
        return cls(
            model,
            input_shape,
            model_id=model_checksum(model.state_dict()),
            run=str(Path(run).resolve()),
            spec=spec,
            checkpoint=checkpoint,
            device=device,
        )

    def identity(
        self, data: str | None = None, root: str | None = None, split: str | None = None
    ) -> ModelIdentity:
        """This model's identity, for embeddings it made of ``data`` (None: the run's own)."""
        if self.model_id is None or self.run is None:
            raise ValueError("this embedder was not loaded from a run: it has no identity")
        return ModelIdentity(self.model_id, self.run, data=data, root=root, split=split)

    def load_split(
        self, data: str | None = None, root: str | None = None, split: str = "test"
    ) -> LabelledDataset:
        """A split of the run's data, or of ``data``, read with the run's label view and image
        settings; ``root`` defaults to the run's for the run's own data.

        Raises
        ------
        ValueError
            If the items of ``data`` do not have the shape the run's model embeds.
        """
        if self.spec is None:
            raise ValueError("this embedder was not loaded from a run: name the data to embed")
        spec = self.spec
        dataset = load_dataset(
            data or spec.data,
            root=root or (spec.root if data is None else None),
            split=split,
            labels=spec.labels,
            image_size=spec.image_size,
            channels=spec.channels,
        )
        if dataset.input_shape != self.input_shape:
            raise ValueError(
                f"the run {self.run} was trained on {spec.data}, items of shape "
                f"{self.input_shape}; {data} has items of shape {dataset.input_shape}, which its "
                "model cannot embed: give data of the run's shape, or train a run on this data"
            )
        return dataset

    @property
    def expects(self) -> str:
        """What one item must be, in words."""
        shape = "x".join(str(s) for s in self.input_shape)
        if self.is_image_model:
            kind = "grayscale" if self.input_shape[0] == 1 else "RGB"
            return f"{kind} images of {self.input_shape[1]}x{self.input_shape[2]} pixels ({shape})"
        return f"items of shape ({shape})"

    @property
    def is_image_model(self) -> bool:
        shape = self.input_shape
        return len(shape) == 3 and shape[0] in (1, 3) and shape[1] == shape[2]

    @torch.no_grad()
    def embed(
        self,
        items: Any,
        *,
        split: str = "test",
        root: str | None = None,
        batch_size: int = 256,
        progress: bool | None = None,
    ) -> EmbeddedItems:
        """Embeddings of ``items`` (see the module docstring for what they may be).

        Parameters
        ----------
        items
            A dataset, a data-set name, a folder or file path (or a list of image paths), or an
            array or tensor ``(n, *input_shape)``.
        split, root
            For a data-set name: which split, and where its files are.
        batch_size : int
            Items per forward pass.
        progress : bool, optional
            Show a progress bar; by default when standard error is a terminal.

        Raises
        ------
        ValueError
            If the items do not have the run's item shape (the message says what it expects), or
            a file cannot be read.
        FileNotFoundError
            If a path does not exist.
        """
        data, ids, labels, source = self._resolve(items, split, root)
        n = len(data)
        if n == 0:
            raise ValueError(f"{source} holds no items to embed")
        chunks = []
        loader = DataLoader(_Items(data), batch_size=batch_size, shuffle=False)
        show = sys.stderr.isatty() if progress is None else progress
        for batch in tqdm(loader, desc=f"embedding {source}", unit="batch", disable=not show):
            chunks.append(self.model(batch.to(self.device)).float().cpu())  # (b, d)
        embeddings = torch.cat(chunks).numpy()  # (n, d)
        return EmbeddedItems(embeddings, ids, labels, source)

    def _resolve(
        self, items: Any, split: str, root: str | None
    ) -> tuple[Any, np.ndarray, np.ndarray | None, str]:
        """``(item storage, ids, labels, description)`` of anything :meth:`embed` accepts."""
        if isinstance(items, LabelledDataset):
            return self._from_dataset(items)
        if isinstance(items, (np.ndarray, torch.Tensor)):
            array = self._checked(np.asarray(items, dtype=np.float32), "the array")
            return array, np.arange(len(array)), None, f"an array of {len(array)} items"
        if isinstance(items, (list, tuple)):
            paths = [Path(p) for p in items]
            return self._images(paths, None, f"{len(paths)} image files")
        text = os.fspath(items)
        path = Path(text).expanduser()
        if path.is_dir():
            return self._from_folder(path)
        if path.suffix.lower() in IMAGE_SUFFIXES:
            if not path.is_file():
                raise FileNotFoundError(f"image file {path} does not exist")
            return self._images([path], None, str(path))
        if path.suffix.lower() in TABLE_SUFFIXES:
            return self._from_table(path)
        if ":" in text or not path.suffix:
            return self._from_dataset(load_dataset(text, root=root, split=split))
        raise ValueError(
            f"cannot embed {text!r}: give a folder of images, image files "
            f"({', '.join(IMAGE_SUFFIXES)}), a table (.csv, .npz, .npy) or a data-set name"
        )

    def _from_dataset(
        self, dataset: LabelledDataset
    ) -> tuple[Any, np.ndarray, np.ndarray | None, str]:
        if dataset.input_shape != self.input_shape:
            raise ValueError(
                f"{dataset.name} has items of shape {dataset.input_shape} but the run expects "
                f"{self.expects}: the run was trained on other data"
            )
        names = np.array(dataset.class_names + ["-1"], dtype=object)  # -1: a distractor
        labels = names[dataset.labels].astype(str)
        ids = (
            np.array([str(p) for p in dataset.x.paths])
            if isinstance(dataset.x, ImageFiles)
            else np.arange(len(dataset))
        )
        return dataset.x, ids, labels, dataset.name

    def _from_folder(self, folder: Path) -> tuple[Any, np.ndarray, np.ndarray | None, str]:
        """Images directly in ``folder`` (no label) and in its sub-folders (labelled by them)."""
        paths, labels = [], []
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES:
                paths.append(path)
                relative = path.relative_to(folder).parts
                labels.append(relative[-2] if len(relative) > 1 else "")
        if not paths:
            raise ValueError(
                f"folder {folder} holds no image files ({', '.join(IMAGE_SUFFIXES)}); give a "
                "folder of images, or a table file"
            )
        has_labels = all(labels)
        return self._images(paths, np.array(labels) if has_labels else None, str(folder))

    def _images(
        self, paths: list[Path], labels: np.ndarray | None, source: str
    ) -> tuple[Any, np.ndarray, np.ndarray | None, str]:
        if not self.is_image_model:
            raise ValueError(
                f"the run takes {self.expects}, not images; give a table or an array of such items"
            )
        missing = [p for p in paths if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"image file {missing[0]} does not exist")
        channels, size = self.input_shape[0], self.input_shape[1]
        # An image backbone's run evaluated its images resized and centre-cropped (its
        # preprocessing), not stretched to the square: new images get the same view.
        preprocessing = None if self.spec is None else backbone_preprocessing(self.spec.model)
        files = ImageFiles(paths, size=size, channels=channels, preprocessing=preprocessing)
        return files, np.array([str(p) for p in paths]), labels, source

    def _from_table(self, path: Path) -> tuple[Any, np.ndarray, np.ndarray | None, str]:
        if path.suffix.lower() == ".npy" and not path.with_name(f"{path.stem}_labels.npy").exists():
            if not path.is_file():
                raise FileNotFoundError(f"array file {path} does not exist")
            array = self._checked(np.load(path, allow_pickle=False).astype(np.float32), str(path))
            return array, np.arange(len(array)), None, str(path)
        table = load_table(path, split="all")
        width = int(np.prod(self.input_shape))
        if table.input_shape[0] != width:
            raise ValueError(
                f"table {path} has {table.input_shape[0]} feature columns but the run expects "
                f"{self.expects}: give {width} feature columns per row"
            )
        table = table.replace(x=table.x.reshape(len(table), *self.input_shape))
        return self._from_dataset(table)

    def _checked(self, array: np.ndarray, what: str) -> np.ndarray:
        """``array`` as ``(n, *input_shape)`` (one item alone gets its batch axis)."""
        if array.shape == self.input_shape:
            array = array[None]
        if array.shape[1:] != self.input_shape:
            raise ValueError(
                f"{what} has shape {array.shape} but the run expects {self.expects}: give an "
                f"array of shape (n, {', '.join(str(s) for s in self.input_shape)})"
            )
        if not np.isfinite(array).all():
            row = int(np.flatnonzero(~np.isfinite(array.reshape(len(array), -1)).all(1))[0])
            raise ValueError(f"{what} holds NaN or infinite values (first in row {row})")
        return array


class _Items(Dataset):
    """Items of an array or :class:`ImageFiles` as float32 tensors, labels left out."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.from_numpy(np.asarray(self.data[index], dtype=np.float32))
