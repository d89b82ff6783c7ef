"""What the verbs read and write: ``.npy`` arrays and labels, JSON files, and the embeddings of a
``source`` (saved arrays, or a dataset split under a trained run)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from clusterable.data import LabelledDataset
    from clusterable.trained_run import TrainedRun


def load_array(path: str | Path, what: str) -> np.ndarray:
    """The one array of the ``.npy`` file ``path``; errors name ``what`` it should hold."""
    import numpy as np

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


def load_embeddings(path: str | Path) -> np.ndarray:
    """The ``(n, d)`` embeddings in ``path`` by the package's one rule
    (`clusterable._arrays.as_embeddings`), its errors naming the file."""
    from clusterable._arrays import as_embeddings

    return as_embeddings(load_array(path, "embeddings"), f"embeddings file {path}")


def load_labels(path: str | Path, rows: int, what: str = "labels") -> np.ndarray:
    """``(rows,)`` int64 class codes of the labels in ``path``, read by the package's one label
    rule (`clusterable._arrays.label_values`): integers (and whole floats) as they are, text
    numbered in sorted order; its errors name the file."""
    from clusterable._arrays import as_labels

    codes, classes = as_labels(load_array(path, what), rows, f"{what} file {path}")
    return classes[codes] if classes.dtype.kind == "i" else codes


def saved_embeddings(path: Path, dim: int) -> np.ndarray | None:
    """The ``(m, dim)`` embeddings in ``path`` when it is a ``.npy`` of them, else None."""
    if path.suffix != ".npy" or not path.is_file():
        return None
    array = load_array(path, "embeddings")
    if array.ndim == 1:
        array = array[None]
    if array.ndim != 2 or array.shape[1] != dim:
        return None
    from clusterable._arrays import as_embeddings

    return as_embeddings(array, f"embeddings file {path}")


def partition_embeddings(path: Path, partition: Any, what: str, remedy: str) -> np.ndarray:
    """The saved embeddings in ``path`` that ``partition`` (a `clusterable.cluster.Partition`)
    takes: a ``.npy`` of ``partition.n_features``-dimensional rows, refused when not one, or when
    the ``model.json`` beside it names another model than the partition's. ``what`` names the
    file in the errors (the argument or flag), ``remedy`` says what to do instead."""
    from clusterable.trained_run import MODEL_IDENTITY, ModelIdentity

    points = saved_embeddings(path, partition.n_features)
    if points is None:
        raise ValueError(
            f"{what} is not a .npy of {partition.n_features}-dimensional embeddings: {remedy}"
        )
    identity = ModelIdentity.beside(path)
    if partition.model and identity is not None and identity.model != partition.model:
        raise ValueError(
            f"{what} was embedded by another model ({path.with_name(MODEL_IDENTITY)} names it) "
            f"than the one whose embeddings the partition clustered: {remedy}"
        )
    return points


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value JSON and printing want."""
    import numpy as np

    return value.item() if isinstance(value, np.generic) else value


def cluster_ids_file(path: str | None, flag: str) -> Path | None:
    """``flag``'s ``.npy`` file of cluster ids, checked before any work (numpy adds ``.npy`` to
    any other name, so the file would not be the one named)."""
    if path is None:
        return None
    from clusterable.train.run_folder import check_parent_writable

    if Path(path).suffix.lower() != ".npy":
        raise ValueError(f"{flag} {path}: cluster ids are written as a .npy file; name one")
    return check_parent_writable(path, flag)


def write_json(payload: dict[str, Any], path: str | None) -> None:
    """Write ``payload`` to ``path`` (when given) and say so."""
    if path:
        from clusterable._atomic import atomic_write_text

        atomic_write_text(path, json.dumps(payload, indent=2) + "\n")
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

    ``dataset`` and ``run`` are None for saved arrays (``fine_labels`` are then the labels).
    ``is_query``: the split's query and gallery roles (None: leave-one-out, or saved arrays,
    whose roles `roles_beside` reads).
    """

    embeddings: np.ndarray
    labels: np.ndarray
    fine_labels: np.ndarray
    dataset: LabelledDataset | None = None
    run: TrainedRun | None = None
    is_query: np.ndarray | None = None


def load_run(source: str | Path, args: argparse.Namespace) -> TrainedRun:
    """The trained run in ``source`` (a run or checkpoint folder), on the verb's ``--device``."""
    from clusterable.trained_run import TrainedRun

    return TrainedRun.load(source, device=getattr(args, "device", None) or "auto")


def seed_of(args: argparse.Namespace, source: Embedded) -> int:
    """``--seed``, else the run's own seed (its test table's), else 0 for saved arrays."""
    if args.seed is not None:
        return int(args.seed)
    return 0 if source.run is None else source.run.seed


def embeddings_of(
    args: argparse.Namespace,
    before_embedding: Callable[[TrainedRun, LabelledDataset], None] | None = None,
) -> Embedded:
    """Embeddings and labels from ``EMB.npy LABELS.npy``, or a split embedded by a trained run in
    its own view (:meth:`clusterable.trained_run.TrainedRun.split`, its model loaded once).

    ``before_embedding(run, split)``: what the verb does before a run embeds the split (minutes
    with an image backbone): its checks of its flags against the split (its labels, its query
    roles), and what else it needs of the run, refused now rather than after the embedding."""
    source = Path(args.source)
    if source.suffix == ".npy":
        if args.labels is None:
            raise ValueError(
                f"{source} is an array: give its labels too (clusterable VERB EMB LAB)"
            )
        embeddings = load_embeddings(source)
        labels = load_labels(args.labels, len(embeddings))
        return Embedded(embeddings, labels, fine_labels_beside(source, labels))
    run = load_run(source, args)
    dataset = run.split(args.split, args.data, args.root)
    if before_embedding is not None:
        before_embedding(run, dataset)
    print(
        f"embedding {dataset.name} ({len(dataset)} items, {dataset.source}) with {run.checkpoint}"
    )
    items = run.embed(dataset)
    return Embedded(
        items.embeddings, dataset.labels, dataset.fine_labels, dataset, run, dataset.is_query
    )


#: The query and gallery roles ``clusterable embed`` writes beside a split's embeddings.
ROLES_FILE = "is_query.npy"
#: The fine classes ``clusterable embed`` writes beside a split's embeddings (a coarse run's
#: original classes; its labels again otherwise).
FINE_LABELS_FILE = "fine_labels.npy"


def fine_labels_beside(embeddings: Path, labels: np.ndarray) -> np.ndarray:
    """The ``(rows,)`` fine classes saved beside ``embeddings`` (`FINE_LABELS_FILE`) where they
    split ``labels`` into more classes, each within one class of ``labels`` (a coarse run's
    sub-classes, which ``evaluate`` scores as ``subclass_*``); else ``labels``, with a note where
    the file holds classes that cross them (labels of another view than the file's)."""
    import numpy as np

    path = embeddings.with_name(FINE_LABELS_FILE)
    if not path.is_file():
        return labels
    fine = load_labels(path, len(labels), "fine labels")
    pairs = np.unique(np.stack([fine, labels]), axis=1)  # (2, fine classes when they refine)
    fine_classes = len(np.unique(fine))
    if pairs.shape[1] != fine_classes:
        print(
            f"note: {path} is left out: its classes are not sub-classes of the labels given "
            "(one of them holds items of two labels), so no sub-class scores"
        )
        return labels
    if fine_classes == len(np.unique(labels)):  # the labels themselves: not a coarse view
        return labels
    print(f"sub-classes from {path}: {fine_classes} fine classes")
    return fine


def roles_beside(embeddings: Path, rows: int) -> np.ndarray | None:
    """The ``(rows,)`` query flags saved beside ``embeddings`` (`ROLES_FILE`), or None."""
    path = embeddings.with_name(ROLES_FILE)
    if not path.is_file():
        return None
    flags = load_array(path, "query roles")
    if flags.dtype != bool or flags.shape != (rows,):
        raise ValueError(
            f"{path} holds {flags.dtype} of shape {flags.shape}, not one boolean per embedding "
            f"row ({rows}); delete it, or write the embeddings again with `clusterable embed`"
        )
    print(f"query and gallery roles from {path}")
    return flags
