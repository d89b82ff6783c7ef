"""A trained run as one object: its record, its model on a device, its data view, its embeddings.

Every verb that takes a run (``evaluate``, ``embed``, ``plot``, ``report``, ``index``, ``search``,
``assign``, ``export``, ``cluster`` of a run's embeddings, and ``train``'s own end-of-run report)
goes through :class:`TrainedRun`, as every user of a timm model asks the model for its data config
(``timm.data.resolve_data_config``) instead of rebuilding the view:

- the run's record is read once (:func:`clusterable.train.run_folder.read_run_record` for
  ``run.json``, :func:`clusterable.train.checkpoint.load_run_record` for the checkpoint's);
- a split of the run's data, or of other data in the run's view, is rebuilt only by
  :meth:`clusterable.recipe.RunSpec.load`: the same preprocessing (the view the checkpoint
  stores, whatever timm or torchvision is installed now), image size, channels, evaluation view
  and query/gallery roles as the run's own test table;
- image files and folders a user brings get that same view (:meth:`TrainedRun.image_files`),
  whether a folder is given as a path or as the data set ``folder:PATH``;
- everything is embedded by one loop, :func:`clusterable.train.embed_dataset` (loader workers,
  uint8 decoding), on the run's device, held here and passed down explicitly.

What :meth:`TrainedRun.embed` accepts:

- a :class:`~clusterable.data.LabelledDataset`, or a data-set name ``load_dataset`` knows
  (``"fashion-mnist"``, ``"folder:PATH"``, ``"table:PATH"``): a split of it in the run's view;
- a folder of images (class sub-folders give labels; with a ``split``, the folder is read as a
  data set, ``folder:PATH``, and the split honoured), image files, or a list of them;
- a table: ``.csv`` (a ``label`` column and feature columns), ``.npz`` (``x``, ``y``) or ``.npy``;
- an array or tensor of items, ``(n, *input_shape)``.

A run knows its model's identity (the checksum of its weights, and its folder), which a search
index and a saved partition keep and :class:`ModelIdentity` writes beside saved embeddings
(``model.json``), so that embeddings of different models are never compared.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from clusterable._arrays import to_numpy
from clusterable._atomic import atomic_write_text
from clusterable._ranges import Bounds, check_bounds
from clusterable.data import ImageFiles, LabelledDataset, labelled_mask
from clusterable.data.generic import IMAGE_EXTENSIONS, images_in, load_table
from clusterable.data.registry import available_datasets, dataset_items, names_a_path
from clusterable.data.transforms import (
    Preprocessing,
    backbone_preprocessing,
    describe_evaluation_view,
)
from clusterable.device import DeviceSpec, resolve_device

if TYPE_CHECKING:
    from clusterable.before_training import BeforeTraining
    from clusterable.losses import EmbeddingLoss
    from clusterable.recipe import KnnReference, RunSpec

#: File suffixes read as tables of feature rows.
TABLE_SUFFIXES = (".csv", ".npz", ".npy")

#: The file written beside saved embeddings: which model made them, from which items.
MODEL_IDENTITY = "model.json"

#: The ranges of :meth:`TrainedRun.embed`'s loader settings, checked before any item is read.
EMBED_BOUNDS = {
    "batch_size": Bounds(1, integer=True, none="the embedding loop's default"),
    "workers": Bounds(0, integer=True, none="the training default"),
}

#: A 16-bit grayscale image's first step (:func:`clusterable.data.stored_images.in_mode`).
_SIXTEEN_BITS = (
    "; a 16-bit grayscale image (mode I;16) is scaled to 8 bits before the conversion: "
    "image = Image.fromarray((np.asarray(image) >> 8).astype(np.uint8))"
)

#: How an image file is decoded to the model's channels, by the number of channels: PIL's
#: conversion, before any resize (converting after resizing gives other pixel values).
_DECODE = {
    1: "Image.open(file).convert('L'), before resizing: PIL's luma, L = R * 299/1000 + "
    "G * 587/1000 + B * 114/1000 (not the channels' mean)" + _SIXTEEN_BITS,
    3: "Image.open(file).convert('RGB'), before resizing (an alpha channel is dropped)"
    + _SIXTEEN_BITS,
}


@dataclass(frozen=True)
class ModelIdentity:
    """Which model embedded some saved embeddings, and which items (``model.json`` beside them).

    Attributes
    ----------
    model : str
        Checksum of the model's weights (:func:`clusterable.index.model_checksum`).
    run : str
        The run folder the model came from (the checkpoint's own folder for a checkpoint
        outside any run folder).
    data : str or tuple of str, optional
        The items embedded: a data-set name (None: the run's own data); or (``split`` None) the
        file or folder ``embed --items`` named, or the files it named, one entry each (a list
        in the file; files written before held them joined by spaces, read as one string).
    root, split : str, optional
        The data set's folder and split.
    checkpoint : str, optional
        The checkpoint folder whose weights the model has (None in files written before it
        was recorded).

    Paths are absolute, so the file holds from any working folder.
    """

    model: str
    run: str
    data: str | tuple[str, ...] | None = None
    root: str | None = None
    split: str | None = None
    checkpoint: str | None = None

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write ``folder/model.json``; returns its path."""
        path = Path(folder) / MODEL_IDENTITY
        atomic_write_text(path, json.dumps(asdict(self), indent=2))
        return path

    @classmethod
    def beside(cls, embeddings: str | os.PathLike[str]) -> ModelIdentity | None:
        """The identity saved in the folder of the file ``embeddings``; None when there is none."""
        path = Path(embeddings).with_name(MODEL_IDENTITY)
        if not path.is_file():
            return None
        try:
            values = json.loads(path.read_text())
            if isinstance(values.get("data"), list):  # several items, one entry each
                values["data"] = tuple(str(item) for item in values["data"])
            return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})
        except (AttributeError, TypeError, ValueError):
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
    dataset : LabelledDataset
        The items as they were embedded (their view, codes, fine labels and query roles).
    """

    embeddings: np.ndarray
    ids: np.ndarray
    labels: np.ndarray | None
    source: str
    dataset: LabelledDataset


class TrainedRun:
    """A trained run: its settings, its model on a device, and the view of its data.

    Build one with :meth:`load`. Parameters are what ``load`` reads; give them directly only for
    a model built in your own code (it then has no identity and no data view).

    Parameters
    ----------
    model : nn.Module
        Maps a batch ``(b, *input_shape)`` float32 to ``(b, d)`` embeddings.
    input_shape : tuple of int
        Shape of one item, e.g. ``(1, 28, 28)`` or ``(64,)``.
    spec : RunSpec, optional
        The run's data, model and loss settings (its data view).
    config : dict, optional
        The run's training settings, as ``run.json`` holds them (empty for a lone checkpoint).
    model_id : str, optional
        The checksum of the model's weights (:func:`clusterable.index.model_checksum`).
    folder : Path, optional
        The run folder, whether the run was given as its folder or as one of its checkpoints;
        a checkpoint's own folder for a checkpoint outside any run folder.
    checkpoint : Path, optional
        The checkpoint the weights were read from.
    device : str or torch.device
        Where the model runs (:mod:`clusterable.device`).
    loss : EmbeddingLoss, optional
        The run's trained loss, whose own classifier (cross-entropy, center, COREL) scores the
        test table's ``classification_accuracy``; None where it is not known.
    preprocessing : Preprocessing, optional
        The run's view of images, as its checkpoint stores it
        (:func:`clusterable.recipe.run_preprocessing`); None: the installed library's for the
        spec's model.

    Examples
    --------
    >>> run = TrainedRun.load("runs/fm-lifted", device="cpu")  # doctest: +SKIP
    >>> items = run.embed("photos/")  # doctest: +SKIP
    >>> items.embeddings.shape, items.ids[:2]  # doctest: +SKIP
    ((12, 128), array(['photos/boot.png', 'photos/shirt.png'], dtype='<U16'))
    """

    def __init__(
        self,
        model: nn.Module,
        input_shape: Sequence[int],
        *,
        spec: RunSpec | None = None,
        config: dict[str, Any] | None = None,
        model_id: str | None = None,
        folder: Path | None = None,
        checkpoint: Path | None = None,
        device: DeviceSpec = "auto",
        loss: EmbeddingLoss | None = None,
        preprocessing: Preprocessing | None = None,
    ) -> None:
        self.device = resolve_device(device)
        self.model = model.eval().to(self.device)
        self.loss = None if loss is None else loss.eval().to(self.device)
        self.input_shape = tuple(int(s) for s in input_shape)
        self.spec = spec
        self.config = dict(config or {})
        self.model_id = model_id
        self.folder = folder
        self.checkpoint = checkpoint
        if preprocessing is None and spec is not None:
            preprocessing = backbone_preprocessing(spec.model)
        self.preprocessing = preprocessing

    @classmethod
    def load(cls, run: str | os.PathLike[str], device: DeviceSpec = "auto") -> TrainedRun:
        """A training run with the weights of its best checkpoint, or of the checkpoint given.

        ``run`` is a run folder, its ``checkpoints`` folder (the best checkpoint, whose pointer
        lies there), or one checkpoint folder. A checkpoint of a run is read as that run: its
        record (``run.json``: seed, settings, hence its validation split and training items),
        its test table and its identity come from the run folder, its weights from the
        checkpoint. A checkpoint copied out of its run has no ``run.json``: it is its own
        folder, and what needs the run's record is left out with a note saying so.

        Raises
        ------
        FileNotFoundError
            If ``run`` does not exist or holds no checkpoint.
        """
        from clusterable.index import model_checksum
        from clusterable.recipe import load_trained
        from clusterable.train.run_folder import (
            RUN_RECORD,
            checkpoint_run_folder,
            read_run_record,
        )

        path = Path(run).expanduser()
        if not path.exists():
            raise FileNotFoundError(
                f"run folder {path} does not exist; give the folder `clusterable train` wrote"
            )
        trained = load_trained(path)
        # A checkpoint of a run (or its checkpoints/ folder) is that run, with those weights;
        # both absolute, as what records the model (model.json, an index) keeps them.
        checkpoint = trained.checkpoint.resolve()
        folder = checkpoint_run_folder(checkpoint) or path.resolve()
        config = (
            read_run_record(folder, f"run {path}")["config"]
            if (folder / RUN_RECORD).is_file()
            else {}
        )
        return cls(
            trained.model,
            trained.input_shape,
            spec=trained.spec,
            config=config,
            model_id=model_checksum(trained.model.state_dict()),
            folder=folder,
            checkpoint=checkpoint,
            device=device,
            # A run of no epochs (a pretrained backbone as it is) trained no classifier.
            loss=None if config.get("epochs") == 0 else trained.loss,
            preprocessing=trained.preprocessing,
        )

    # ---- what the run is -------------------------------------------------------------------

    @property
    def seed(self) -> int:
        """The run's seed (its test table's clustering seed); 0 for a lone checkpoint."""
        return int(self.config.get("seed", 0))

    @property
    def run_folder(self) -> Path | None:
        """The run folder that holds the checkpoint, whether the run was given as its folder or
        as one of its checkpoints (``folder`` then); None for a lone checkpoint, outside any
        run folder, or a model not loaded from a run."""
        from clusterable.train.run_folder import checkpoint_run_folder

        return None if self.checkpoint is None else checkpoint_run_folder(self.checkpoint)

    @property
    def recall_ks(self) -> tuple[int, ...]:
        """The Recall@K of the run's test table: its benchmark's own, else 1, 2, 4, 8."""
        from clusterable.data.registry import standard_recall_ks
        from clusterable.recipe import TEST_RECALL_KS

        standard = None if self.spec is None else standard_recall_ks(self.spec.data)
        return tuple(standard or TEST_RECALL_KS)

    @property
    def test_metrics(self) -> dict[str, float] | None:
        """The run's own test table (``test_metrics.json``), or None when it has none, or when
        the weights are not those it scored (:attr:`is_best`)."""
        from clusterable.train.run_folder import TEST_METRICS

        path = None if self.folder is None else self.folder / TEST_METRICS
        if path is None or not path.is_file() or not self.is_best:
            return None
        return json.loads(path.read_text())

    @property
    def before_training(self) -> BeforeTraining | None:
        """The test table of where the run started (``train --before-training``: the
        pretrained backbone's features or the raw inputs), or None where it has none."""
        from clusterable.before_training import BeforeTraining

        return BeforeTraining.load(self.run_folder)

    @property
    def is_best(self) -> bool:
        """Whether the weights are the run's best checkpoint's, the one its test table scored
        (or a lone checkpoint's, or a model not loaded from a run); False for another checkpoint
        of the run."""
        from clusterable.train.checkpoint import resolve_checkpoint

        run_folder = self.run_folder
        if run_folder is None or self.checkpoint is None:
            return True
        best = resolve_checkpoint(run_folder, pointer="best")
        return best.resolve() == Path(self.checkpoint).resolve()

    def identity(
        self,
        data: str | Sequence[str] | None = None,
        root: str | None = None,
        split: str | None = None,
    ) -> ModelIdentity:
        """This model's identity (its checksum, its run folder and its checkpoint), for
        embeddings it made of ``data``: a data-set name (None: the run's own), or the paths of
        the items themselves (a sequence: files, folders, a table; several are recorded one
        entry each, one alone as its path). A ``folder:PATH`` or
        ``table:PATH``, each item path and ``root`` are recorded as absolute paths, so the split
        can be read again from any working folder (``report`` reads its images), and the record
        names the same items wherever it is read."""
        if self.model_id is None or self.folder is None:
            raise ValueError("this model was not loaded from a run: it has no identity")
        if data is not None and not isinstance(data, str):  # the items' own paths
            paths = tuple(_absolute(path) for path in data)
            data = paths[0] if len(paths) == 1 else paths
        elif data is not None and names_a_path(data):
            prefix, _, path = data.partition(":")
            data = f"{prefix}:{_absolute(path)}"
        if root is not None:
            root = _absolute(root)
        checkpoint = None if self.checkpoint is None else str(Path(self.checkpoint).resolve())
        return ModelIdentity(
            self.model_id, str(self.folder), data, root, split, checkpoint=checkpoint
        )

    def check_identity(self, model_id: str | None, what: str, remedy: str) -> None:
        """Refuse ``what``, made by the model of checksum ``model_id``, when that is not this
        run's model (None: unknown, accepted); the message names the run folder, or the
        checkpoint where the weights are not the run's best."""
        if model_id is not None and self.model_id is not None and model_id != self.model_id:
            weights = self.folder if self.is_best else self.checkpoint  # the run's, or one kept
            raise ValueError(
                f"{what} was made by another model than the one of {weights} (its weights "
                f"changed, or it is another run or checkpoint): {remedy}"
            )

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
        """Whether the model takes ``(C, H, W)`` images of one or three channels."""
        shape = self.input_shape
        return len(shape) == 3 and shape[0] in (1, 3)

    def view_description(self) -> dict[str, Any]:
        """How an item must be prepared for the model, for a deployer (``export``'s JSON): each
        step as :class:`~clusterable.data.ImageFiles` takes it, in PIL and numpy calls; for a
        run on a data set held as arrays (digits, MNIST), how its items were scaled."""
        shape = list(self.input_shape)
        data = None if self.spec is None else self.spec.data
        scaling = None if data is None else dataset_items(data)
        data_items = {"data_items": f"{data}'s, as the run read them: {scaling}"} if scaling else {}
        if not self.is_image_model:
            return {
                "items": f"float32 feature rows of shape {shape}, as the run's data holds them",
                "shape": shape,
                **data_items,
            }
        channels, height, width = self.input_shape
        preprocessing = self.preprocessing
        view: dict[str, Any] = {
            "channels": "grayscale" if channels == 1 else "RGB",
            "size": [height, width],
            "decode": _DECODE[channels],
            "layout": (
                "float32, channels first (C, H, W), pixel values / 255 in [0, 1]: "
                "(np.asarray(image, np.float32) / 255)"
                + ("[None]" if channels == 1 else ".transpose(2, 0, 1)")
                + ", items stacked on a first, batch axis"
            ),
            **data_items,
        }
        if preprocessing is None:
            view["resize"] = (
                f"the whole image resized to {height}x{width}, aspect ratio not kept: "
                f"image.resize(({width}, {height}), Image.Resampling.BILINEAR)"
            )
            view["normalisation"] = "none"
            return view
        view["resize"] = describe_evaluation_view(preprocessing, channels, height, width)
        view["normalisation"] = (
            f"inside the model: (x - mean) / std with mean {list(preprocessing.mean)} and std "
            f"{list(preprocessing.std)}; feed [0, 1] pixels"
        )
        return view

    # ---- the run's data view ---------------------------------------------------------------

    def split(
        self, split: str = "test", data: str | None = None, root: str | None = None
    ) -> LabelledDataset:
        """A split of the run's data, or of ``data``, in the run's view (through
        :meth:`~clusterable.recipe.RunSpec.load`); ``root`` defaults to the run's for its data.
        Image files the run's settings leave at another shape (photos for a run trained on
        arrays, which has no image size or channels) take the run's item view, as
        :meth:`image_files` reads them.

        Raises
        ------
        ValueError
            If the items of ``data`` do not have the shape the run's model embeds, or are images
            and the model takes feature rows.
        """
        if self.spec is None:
            raise ValueError("this model was not loaded from a run: name the items to embed")
        spec = self.spec
        if data is not None or root is not None:
            spec = replace(spec, data=data or spec.data, root=root if data else root or spec.root)
        dataset = self._in_item_shape(spec.load(split, self.preprocessing))
        trained = f"the run {self.folder} was trained on {self.spec.data}"
        if isinstance(dataset.x, ImageFiles) and not self.is_image_model:
            raise ValueError(
                f"{trained}, items of shape {self.input_shape}, not images; {spec.data} holds "
                f"images, which its model cannot embed: give a table or an array of items of "
                f"shape {self.input_shape}, or train a run on {spec.data}"
            )
        if dataset.input_shape != self.input_shape:
            raise ValueError(
                f"{trained}, items of shape {self.input_shape}; {spec.data} has items of shape "
                f"{dataset.input_shape} in the run's view, which its model cannot embed: give "
                f"data of shape {self.input_shape}, or train a run on {spec.data}"
            )
        return dataset

    def trained_unlabelled(self) -> bool:
        """Whether the run trained on unlabelled items (a folder without class folders, a table
        without labels): an unsupervised run whose train split has no labelled item, and so no
        test split, no test table and no classes to score."""
        if self.spec is None or not self.spec.unsupervised:
            return False
        return not labelled_mask(self.split("train").labels).any()

    def validation_split(self) -> LabelledDataset | None:
        """The items the run held out of its training split for validation, as training held them
        out (`clusterable.recipe.split_validation` with the run's ``val_fraction`` and seed), in
        the run's view; None when it kept none: an unsupervised run, ``val_fraction`` 0, or a
        lone checkpoint (no ``run.json``, so no seed to rebuild it with)."""
        from clusterable.recipe import split_validation

        spec = self.spec
        if spec is None or spec.unsupervised or spec.val_fraction <= 0 or "seed" not in self.config:
            return None
        return split_validation(self.split("train"), spec.val_fraction, self.seed)[1]

    def training_items(self) -> LabelledDataset | None:
        """The items the run trained on, in the run's view: the reference set of its test table's
        k-NN accuracy (`clusterable.recipe.training_items`: the train split less the validation
        items held out with the run's seed; the whole train split for an unsupervised run); None
        for a model not loaded from a run, or a lone checkpoint of a run that held validation
        items out (no ``run.json``, so no seed to rebuild them with)."""
        return None if self.spec is None else self._training_items(self.split("train"))

    def _training_items(self, train_split: LabelledDataset) -> LabelledDataset | None:
        """:meth:`training_items` of the run's ``train_split``, read already."""
        from clusterable.recipe import training_items

        spec = self.spec
        if spec is None:
            return None
        if not spec.unsupervised and spec.val_fraction > 0 and "seed" not in self.config:
            return None
        return training_items(spec, train_split, self.seed)

    def knn_reference(
        self,
        items: LabelledDataset,
        data: str | None = None,
        split: str = "test",
        voters: bool = True,
        classifier: bool = False,
    ) -> tuple[KnnReference | None, list[str]]:
        """The reference of k-NN accuracy from training items for the labelled ``items``, a
        ``split`` of ``data`` (None: the run's own data) in the run's view, as the run's test
        table has it: the training items (:meth:`training_items`) embedded, and the k of
        `clusterable.recipe.knn_to_report`; with the notes for under the table (which items
        vote and the tie rule, or why the score is left out). None where it is left out:

        - the run's own train or all split, which holds the training items themselves;
        - a lone checkpoint whose training items cannot be rebuilt;
        - no class of the items is a training class (zero-shot). The classes of another data
          set are the training classes of the same name (``class_names``).

        ``voters`` False leaves the training items unembedded (an empty ``(0, 0)`` array) and asks
        no k, for the trained classifier's accuracy alone: it reads only which items are of the
        training classes, in their codes (``item_labels``), and its one note says how many are
        not, which it counts as errors as k-NN accuracy does. ``classifier``: the trained
        classifier's accuracy is scored beside the k-NN accuracy, and that note names both.
        """
        from clusterable.recipe import KNN_LEFT_OUT, KnnReference, describe_knn, knn_to_report

        spec = self.spec
        if spec is None:
            return None, [f"{KNN_LEFT_OUT}the model was not loaded from a run"]
        own = self.is_own_data(data)
        if own and split != "test":
            return None, [f"{KNN_LEFT_OUT}the {split} split holds the training items themselves"]
        whole = self.split("train")
        training = self._training_items(whole)
        if training is None:
            return None, [
                f"{KNN_LEFT_OUT}{self.folder} has no run.json, whose seed tells which items of the "
                "train split were held out for validation"
            ]
        labels = items.labels[labelled_mask(items.labels)]
        codes = None
        if not own:  # another data set's classes: the training classes of the same name
            known = {name: code for code, name in enumerate(training.class_names)}
            others = len(training.class_names)
            codes = np.array(
                [known.get(items.class_names[c], others + c) for c in labels.tolist()],
                dtype=np.int64,
            )
        ks, note = knn_to_report(training.labels, labels if codes is None else codes)
        if not ks and not own:
            note = (
                f"{KNN_LEFT_OUT}no class of {items.name} is a training class of the run (classes "
                "are matched by name)"
            )
        notes = [] if note is None else [note]
        if not ks:
            return None, notes
        truth = labels if codes is None else codes
        unseen = int((~np.isin(truth, training.labels)).sum())  # never voted or predicted right
        unseen_notes = []
        if unseen:
            scored = ["k-NN accuracy from training items"] if voters else []
            scored += ["the trained classifier's accuracy"] if classifier or not voters else []
            unseen_notes.append(
                f"{' and '.join(scored)} count{'s' if len(scored) == 1 else ''} as errors the "
                f"{unseen} of {len(labels)} items whose class is no training class of the run"
                + ("" if own else " (classes are matched by name)")
            )
        if not voters:  # no one votes: the classifier's note alone
            nobody = np.empty((0, 0), np.float32)
            return KnnReference(nobody, training.labels, (), codes), unseen_notes
        reference = KnnReference(self.embed(training).embeddings, training.labels, ks, codes)
        held_out = len(whole) - len(training)
        return reference, [*notes, *unseen_notes, describe_knn(len(training), held_out)]

    def is_own_data(self, data: str | None) -> bool:
        """Whether ``data`` (None: the run's own) names the data set the run trained on (as the
        run's settings name it: ``folder:photos`` is ``folder:/abs/photos``); False for items no
        data set names (a folder given by its path alone)."""
        spec = self.spec
        if data is None or spec is None:
            return data is None
        try:
            return replace(spec, data=data).data == spec.data
        except ValueError:  # not a data-set name
            return False

    def image_files(self, paths: Sequence[Path]) -> ImageFiles:
        """Image files in the view the run's own images had at evaluation: its channels and
        size; an image backbone's resize and centre crop, else the stretch to the square."""
        if not self.is_image_model:
            raise ValueError(
                f"the run takes {self.expects}, not images; give a table or an array of such items"
            )
        missing = [p for p in paths if not p.is_file()]
        if missing and missing[0].is_dir():  # a folder among several items
            raise ValueError(
                f"{missing[0]} is a folder among {len(paths)} items: give one folder alone (its "
                "images, or one sub-folder of images per class), or image files"
            )
        if missing:
            raise FileNotFoundError(f"image file {missing[0]} does not exist")
        return ImageFiles(paths, **self._image_view())

    def _image_view(self) -> dict[str, Any]:
        """The :class:`~clusterable.data.ImageFiles` settings of an image model's items: its
        height x width, its channels, and its backbone's preprocessing (None: the stretch)."""
        channels, height, width = self.input_shape
        return {"size": (height, width), "channels": channels, "preprocessing": self.preprocessing}

    # ---- embedding -------------------------------------------------------------------------

    def embed(
        self,
        items: Any,
        *,
        split: str | None = None,
        root: str | None = None,
        batch_size: int | None = None,
        workers: int | None = None,
        progress: bool | None = None,
    ) -> EmbeddedItems:
        """Embeddings of ``items`` (see the module docstring for what they may be), in the run's
        view, by :func:`clusterable.train.embed_dataset` on the run's device.

        Parameters
        ----------
        items
            A dataset, a data-set name, a folder or file path (or a list of image paths), or an
            array or tensor ``(n, *input_shape)``.
        split : str, optional
            For a data-set name or a folder read as a data set: which split (None: every item,
            a data set's ``all`` split or every image of a folder).
        root : str, optional
            For a data-set name: where its files are.
        batch_size : int, optional
            Items per forward pass (None: `clusterable.train.embed_dataset`'s, as the run's test
            table embedded its items).
        workers : int, optional
            Processes decoding image files (None: the training default).
        progress : bool, optional
            Show a progress bar; by default when standard error is a terminal.

        Raises
        ------
        ValueError
            If ``batch_size`` is not a whole number of 1 or more, or ``workers`` of 0 or more
            (before any item is read); if the items do not have the run's item shape (the
            message says what it expects), are not numbers, a split is asked of items that have
            none, or a file cannot be read.
        TypeError
            If ``items`` is none of the kinds above.
        FileNotFoundError
            If a path does not exist.
        """
        from clusterable.train import embed_dataset

        check_bounds(
            {"batch_size": batch_size, "workers": workers}, EMBED_BOUNDS, "TrainedRun.embed"
        )
        dataset, ids, source = self._as_dataset(items, split, root)
        if len(dataset) == 0:
            raise ValueError(f"{source} holds no items to embed")
        show = sys.stderr.isatty() if progress is None else progress
        batches = {} if batch_size is None else {"batch_size": batch_size}
        embeddings, _ = embed_dataset(
            self.model,
            dataset,
            device=self.device,
            workers=workers,
            progress=f"embedding {source}" if show else None,
            **batches,
        )
        return EmbeddedItems(embeddings, ids, _named_labels(dataset), source, dataset)

    def _as_dataset(
        self, items: Any, split: str | None, root: str | None
    ) -> tuple[LabelledDataset, np.ndarray, str]:
        """``(dataset in the run's view, ids, description)`` of anything :meth:`embed` takes."""
        if isinstance(items, LabelledDataset):
            return self._checked_dataset(items), _ids(items), items.name
        if isinstance(items, (np.ndarray, torch.Tensor)):
            array = to_numpy(items, "items")  # a tensor on any device, with grad, in bfloat16
            if array.dtype.kind not in "biuf":
                raise ValueError(f"the array must hold numbers, got dtype {array.dtype}")
            array = self._checked_array(array.astype(np.float32, copy=False), "the array")
            return _unlabelled(array, "array"), np.arange(len(array)), f"{len(array)} items"
        if isinstance(items, (list, tuple)):
            not_paths = [p for p in items if not isinstance(p, (str, os.PathLike))]
            if not_paths:
                raise TypeError(
                    f"a list given to embed holds image paths, got a {type(not_paths[0]).__name__}"
                    "; pass items themselves as an array or tensor (np.asarray(items))"
                )
            paths = [Path(p) for p in items]
            files = _unlabelled(self.image_files(paths), "files")
            return files, _ids(files), f"{len(paths)} image files"
        if not isinstance(items, (str, os.PathLike)):
            raise TypeError(
                f"cannot embed {items!r} ({type(items).__name__}): give a dataset, a data-set "
                "name, a folder or file path, a list of image paths, or an array or tensor of items"
            )
        text = os.fspath(items)
        if names_a_path(text):  # folder:PATH, table:PATH: the data set, in the run's view
            dataset = self.split(split or "all", data=text, root=root)
            return dataset, _ids(dataset), dataset.name
        path = Path(text).expanduser()
        if path.is_dir():
            return self._from_folder(path, split)
        suffix = path.suffix.lower()
        if suffix in IMAGE_EXTENSIONS:
            self._no_split(split, path, "an image file")
            files = _unlabelled(self.image_files([path]), str(path))
            return files, _ids(files), str(path)
        if suffix in TABLE_SUFFIXES:
            self._no_split(split, path, "a table file")
            return self._from_table(path)
        bare_name = ":" not in text and not path.suffix and not path.exists()
        if bare_name and text.strip().lower() not in available_datasets():
            raise FileNotFoundError(  # a folder's name mistyped, not a data set's
                f"no folder or file {text!r} exists, and no data set has that name (those are "
                f"{', '.join(available_datasets())}); give image files, a folder of images or "
                "a table file"
            )
        if ":" in text or not path.suffix:
            dataset = self.split(split or "all", data=text, root=root)
            return dataset, _ids(dataset), dataset.name
        raise ValueError(
            f"cannot embed {text!r}: give a folder of images, image files "
            f"({', '.join(sorted(IMAGE_EXTENSIONS))}), a table (.csv, .npz, .npy) or a data-set "
            "name"
        )

    def _from_folder(
        self, folder: Path, split: str | None
    ) -> tuple[LabelledDataset, np.ndarray, str]:
        """Every image in ``folder``: directly in it (no label) and in its sub-folders (labelled
        by the sub-folder of ``folder`` they lie in, however deep, as the data set labels them);
        with a ``split``, the folder read as the data set ``folder:PATH``."""
        if split is not None:
            dataset = self.split(split, data=f"folder:{folder}")
            return dataset, _ids(dataset), dataset.name
        paths = images_in(folder)  # as a folder data set lists them
        names = [p.relative_to(folder).parts[0] if p.parent != folder else "" for p in paths]
        if not paths:
            raise ValueError(
                f"folder {folder} holds no image files ({', '.join(sorted(IMAGE_EXTENSIONS))}); "
                "give a folder of images, or a table file"
            )
        files = self.image_files(paths)
        if all(names):
            classes, codes = np.unique(np.array(names), return_inverse=True)
            dataset = LabelledDataset(str(folder), files, codes, class_names=classes.tolist())
        else:
            dataset = _unlabelled(files, str(folder))
        return dataset, _ids(dataset), str(folder)

    def _from_table(self, path: Path) -> tuple[LabelledDataset, np.ndarray, str]:
        if path.suffix.lower() == ".npy" and not path.with_name(f"{path.stem}_labels.npy").exists():
            if not path.is_file():
                raise FileNotFoundError(f"array file {path} does not exist")
            array = np.load(path, allow_pickle=False).astype(np.float32)
            array = self._checked_array(array, str(path))
            return _unlabelled(array, str(path)), np.arange(len(array)), str(path)
        table = load_table(path, split="all")
        width = int(np.prod(self.input_shape))
        if table.input_shape[0] != width:
            raise ValueError(
                f"table {path} has {table.input_shape[0]} feature columns but the run expects "
                f"{self.expects}: give {width} feature columns per row"
            )
        assert isinstance(table.x, np.ndarray)  # a table holds features, never image files
        table = table.replace(x=table.x.reshape(len(table), *self.input_shape))
        return table, np.arange(len(table)), str(path)

    @staticmethod
    def _no_split(split: str | None, path: Path, what: str) -> None:
        if split is not None:
            raise ValueError(
                f"--split {split}: {path} is {what}, which has no splits; leave --split out, or "
                "give a data set (folder:PATH with train/ and test/ sub-folders, table:PATH)"
            )

    def _in_item_shape(self, dataset: LabelledDataset) -> LabelledDataset:
        """A table's rows of as many values as the run's items, as items of their shape (a table
        file given to :meth:`embed` is read so); an image model's image files of another shape,
        in its item view (as :meth:`image_files` reads a bare folder: the size and channels the
        run's settings left unset, for a run trained on arrays, filled in); any other data set
        as it is."""
        x = dataset.x
        flat = (math.prod(self.input_shape),)
        if isinstance(x, np.ndarray) and dataset.input_shape == flat != self.input_shape:
            return dataset.replace(x=x.reshape(len(dataset), *self.input_shape))
        if isinstance(x, ImageFiles) and self.is_image_model and x.shape[1:] != self.input_shape:
            return dataset.replace(x=x.replace(**self._image_view()))
        return dataset

    def _checked_dataset(self, dataset: LabelledDataset) -> LabelledDataset:
        if dataset.input_shape != self.input_shape:
            raise ValueError(
                f"{dataset.name} has items of shape {dataset.input_shape} but the run expects "
                f"{self.expects}: read it with the run's view (TrainedRun.split), or train a run "
                "on it"
            )
        return dataset

    def _checked_array(self, array: np.ndarray, what: str) -> np.ndarray:
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


def _absolute(path: str) -> str:
    """``path`` as an absolute path (``~`` expanded), as a run's identity records it."""
    return os.path.abspath(os.path.expanduser(path))


def _unlabelled(x: np.ndarray | ImageFiles, name: str) -> LabelledDataset:
    """Items without labels (each -1) as a dataset, for the embedding loop."""
    return LabelledDataset(name, x, np.full(len(x), -1, dtype=np.int64), class_names=[])


def _ids(dataset: LabelledDataset) -> np.ndarray:
    """Item ids: the absolute file paths of image files (one file, one id, however it was
    named: ``photos/a.jpg`` added to an index of ``folder:photos`` is the item already there),
    row numbers otherwise."""
    if isinstance(dataset.x, ImageFiles):
        return np.array([os.path.abspath(p) for p in dataset.x.paths])
    return np.arange(len(dataset))


def _named_labels(dataset: LabelledDataset) -> np.ndarray | None:
    """``(n,)`` class names of the items (``"-1"``: a distractor); None when none has a label."""
    if (dataset.labels < 0).all():
        return None
    names = np.array(dataset.class_names + ["-1"], dtype=object)  # -1: a distractor
    return names[dataset.labels].astype(str)
