"""What the verbs read and write: ``.npy`` arrays and labels, JSON files, and the embeddings of a
``source`` (saved arrays, or a dataset split under a trained run)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterable.data import LabelledDataset

if TYPE_CHECKING:
    from clusterable.embedder import Embedder


def load_array(path: str | Path, what: str) -> np.ndarray:
    """The one array of the ``.npy`` file ``path``; errors name ``what`` it should hold."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} file {path} does not exist; give the path of a .npy file")
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise ValueError(
            f"{what} file {path} is not a NumPy array ({error}); save it with numpy.save"
        ) from None
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{what} file {path} holds several arrays; save one array with numpy.save")
    return array


def load_labels(path: str | Path, rows: int, what: str = "labels") -> np.ndarray:
    """``(rows,)`` int64 class codes of the labels in ``path``: integers as they are, any other
    labels (text) numbered in sorted order."""
    labels = load_array(path, what)
    if labels.ndim != 1 or len(labels) != rows:
        raise ValueError(
            f"{what} has shape {labels.shape} but the embeddings have {rows} rows; give one label "
            "per embedding row"
        )
    if labels.dtype.kind in "iu":
        return labels.astype(np.int64)
    if labels.dtype.kind == "f" and np.all(np.isfinite(labels)) and np.all(labels == labels // 1):
        return labels.astype(np.int64)
    if labels.dtype.kind == "O" and any(value is None for value in labels):
        raise ValueError(f"{what} hold None; give every item a label")
    _, codes = np.unique(labels.astype(str), return_inverse=True)
    return codes.astype(np.int64)


def saved_embeddings(path: Path, dim: int) -> np.ndarray | None:
    """The ``(m, dim)`` embeddings in ``path`` when it is a ``.npy`` of them, else None."""
    if path.suffix != ".npy" or not path.is_file():
        return None
    array = load_array(path, "embeddings")
    if array.ndim == 1:
        array = array[None]
    return array if array.ndim == 2 and array.shape[1] == dim else None


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value JSON and printing want."""
    return value.item() if isinstance(value, np.generic) else value


def write_json(payload: dict[str, Any], path: str | None) -> None:
    """Write ``payload`` to ``path`` (when given) and say so."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(payload, indent=2) + "\n")
        print(f"wrote {path}")


def add_source(parser: argparse.ArgumentParser) -> None:
    """``SOURCE [LABELS] [--data] [--root] [--split]``: what :func:`embeddings_of` reads."""
    parser.add_argument("source", help="a run folder or checkpoint, or an embeddings .npy file")
    parser.add_argument(
        "labels", nargs="?", help="labels .npy, integers or text (when source is an .npy file)"
    )
    parser.add_argument("--data", help="dataset to embed (default: the one the run trained on)")
    parser.add_argument(
        "--root", help="folder of the dataset's files (default: the run's, for the run's data)"
    )
    parser.add_argument("--split", default="test", help="dataset split (default: %(default)s)")


@dataclass
class Embedded:
    """The embeddings of a verb's source, with their labels.

    ``dataset`` and ``embedder`` are None for saved arrays (``fine_labels`` are then the labels).
    """

    embeddings: np.ndarray
    labels: np.ndarray
    fine_labels: np.ndarray
    dataset: LabelledDataset | None = None
    embedder: Embedder | None = None


def embeddings_of(args: argparse.Namespace) -> Embedded:
    """Embeddings and labels from ``EMB.npy LABELS.npy``, or a split embedded by a trained run
    (its model loaded once)."""
    source = Path(args.source)
    if source.suffix == ".npy":
        if args.labels is None:
            raise ValueError(
                f"{source} is an array: give its labels too (clusterable VERB EMB LAB)"
            )
        embeddings = load_array(source, "embeddings")
        labels = load_labels(args.labels, len(embeddings))
        return Embedded(embeddings, labels, labels)
    from clusterable.embedder import Embedder
    from clusterable.train import embed_dataset

    embedder = Embedder.from_run(source)
    dataset = embedder.load_split(args.data, args.root, args.split)
    print(
        f"embedding {dataset.name} ({len(dataset)} items, {dataset.source}) with "
        f"{embedder.checkpoint}"
    )
    embeddings, labels = embed_dataset(embedder.model, dataset)
    return Embedded(embeddings, labels, dataset.fine_labels, dataset, embedder)
