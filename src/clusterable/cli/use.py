"""The verbs that put a trained model to use: ``index``, ``search``, ``assign``, ``export``.

    clusterable index runs/fm --data fashion-mnist --split train --out fm-index.npz
    clusterable index fm-index.npz --add new-boots/ --label "Ankle boot"
    clusterable search fm-index.npz boot.png shirt.png -k 5 --max-distance 0.5
    clusterable assign fm-clusters.npz runs/fm photos/ --max-distance auto --json assigned.json
    clusterable export runs/fm --format onnx --out fm.onnx

An index remembers the run whose model embedded its gallery and that model's checksum; ``search``
embeds image and table queries with that run and refuses them when the run's weights are no longer
the ones the gallery was embedded with. Embeddings saved by ``clusterable embed`` carry the same
identity in a ``model.json`` beside them (`clusterable.trained_run.ModelIdentity`), which ``search``
checks too.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from clusterable.cli._files import (
    IDENTITY_FILE,
    JSON,
    LABELS_FILE,
    NPY,
    NPZ,
    Output,
    add_overwrite,
    check_each_once,
    check_outputs,
    ids_beside,
    items_in_clusters,
    load_embeddings,
    load_labels,
    load_run,
    named_labels_beside,
    partition_embeddings,
    plain,
    saved_embeddings,
    split_of_run,
    write_json,
)
from clusterable.cli._flag_types import fraction, whole_number
from clusterable.cli._parser import Verbs
from clusterable.cli.decisions import (
    DEFAULT_CRITERION,
    add_items_split,
    add_max_distance,
    criterion_flag,
)

if TYPE_CHECKING:
    import numpy as np

    from clusterable.index import EmbeddingIndex
    from clusterable.trained_run import TrainedRun

#: ``assign`` prints one line per item up to this many items, a summary beyond.
MAX_PRINTED_ITEMS = 50


#: ``index --out``: an existing index is replaced only with ``--overwrite``, as every output.
INDEX_OUT = Output(
    "out",
    "--out",
    NPZ,
    "the index is",
    instead="change it in place, keeping the items added to it with --add: clusterable index "
    "{path} --add ITEMS (or --remove IDS)",
)


def command_index(args: argparse.Namespace) -> int:
    """Build and save an index of a run's gallery (an existing ``--out`` replaced only with
    ``--overwrite``, refused before any work otherwise), or change a saved one (``--add``,
    ``--remove``)."""
    from clusterable.index import EmbeddingIndex

    if args.add or args.remove:
        return _change_index(args)
    saved = Path(args.source).suffix == ".npy"  # embeddings written by `clusterable embed`
    if saved and (args.data or args.split or args.root):
        raise ValueError(
            f"{args.source} holds embeddings already: drop --data, --split and --root (they pick "
            "the items a run embeds), or give a run folder"
        )
    if not args.out:
        raise ValueError(
            "building an index needs --out; to change a saved index give --add or --remove"
        )
    # An existing index may hold --add's items, which nothing rebuilds: it is changed in place.
    out = check_outputs(args, INDEX_OUT)["out"]
    assert out is not None  # refused above when not given
    gallery = _saved_gallery(Path(args.source)) if saved else _embedded_gallery(args)
    index = EmbeddingIndex.build(
        gallery.embeddings,
        ids=gallery.ids,
        labels=gallery.labels,
        distance=args.distance,
        kind=args.kind,
        model=gallery.model,
        run=gallery.run,
        checkpoint=gallery.checkpoint,
        target_recall=args.target_recall,
        seed=args.seed,
    )
    written = index.save(out)
    recall = (
        f", recall@10 against exact search {100 * index.recall_at_10:.2f} % (measured on held-out "
        f"gallery items, search breadth {index.search_breadth})"
        if index.recall_at_10 is not None
        else ""
    )
    shape = f"{len(index)} x {index.dim}"
    print(f"{index.kind} {index.distance} index of {shape}{recall}; wrote {written}")
    return 0


def _change_index(args: argparse.Namespace) -> int:
    """``index FILE --add ITEMS`` or ``--remove IDS``: the saved index changed and written back
    in place, atomically (a failure leaves the old file); its model identity is kept."""
    import numpy as np

    from clusterable.index import EmbeddingIndex

    for flag, value in (("--data", args.data), ("--out", args.out)):
        if value is not None:
            raise ValueError(f"{flag} builds a new index; --add and --remove change {args.source}")
    if args.overwrite:
        raise ValueError(
            f"--overwrite replaces --out when building an index; --add and --remove change "
            f"{args.source} in place"
        )
    path = Path(args.source)
    if path.is_dir():
        raise ValueError(f"{path} is a folder: --add and --remove change a saved index file")
    if args.add:
        check_each_once(args.add, "--add")
    index = EmbeddingIndex.load(path)
    if args.remove:
        ids = _ids_to_remove(index, args.remove)
        index.remove(ids)
        print(f"removed {len(ids)} item{'' if len(ids) == 1 else 's'} from {path}")
    else:
        embeddings, ids = query_embeddings(index, args.add, args, source=str(path))
        new_ids = ids.astype(str) if index.ids.dtype.kind == "U" else None
        if new_ids is not None and ids.dtype.kind != "U":  # row numbers: name them by source
            new_ids = np.array([f"{args.add[0]}:{row}" for row in ids])
        labels = _added_labels(index, args, len(ids))
        index.add(embeddings, ids=new_ids, labels=labels)
        added = index.ids[-len(ids) :]
        named = f"id {added[0]}" if len(ids) == 1 else f"ids {added[0]} .. {added[-1]}"
        print(f"added {len(ids)} item{'' if len(ids) == 1 else 's'} to {path} ({named})")
    index.save(path)
    print(f"{index.kind} {index.distance} index of {len(index)} x {index.dim}; wrote {path}")
    return 0


class _Gallery(NamedTuple):
    """What an index is built of: ``(n, d)`` embeddings, ``(n,)`` ids, ``(n,)`` labels (None:
    unlabelled), and the model that embedded them with its run folder and checkpoint (None:
    unknown)."""

    embeddings: np.ndarray
    ids: np.ndarray
    labels: np.ndarray | None
    model: str | None
    run: str | None
    checkpoint: str | None


def _embedded_gallery(args: argparse.Namespace) -> _Gallery:
    """``--data`` embedded by the run ``args.source``, by default the run's own data set
    (`clusterable.trained_run.TrainedRun.split`, as ``cluster RUN`` and ``evaluate RUN`` read it):
    its ids and class names."""
    run = load_run(args.source, args)
    split = split_of_run(run, args, default="all")  # checked for every --data
    if args.data is None:  # every item, unless --split, as for a data set named
        items = run.embed(run.split(split, root=args.root))
    else:
        items = run.embed(args.data, split=args.split, root=args.root)
    print(f"embedded {len(items.ids)} items of {items.source} with {args.source}")
    identity = run.identity()
    return _Gallery(
        items.embeddings, items.ids, items.labels, identity.model, identity.run, identity.checkpoint
    )


def _saved_gallery(source: Path) -> _Gallery:
    """Embeddings saved by ``clusterable embed``, with what it wrote beside them: the ids
    (``ids.npy``, else row numbers), the labels (``labels.npy`` where any item has one; -1: none)
    and the model (``model.json``), so a gallery embedded once is indexed without embedding it
    again."""
    from clusterable.data import labelled_mask
    from clusterable.trained_run import ModelIdentity

    embeddings = load_embeddings(source)
    labels_file = source.with_name(LABELS_FILE)
    labels = load_labels(labels_file, len(embeddings)) if labels_file.is_file() else None
    if labels is not None:
        labels = named_labels_beside(source, labels) if labelled_mask(labels).any() else None
    identity = ModelIdentity.beside(source)
    if identity is None:
        print(
            f"note: {source} does not say which model embedded it ({IDENTITY_FILE}), so the "
            "index cannot refuse queries of another model"
        )
    ids = ids_beside(source, len(embeddings))
    if identity is None:
        return _Gallery(embeddings, ids, labels, None, None, None)
    return _Gallery(embeddings, ids, labels, identity.model, identity.run, identity.checkpoint)


def _ids_to_remove(index: EmbeddingIndex, given: list[str]) -> np.ndarray:
    """``--remove``'s ids, as numbers for an index of numbered items; each given once. An index
    of image files takes a file as the user names it (``photos/a.jpg``, its id the absolute path,
    as ``--add`` made it) and a folder for every item in it."""
    import numpy as np

    if index.ids.dtype.kind != "U":
        wrong = [text for text in given if not text.lstrip("-").isdigit()]
        if wrong:
            raise ValueError(f"--remove {wrong[0]}: this index's ids are whole numbers")
        ids = np.array(given, dtype=np.int64)
    else:
        ids = np.array([each for text in given for each in _path_ids(index, text)])
    values, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise ValueError(f"--remove names id {values[counts > 1][0]} twice; name each id once")
    return ids


def _path_ids(index: EmbeddingIndex, text: str) -> list[str]:
    """The ids of an index of files that ``text`` names: itself where it is one, the absolute
    path of a file given relatively, every id inside a folder; else itself (refused as unknown
    by `EmbeddingIndex.remove`)."""
    import os

    import numpy as np

    if text in index.ids:
        return [text]
    absolute = os.path.abspath(text)
    if os.path.isdir(absolute):
        inside = index.ids[np.char.startswith(index.ids, absolute + os.sep)].tolist()
        if not inside:
            raise ValueError(f"--remove {text}: no item of this index is in that folder")
        return inside
    return [absolute if absolute in index.ids else text]


def _added_labels(index: EmbeddingIndex, args: argparse.Namespace, n: int) -> Any:
    """Labels of ``--add``'s items, for an index with labels (refused by one without):
    ``--label`` for all of them, else those ``embed`` saved beside added embeddings
    (``labels.npy``, named by ``class_names.npy`` as :func:`_saved_gallery` names a gallery's)."""
    if index.labels is None:
        if args.label is not None:
            raise ValueError(f"--label {args.label}: {args.source} holds no labels")
        return None
    if args.label is None:
        added = Path(args.add[0])
        labels_file = added.with_name(LABELS_FILE)
        if len(args.add) == 1 and added.suffix == ".npy" and labels_file.is_file():
            return named_labels_beside(added, load_labels(labels_file, n))
        raise ValueError(f"{args.source} holds labels: give the new items theirs with --label NAME")
    if index.labels.dtype.kind == "U":
        return [args.label] * n
    if not args.label.lstrip("-").isdigit():
        raise ValueError(f"--label {args.label}: this index's labels are whole numbers")
    return [int(args.label)] * n


def add_index(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``index`` verb's parser: its flags, defaults and help."""
    index = verbs(
        "index",
        "embed a gallery with a trained run, or take embed's saved embeddings, and save a search "
        "index (ids, labels, model checksum)",
        "clusterable index runs/fm --data fashion-mnist --split train --out fm-index.npz",
        command_index,
        runs=("model", "search"),
    )
    index.add_argument(
        "source",
        metavar="RUN|EMB|INDEX",
        help="run folder (or checkpoint) whose model embeds the gallery, or the embeddings.npy "
        "`clusterable embed` wrote (its ids, labels and model read beside it); with --add or "
        "--remove, the saved index to change",
    )
    index.add_argument(
        "--data",
        help="gallery: a dataset name, folder:PATH, table:PATH, a folder of images or a table file "
        "(default: the data set the run trained on)",
    )
    index.add_argument(
        "--split",
        help="split of the gallery data set (or of --add's), or of a folder read as one "
        "(train/ and test/ sub-folders; default: every item)",
    )
    index.add_argument("--root", help="folder of the dataset's files")
    index.add_argument("--out", help="index file to write (.npz), absent unless --overwrite")
    add_overwrite(
        index, "replace the index file --out names (items added to it with --add are lost)"
    )
    change = index.add_mutually_exclusive_group()
    change.add_argument(
        "--add",
        nargs="+",
        metavar="ITEMS",
        help="add these items to the saved index, embedded by its run (or --run): image files, "
        "a folder, a table, a data set (--split), or a .npy of embeddings",
    )
    change.add_argument(
        "--remove", nargs="+", metavar="IDS", help="remove the items of these ids from the index"
    )
    index.add_argument(
        "--label",
        help="with --add: the new items' label (default for embed's embeddings.npy: the "
        "labels.npy beside it)",
    )
    index.add_argument("--run", help="with --add: embed the items with this run")
    index.add_argument(
        "--kind",
        choices=("exact", "ivf", "hnsw"),
        default="exact",
        help="exact search, or faiss's approximate IVF / HNSW (default: %(default)s)",
    )
    index.add_argument(
        "--distance",
        choices=("euclidean", "cosine"),
        default="euclidean",
        help="distance to search by (default: %(default)s)",
    )
    index.add_argument("--metric", action=_RenamedFlag, new="--distance", help=argparse.SUPPRESS)
    index.add_argument(
        "--target-recall",
        type=fraction,
        default=0.95,
        help="approximate kinds: recall@10 to tune the search breadth to (default: %(default)s)",
    )
    return index


class _RenamedFlag(argparse.Action):
    """A flag that was renamed: giving it stops the command with one line naming the new one."""

    def __init__(self, *args: Any, new: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.new = new

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        parser.exit(2, f"{parser.prog}: error: {option} is now {self.new}: {self.new} {values}\n")


def command_search(args: argparse.Namespace) -> int:
    """Run ``clusterable search`` with the parsed ``args``; its exit status."""
    from clusterable.index import EmbeddingIndex

    check_outputs(args, Output("json", "--json", JSON, "the neighbours are"))
    index = EmbeddingIndex.load(args.index)
    queries, query_ids = query_embeddings(index, args.queries, args, source=args.index)
    distances, rows, ids = index.search(queries, args.k, args.max_distance)
    columns = "rank, distance, id" + ("" if index.labels is None else ", label")
    within = "" if args.max_distance is None else f" within {args.max_distance:g}"
    print(
        f"the {args.k} nearest items{within} of {args.index} ({index.distance}) to each query: "
        f"{columns}"
    )
    results = []
    for q, query_id in enumerate(query_ids):
        print(f"query {query_id}")
        if args.max_distance is not None and rows[q, 0] < 0:
            print(f"  no gallery item within {args.max_distance:g}")
        neighbours = []
        for rank in range(args.k):
            if rows[q, rank] < 0:  # beyond --max-distance, or not found by an approximate index
                continue
            label = None if index.labels is None else plain(index.labels[rows[q, rank]])
            neighbours.append(
                {
                    "rank": rank + 1,
                    "distance": float(distances[q, rank]),
                    "id": plain(ids[q, rank]),
                    "label": label,
                }
            )
            tail = "" if label is None else f"  {label}"
            print(f"  {rank + 1:3d}  {distances[q, rank]:.4f}  {ids[q, rank]}{tail}")
        results.append({"query": plain(query_id), "neighbours": neighbours})
    settings = {"index": str(args.index), "k": args.k, "max_distance": args.max_distance}
    write_json({**settings, "distance": index.distance, "queries": results}, args.json)
    return 0


def check_items_model(saved: Path, model: str | None, source: str) -> bool:
    """Refuse the saved embeddings ``saved`` where the ``model.json`` beside them names another
    model than ``model``, the one that embedded the gallery of ``source``; whether that file
    says which model made them."""
    from clusterable.trained_run import MODEL_IDENTITY, ModelIdentity

    identity = ModelIdentity.beside(saved)
    if identity is not None and model is not None and identity.model != model:
        raise ValueError(
            f"{saved} was embedded by another model than the one that built {source} "
            f"({saved.with_name(MODEL_IDENTITY)} names it); embed the items with the "
            "index's run"
        )
    return identity is not None


def query_embeddings(
    index: EmbeddingIndex,
    items: list[str],
    args: argparse.Namespace,
    *,
    source: str,
    run: TrainedRun | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings and ids of ``items`` to look up in ``index``: a saved ``.npy`` of embeddings,
    or items embedded with ``run`` (else ``--run``, else the index's own run); either refused when
    another model than the index's made them.

    Parameters
    ----------
    index : EmbeddingIndex
        The gallery the items are compared with.
    items : list of str
        The verb's items: one ``.npy`` of embeddings, or what `TrainedRun.embed` takes.
    args : argparse.Namespace
        The verb's flags: ``--run``, ``--split`` (where the verb has them) and ``--device``.
    source : str
        The index as the user named it, for messages.
    run : TrainedRun, optional
        A run already loaded to embed the items with.
    """
    from clusterable.trained_run import MODEL_IDENTITY

    first = Path(items[0])
    saved = saved_embeddings(first, index.dim) if len(items) == 1 else None
    if saved is not None:
        _refuse_split_of_saved(args, first)
        if not check_items_model(first, index.model, source):
            print(f"note: {first} does not say which model embedded it ({MODEL_IDENTITY})")
        return saved, ids_beside(first, len(saved))
    if run is None:
        folder = getattr(args, "run", None) or _model_folder(index)
        if folder is None:
            raise ValueError(f"{source} does not name the run that embedded its gallery: add --run")
        run = load_run(folder, args)
    run.check_identity(
        index.model,
        f"the index {source}",
        "rebuild the index with `clusterable index`, or give the run that built it with --run",
    )
    embedded = run.embed(items if len(items) > 1 else items[0], split=getattr(args, "split", None))
    return embedded.embeddings, embedded.ids


def _model_folder(index: EmbeddingIndex) -> str | None:
    """Where the model that embedded ``index``'s gallery is read from: its checkpoint, where
    the index records one that is still there, else its run (the run's best checkpoint)."""
    if index.checkpoint is not None and Path(index.checkpoint).is_dir():
        return index.checkpoint
    return index.run


def _refuse_split_of_saved(args: argparse.Namespace, saved: Path) -> None:
    """Refuse ``--split`` beside saved embeddings: it picks the split of a data set to embed."""
    if getattr(args, "split", None) is not None:
        raise ValueError(
            f"--split {args.split} picks the split of a data set to embed; {saved} holds "
            "embeddings already: drop --split"
        )


def add_search(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``search`` verb's parser: its flags, defaults and help."""
    search = verbs(
        "search",
        "print the gallery items nearest to each query: distance, id, label",
        "clusterable search fm-index.npz boot.png shirt.png -k 5 --json hits.json",
        command_search,
        runs=("model", "search"),
    )
    search.add_argument("index", help="index file written by `clusterable index`")
    search.add_argument(
        "queries",
        nargs="+",
        help="image files, a folder of images, a table file, a data-set name, or a .npy of "
        "embeddings",
    )
    add_items_split(search, "QUERIES")
    search.add_argument(
        "-k",
        "--k",
        type=whole_number(1),
        default=10,
        help="neighbours per query (default: %(default)s)",
    )
    add_max_distance(
        search, "only neighbours within distance D (a query may get fewer than k, or none)"
    )
    search.add_argument("--run", help="embed the queries with this run (default: the index's)")
    search.add_argument("--json", help="also write the neighbours to this JSON file")
    add_overwrite(search, "replace the file --json names")
    return search


def command_assign(args: argparse.Namespace) -> int:
    """Put items into a saved partition's clusters (-1 beyond ``--max-distance``), and print it."""
    import numpy as np

    from clusterable.cli.decisions import calibrated_max_distance, check_calibration_flags
    from clusterable.cluster import Partition, clusterer_info
    from clusterable.open_set import assign_within

    check_calibration_flags(args)
    out = check_outputs(
        args,
        Output("out", "--out", NPY, "cluster ids are"),
        Output("json", "--json", JSON, "the assignments are"),
    )["out"]
    partition = Partition.load(args.partition)
    points, ids, run = _assigned_items(partition, args)
    max_distance = args.max_distance
    if max_distance == "auto":
        max_distance = calibrated_max_distance(partition, args, run)
    if max_distance is None:
        clusters, beyond = partition.predict(points), np.zeros(len(ids), bool)
    else:
        clusters, beyond = assign_within(partition, points, max_distance)
    counts = np.bincount(clusters[clusters >= 0], minlength=partition.n_clusters)
    noise = int((clusters < 0).sum() - beyond.sum())
    if len(ids) <= MAX_PRINTED_ITEMS:
        for item, cluster, far in zip(ids, clusters, beyond, strict=True):
            print(f"{item}  {'none' if far else 'noise' if cluster < 0 else cluster}")
    print(
        f"assigned {len(ids)} items to the {partition.n_clusters} {partition.method} clusters "
        f"of {args.partition} by {partition.RULE}"
        + (f"; {noise} called noise" if clusterer_info(partition.method).noise else "")
        + (
            ""
            if max_distance is None
            else f"; {int(beyond.sum())} farther than {max_distance:g}: none of these (-1)"
        )
    )
    per_cluster = ", ".join(f"{c}: {n}" for c, n in enumerate(counts) if n)
    print(f"items per cluster: {per_cluster or 'none, no item was assigned a cluster'}")
    if out is not None:
        np.save(out, clusters)
        print(f"wrote {out}")
    write_json(
        {
            "partition": str(args.partition),
            "method": partition.method,
            "max_distance": max_distance,
            "items": items_in_clusters(ids, clusters),
        },
        args.json,
    )
    return 0


def _assigned_items(
    partition: Any, args: argparse.Namespace
) -> tuple[np.ndarray, np.ndarray, TrainedRun | None]:
    """Embeddings and ids of ``assign``'s items, and the run that embedded them (None for a saved
    ``.npy``); either refused when another model than the partition's made them."""
    remedy = "embed the items with the run whose embeddings the partition clustered"
    if args.items is not None:
        run = load_run(args.source, args)
        run.check_identity(partition.model, f"the partition {args.partition}", remedy)
        embedded = run.embed(args.items, split=args.split)
        return embedded.embeddings, embedded.ids, run
    source = Path(args.source)
    _refuse_split_of_saved(args, source)
    points = partition_embeddings(
        source,
        partition,
        str(source),
        f"{remedy}; or give a run folder and the items: clusterable assign PARTITION RUN ITEMS",
    )
    return points, ids_beside(source, len(points)), None


def add_assign(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``assign`` verb's parser: its flags, defaults and help."""
    assign = verbs(
        "assign",
        "put new items into the clusters of a saved partition (`cluster --save`)",
        "clusterable assign fm-clusters.npz runs/fm photos/ --json assigned.json",
        command_assign,
        runs=("model", "clustering"),
    )
    assign.add_argument("partition", help="partition file written by `clusterable cluster --save`")
    assign.add_argument("source", help="a .npy of embeddings, or the run folder that embeds ITEMS")
    assign.add_argument(
        "items", nargs="?", help="with a run: images, a folder, a table or a dataset name"
    )
    add_items_split(assign, "ITEMS")
    add_max_distance(
        assign,
        "an item farther than D from the cluster it is assigned goes to -1, none of these; auto: "
        "D chosen on held-out labelled items (--calibration)",
        auto=True,
    )
    assign.add_argument(
        "--calibration",
        help="with --max-distance auto: held-out labelled items of the clustered classes (default: "
        "the run's validation split): a split of the run's data, items the run embeds, or an "
        "embeddings .npy with labels.npy beside it (as `clusterable embed` writes them)",
    )
    assign.add_argument(
        "--threshold-criterion",
        type=criterion_flag,
        help="with --max-distance auto: what D optimises, f1, accuracy, balanced_accuracy or "
        f"fmr=EPS (default: {DEFAULT_CRITERION})",
    )
    assign.add_argument("--out", help="also write the cluster ids to this .npy file")
    assign.add_argument("--json", help="also write item ids and clusters to this JSON file")
    add_overwrite(assign, "replace the files --out and --json name")
    return assign


def command_export(args: argparse.Namespace) -> int:
    """Run ``clusterable export`` with the parsed ``args``; its exit status."""
    from clusterable.export import DESCRIPTION_SUFFIX, SUFFIX, export_run

    # export_model would add the suffix to any other name, and write another file than the one
    # named (``--out x.txt`` writing ``x.txt.onnx``).
    kind = f"the {args.format} model is"
    model = Output("out", "--out", (SUFFIX[args.format],), kind, beside=(DESCRIPTION_SUFFIX,))
    out = check_outputs(args, model)["out"]
    assert out is not None  # --out is required
    path = export_run(args.run, out, args.format, seed=args.seed)
    description = path.name + DESCRIPTION_SUFFIX
    print(f"wrote {path} and its description {description} (input, preprocessing, parity)")
    return 0


def add_export(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``export`` verb's parser: its flags, defaults and help."""
    export = verbs(
        "export",
        "write a run's model as ONNX or TorchScript, checked against PyTorch, with a description "
        "(traced and checked on the CPU, whatever device the run trained on)",
        "clusterable export runs/fm --format onnx --out fm.onnx",
        command_export,
    )
    export.add_argument("run", help="run folder or checkpoint")
    export.add_argument(
        "--format", choices=("onnx", "torchscript"), default="onnx", help="(default: %(default)s)"
    )
    export.add_argument("--out", required=True, help="file to write (and FILE.json beside it)")
    add_overwrite(export, "replace the file --out names and its description")
    return export
