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


#: The first bytes of every ``.npy`` file (`numpy.lib.format.MAGIC_PREFIX`).
NPY_MAGIC = b"\x93NUMPY"


def load_array(path: str | Path, what: str) -> np.ndarray:
    """The one array of the ``.npy`` file ``path``; errors name ``what`` it should hold."""
    import numpy as np

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} file {path} does not exist; give the path of a .npy file")
    with path.open("rb") as stream:
        start = stream.read(len(NPY_MAGIC))
    if start.startswith(b"PK"):  # a zip: numpy.savez's archive of several arrays
        raise ValueError(f"{what} file {path} holds several arrays; save one array with numpy.save")
    if start != NPY_MAGIC:  # numpy would call it "pickled data" and ask for allow_pickle
        raise ValueError(
            f"{what} file {path} is not a NumPy array file (.npy): save the array with numpy.save"
        )
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise ValueError(
            f"{what} file {path} is not a NumPy array ({error}); save it with numpy.save"
        ) from None
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{what} file {path} holds several arrays; save one array with numpy.save")
    return array


def check_classes(labels: np.ndarray, what: str) -> None:
    """Scores compare classes: refuse ``labels`` (``(n,)`` class codes, unlabelled items
    negative) of fewer than two classes, before any work; ``what`` names where they came from
    (``"labels file L.npy"``, ``"--labels L.npy"``)."""
    from clusterable.data import labelled_classes

    found = len(labelled_classes(labels))
    if found < 2:
        raise ValueError(
            f"{what} holds {found} class{'' if found == 1 else 'es'} among its labelled items; "
            "the scores compare classes: give labels of at least 2 classes"
        )


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


#: The suffixes of each kind of file the output flags write.
JSON, NPY, NPZ, HTML = (".json",), (".npy",), (".npz",), (".html", ".htm")

#: The files ``clusterable embed`` writes into its folder; the verbs read them back beside the
#: embeddings (labels, roles, sub-classes, the model), so no output flag may name one there.
EMBEDDINGS_FILE, LABELS_FILE = "embeddings.npy", "labels.npy"
#: `clusterable.trained_run.MODEL_IDENTITY`, named here without importing torch.
IDENTITY_FILE = "model.json"


#: Each row's id ``clusterable embed`` writes beside the embeddings: the item's file path
#: (images) or row number (`clusterable.trained_run.EmbeddedItems.ids`).
IDS_FILE = "ids.npy"


#: The name of each class code in ``labels.npy`` (``class_names[c]`` names label ``c``), which
#: ``clusterable embed`` writes beside a data set's embeddings.
CLASS_NAMES_FILE = "class_names.npy"


def embed_files() -> tuple[str, ...]:
    """Every file ``clusterable embed`` may write into its ``--out`` folder."""
    return (
        EMBEDDINGS_FILE,
        LABELS_FILE,
        FINE_LABELS_FILE,
        ROLES_FILE,
        IDENTITY_FILE,
        IDS_FILE,
        CLASS_NAMES_FILE,
    )


@dataclass(frozen=True)
class Output:
    """A file a verb writes: the ``dest`` of its flag in the parsed arguments, the flag as the
    user types it, the suffixes it takes (none: any) and what it writes, for the messages.

    ``files``: the flag names a folder, and these are the files the verb writes in it
    (``embed``, ``plot``). ``beside``: the files the verb writes beside the one the flag names,
    each as a suffix added to its name (``export``'s ``.json``: ``fm.onnx.json``). ``instead``:
    what the user may do with an existing file rather than replace it, ``{path}`` standing for
    the file (``index``'s ``--add``), said in the refusal."""

    dest: str
    flag: str
    suffixes: tuple[str, ...] = ()
    kind: str = ""
    files: tuple[str, ...] = ()
    beside: tuple[str, ...] = ()
    instead: str = ""


#: The flag that lets an output replace an existing file (`check_outputs`).
OVERWRITE_FLAG = "--overwrite"


def add_overwrite(
    parser: argparse.ArgumentParser, help: str = "replace the files the output flags name"
) -> None:
    """``--overwrite`` on a verb that writes files: without it, `check_outputs` refuses an output
    that exists already; ``help`` says what it replaces."""
    parser.add_argument(
        OVERWRITE_FLAG,
        action="store_true",
        help=f"{help} where they exist (without it an existing file is refused, before any work)",
    )


def _argument_names(command: str | None) -> dict[str, str]:
    """``dest -> how the user names it`` for the verb ``command``'s arguments: ``--json``, or a
    positional's name in capitals (``LABELS``)."""
    if command is None:
        return {}
    from clusterable.cli import build_parser

    for action in build_parser()._actions:
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and command in choices:
            names = {}
            for argument in choices[command]._actions:
                shown = argument.option_strings[-1] if argument.option_strings else None
                names[argument.dest] = shown or (argument.metavar or argument.dest).upper()
            return names
    return {}


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once resolved, or (both existing)
    the same file on disk (a hard link)."""
    import os

    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except (OSError, ValueError, RuntimeError):
        return False


def check_each_once(paths: list[str], flag: str) -> None:
    """Refuse a file or folder that ``paths`` name twice, however each is named (``./a.png``
    and ``a.png``, a link and its file: one path once resolved), before any work: its items
    would be embedded twice under one id, which an index refuses."""
    first: dict[Path, str] = {}
    for text in paths:
        path = Path(text).expanduser().resolve()
        if path in first:
            named = text if first[path] == text else f"as {first[path]} and {text}"
            raise ValueError(f"{flag} names {path} twice ({named}): give each file once")
        first[path] = text


def _exists(text: str) -> bool:
    """Whether ``text`` names an existing file or folder (False for text no path can be)."""
    try:
        return Path(text).exists()
    except (OSError, ValueError):
        return False


def _paths_given(args: argparse.Namespace, outputs: set[str]) -> list[tuple[str, Path]]:
    """``(dest, path)`` of every text the command line holds (a flag's or a positional's, one of
    a list's) that names an existing file or folder, or is one of the ``outputs``' paths: what
    the command reads, and what else it writes."""
    given = []
    for dest, value in vars(args).items():
        if dest == "command":  # the verb's name, not a path
            continue
        values = value if isinstance(value, list | tuple) else [value]
        for text in values:
            if isinstance(text, str) and text and (dest in outputs or _exists(text)):
                given.append((dest, Path(text)))
    return given


def embed_folder_owner(path: Path) -> str | None:
    """What ``path`` is to the folder ``clusterable embed`` wrote it in, when it is one of that
    folder's files (`embed_files`) and the folder holds embeddings; else None."""
    if path.name in embed_files() and (path.parent / EMBEDDINGS_FILE).is_file():
        return (
            f"the {path.name} of the embeddings in {path.parent}, read back beside them "
            "by the verbs"
        )
    return None


def check_outputs(args: argparse.Namespace, *outputs: Output) -> dict[str, Path | None]:
    """Check the files ``outputs`` name before any work, so that no output replaces what the
    user keeps; ``dest -> path`` (None where the flag is not given).

    Each output path must not be (a) any other path of the command, an input or another output
    (``search IDX.npz Q.npy --json IDX.npz``), (b) one of the files a run folder or an embed
    folder owns (`clusterable.train.run_folder.run_owner`, `embed_folder_owner`), nor (c) end in
    another suffix than the kind the flag writes (``--json`` a ``.json``); its folder must be
    writable. (d) A file that exists already (the one the flag names, one the verb writes beside
    it, or in the folder it names) is replaced only with ``--overwrite`` (`add_overwrite`), which
    the verb then takes: the one rule of every output flag, a flag's default
    (``cluster``'s ``clusters.npy``) included. What (a) to (c) refuse is refused with
    ``--overwrite`` too.

    Raises
    ------
    ValueError
        The first output that breaks a rule, named with its flag, and what to do.
    """
    from clusterable.train.run_folder import check_output_file

    dests = {output.dest for output in outputs}
    checked: dict[str, Path | None] = {}
    for output in outputs:
        value = getattr(args, output.dest, None)
        if value is None:
            checked[output.dest] = None
            continue
        path = Path(value)
        if output.files:  # a folder: none of the files written in it another path of the command
            for name in output.files:
                check_not_given(args, output.flag, path / name, output.dest, dests)
            checked[output.dest] = path
        else:
            check_not_given(args, output.flag, path, output.dest, dests)
            owner = embed_folder_owner(path)
            if owner is not None:
                raise ValueError(f"{output.flag} {value} is {owner}: write {output.flag} elsewhere")
            checked[output.dest] = check_output_file(
                path, output.flag, output.suffixes, output.kind
            )
        check_not_replaced(args, output, path)
    return checked


def check_not_replaced(args: argparse.Namespace, output: Output, path: Path) -> None:
    """Refuse to write ``output`` at ``path`` where a file it writes exists already, unless the
    command has ``--overwrite``.

    Raises
    ------
    ValueError
        One line naming the flag, the existing file and what to do.
    """
    if args.overwrite:
        return
    if output.files:
        written = [path / name for name in output.files]
    else:
        written = [path, *(path.with_name(path.name + suffix) for suffix in output.beside)]
    existing = [file for file in written if file.exists()]
    if not existing:
        return
    flag = output.flag
    if output.files:
        more = len(existing) - 1
        found = f"{flag} {path} already holds {existing[0].name}" + (
            f" and {more} more of the files it writes" if more else ""
        )
    elif existing[0] == path:
        found = f"{flag} {path} already exists"
    else:
        found = f"{flag} {path} would replace {existing[0]}, written beside it"
    them = "it" if len(existing) == 1 else "them"
    instead = f", or {output.instead.format(path=path)}" if output.instead else ""
    raise ValueError(
        f"{found}; add {OVERWRITE_FLAG} to replace {them}, or choose another {flag}{instead}"
    )


def check_not_given(
    args: argparse.Namespace,
    flag: str,
    path: Path,
    dest: str | None = None,
    outputs: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Refuse to write ``path`` (``flag``'s, given as ``dest``) where it is another path of the
    command ``args``: an existing file it names, or the path of another of its ``outputs``.

    Raises
    ------
    ValueError
        ``path`` is another argument's file; the message names that argument.
    """
    for other_dest, other in _paths_given(args, set(outputs)):
        if (other_dest, other) == (dest, path) or not _same_file(path, other):
            continue
        shown = _argument_names(getattr(args, "command", None)).get(other_dest, other_dest)
        replaced = "that output" if other_dest in outputs else "what the command reads"
        raise ValueError(
            f"{flag} {path} is also {shown} of this command, so writing it would replace "
            f"{replaced}: write {flag} to another file"
        )


def items_in_clusters(ids: np.ndarray, clusters: np.ndarray) -> list[dict[str, Any]]:
    """``[{"id": ..., "cluster": ...}]`` of each item, the JSON ``cluster`` and ``assign`` write
    (-1: noise, or none of the clusters)."""
    return [
        {"id": plain(item), "cluster": int(cluster)}
        for item, cluster in zip(ids, clusters, strict=True)
    ]


def write_json(payload: dict[str, Any], path: str | None) -> None:
    """Write ``payload`` to ``path`` (when given) and say so."""
    if path:
        from clusterable._atomic import atomic_write_text

        atomic_write_text(path, json.dumps(payload, indent=2) + "\n")
        print(f"wrote {path}")


def add_source(parser: argparse.ArgumentParser, items: bool = False) -> None:
    """``SOURCE [LABELS] [--data] [--root] [--split]``: what :func:`embeddings_of` reads, its
    split resolved there (`split_of_run`); ``items``: the verb also takes ``--items``, which
    ``--split`` leaves whole unless given."""
    parser.add_argument("source", help="a run folder or checkpoint, or an embeddings .npy file")
    parser.add_argument(
        "labels",
        nargs="?",
        help="labels .npy, integers or text, when source is an .npy file (default: the "
        "labels.npy that embed wrote beside it)",
    )
    parser.add_argument("--data", help="dataset to embed (default: the one the run trained on)")
    parser.add_argument(
        "--root", help="folder of the dataset's files (default: the run's, for the run's data)"
    )
    parser.add_argument(
        "--split",
        help="dataset split (default: test; train, every item, for a run on unlabelled items, "
        "which has no test split" + ("; every item of --items" if items else "") + ")",
    )


@dataclass
class Embedded:
    """The embeddings of a verb's source, with their labels.

    ``dataset`` and ``run`` are None for saved arrays (``fine_labels`` are then the labels).
    ``is_query``: the split's query and gallery roles (None: leave-one-out, or saved arrays,
    whose roles `roles_beside` reads). ``ids``: each row's file path or row number where a run
    embedded the items (None for saved arrays).
    """

    embeddings: np.ndarray
    labels: np.ndarray
    fine_labels: np.ndarray
    dataset: LabelledDataset | None = None
    run: TrainedRun | None = None
    is_query: np.ndarray | None = None
    ids: np.ndarray | None = None
    labels_file: Path | None = None  # the file of saved arrays' labels


def labels_beside(embeddings: Path) -> Path:
    """The labels that ``clusterable embed`` saved beside ``embeddings`` (`LABELS_FILE`), for a
    verb given the embeddings alone, said in a note; refused in one line where there are none."""
    beside = embeddings.with_name(LABELS_FILE)
    if not beside.is_file():
        raise ValueError(
            f"{embeddings} is an array and no {LABELS_FILE} lies beside it: give its labels too "
            "(clusterable VERB EMB LAB)"
        )
    print(f"labels: {beside} (beside the embeddings)")
    return beside


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
    scores: bool = False,
) -> Embedded:
    """Embeddings and labels from ``EMB.npy LABELS.npy``, or a split embedded by a trained run in
    its own view (:meth:`clusterable.trained_run.TrainedRun.split`, its model loaded once): the
    split `split_of_run` reads (``scores``: the verb scores the items by their classes).

    ``before_embedding(run, split)``: what the verb does before a run embeds the split (minutes
    with an image backbone): its checks of its flags against the split (its labels, its query
    roles), and what else it needs of the run, refused now rather than after the embedding."""
    source = Path(args.source)
    if source.suffix == ".npy":
        labels_file = Path(args.labels) if args.labels is not None else labels_beside(source)
        embeddings = load_embeddings(source)
        labels = load_labels(labels_file, len(embeddings))
        fine_labels = fine_labels_beside(source, labels)
        return Embedded(embeddings, labels, fine_labels, labels_file=labels_file)
    if args.labels is not None:  # a run embeds a split, which brings its own labels
        raise ValueError(
            f"LABELS {args.labels} goes with an embeddings .npy, and {source} is a run: drop it "
            f"(to embed files or a folder of images: --items {args.labels})"
        )
    run = load_run(source, args)
    args.split = split_of_run(run, args, scores=scores)  # what the verb reports it read
    dataset = run.split(args.split, args.data, args.root)
    if before_embedding is not None:
        before_embedding(run, dataset)
    print(
        f"embedding {dataset.name} ({len(dataset)} items, {dataset.source}) with {run.checkpoint}"
    )
    items = run.embed(dataset)
    return Embedded(
        items.embeddings,
        dataset.labels,
        dataset.fine_labels,
        dataset,
        run,
        dataset.is_query,
        ids=items.ids,
    )


def split_of_run(
    run: TrainedRun, args: argparse.Namespace, default: str = "test", scores: bool = False
) -> str:
    """The split of ``--data`` (the run's own by default) a verb of the run reads: ``--split``,
    else ``default``. A run trained on unlabelled items
    (`clusterable.trained_run.TrainedRun.trained_unlabelled`) has no test split of them: its
    train split, every item, is read instead, as ``train`` prints for it; ``--split test`` of
    them is refused, and so is any split for a verb that ``scores`` the items by their classes.

    Raises
    ------
    ValueError
        One line naming the run and ``--split``, or what to score instead.
    """
    split = args.split or default
    if split != "test" and not scores:  # only a test split can be lacking: nothing to check
        return split
    if not run.is_own_data(args.data) or not run.trained_unlabelled():
        return split
    assert run.spec is not None  # a run that trained on unlabelled items has its settings
    items = f"the run {run.folder} trained on unlabelled items ({run.spec.data})"
    if scores:
        raise ValueError(
            f"{items}, which have no classes, so no test split to score: cluster them unscored "
            f"(clusterable cluster {run.folder}), or score labelled items with --data"
        )
    if args.split == "test":
        raise ValueError(
            f"--split test: {items}, which have no test split; leave --split out, or give "
            "--split train (every item)"
        )
    return "train"


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


def ids_beside(embeddings: Path, rows: int) -> np.ndarray:
    """The ``(rows,)`` item ids saved beside ``embeddings`` (`IDS_FILE`: file paths, or row
    numbers), else the row numbers."""
    import numpy as np

    path = embeddings.with_name(IDS_FILE)
    if not path.is_file():
        return np.arange(rows)
    ids = load_array(path, "item ids")
    if ids.shape != (rows,) or ids.dtype.kind not in "iuU":
        raise ValueError(
            f"{path} holds {ids.dtype} of shape {ids.shape}, not one id per embedding row "
            f"({rows}); delete it, or write the embeddings again with `clusterable embed`"
        )
    return ids


def named_labels_beside(embeddings: Path, labels: np.ndarray) -> np.ndarray:
    """``labels`` (class codes, -1: none) as the class names saved beside ``embeddings``
    (`CLASS_NAMES_FILE`; ``"-1"`` for an item without a class), as a run names them in its
    index; the codes themselves where no names are saved."""
    import numpy as np

    path = embeddings.with_name(CLASS_NAMES_FILE)
    if not path.is_file():
        return labels
    names = load_array(path, "class names")
    if names.ndim != 1 or names.dtype.kind != "U" or labels.max(initial=-1) >= len(names):
        raise ValueError(
            f"{path} does not name every class of the labels beside it ({len(names)} names); "
            "delete it, or write the embeddings again with `clusterable embed`"
        )
    return np.append(names, "-1")[labels]


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
