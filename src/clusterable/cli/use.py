"""The verbs that put a trained model to use: ``index``, ``search``, ``assign``, ``export``.

    clusterable index runs/fm --data fashion-mnist --split train --out fm-index.npz
    clusterable search fm-index.npz boot.png shirt.png -k 5
    clusterable assign fm-clusters.npz runs/fm photos/ --json assigned.json
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
from typing import TYPE_CHECKING, Any

from clusterable.cli._files import load_run, plain, saved_embeddings, write_json
from clusterable.cli._flag_types import fraction, whole_number
from clusterable.cli._parser import Verbs

if TYPE_CHECKING:
    import numpy as np

#: ``assign`` prints one line per item up to this many items, a summary beyond.
MAX_PRINTED_ITEMS = 50


def command_index(args: argparse.Namespace) -> int:
    from clusterable.index import EmbeddingIndex
    from clusterable.train.run_folder import check_parent_writable

    out = Path(args.out)
    check_parent_writable(out)
    run = load_run(args.run, args)
    items = run.embed(args.data, split=args.split, root=args.root)
    print(f"embedded {len(items.ids)} items of {items.source} with {args.run}")
    index = EmbeddingIndex.build(
        items.embeddings,
        ids=items.ids,
        labels=items.labels,
        distance=args.distance,
        kind=args.kind,
        model=run.model_id,
        run=str(run.folder),
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


def add_index(verbs: Verbs) -> argparse.ArgumentParser:
    index = verbs(
        "index",
        "embed a gallery with a trained run and save a search index (ids, labels, model checksum)",
        "clusterable index runs/fm --data fashion-mnist --split train --out fm-index.npz",
        command_index,
        runs=("model", "search"),
    )
    index.add_argument("run", help="run folder (or checkpoint) whose model embeds the gallery")
    index.add_argument(
        "--data",
        required=True,
        help="gallery: a dataset name, folder:PATH, table:PATH, a folder of images or a table file",
    )
    index.add_argument(
        "--split",
        help="split of the gallery data set, or of a folder read as one (train/ and test/ "
        "sub-folders; default: every item)",
    )
    index.add_argument("--root", help="folder of the dataset's files")
    index.add_argument("--out", required=True, help="index file to write (.npz)")
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
    from clusterable.index import EmbeddingIndex

    index = EmbeddingIndex.load(args.index)
    queries, query_ids = _queries(index, args)
    distances, rows, ids = index.search(queries, args.k)
    results = []
    for q, query_id in enumerate(query_ids):
        print(f"query {query_id}")
        neighbours = []
        for rank in range(args.k):
            if rows[q, rank] < 0:  # an approximate index found fewer than k
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
    write_json(
        {"index": str(args.index), "k": args.k, "distance": index.distance, "queries": results},
        args.json,
    )
    return 0


def _queries(index: Any, args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """Query embeddings and ids from saved embeddings, or items embedded with the index's run."""
    import numpy as np

    from clusterable.trained_run import MODEL_IDENTITY, ModelIdentity

    first = Path(args.queries[0])
    saved = saved_embeddings(first, index.dim) if len(args.queries) == 1 else None
    if saved is not None:
        identity = ModelIdentity.beside(first)
        if identity is None:
            print(f"note: {first} does not say which model embedded it ({MODEL_IDENTITY})")
        elif index.model is not None and identity.model != index.model:
            raise ValueError(
                f"{first} was embedded by another model than the one that built {args.index} "
                f"({first.with_name(MODEL_IDENTITY)} names it); embed the queries with the "
                "index's run"
            )
        return saved, np.arange(len(saved))
    run = args.run or index.run
    if run is None:
        raise ValueError(
            f"{args.index} does not name the run that embedded its gallery: add --run RUN"
        )
    trained = load_run(run, args)
    trained.check_identity(
        index.model,
        f"the index {args.index}",
        "rebuild the index with `clusterable index`, or give the run that built it with --run",
    )
    items = args.queries if len(args.queries) > 1 else args.queries[0]
    embedded = trained.embed(items)
    return embedded.embeddings, embedded.ids


def add_search(verbs: Verbs) -> argparse.ArgumentParser:
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
        help="image files, a folder of images, a table file, or a .npy of embeddings",
    )
    search.add_argument(
        "-k", type=whole_number(1), default=10, help="neighbours per query (default: %(default)s)"
    )
    search.add_argument("--run", help="embed the queries with this run (default: the index's)")
    search.add_argument("--json", help="also write the neighbours to this JSON file")
    return search


def command_assign(args: argparse.Namespace) -> int:
    import numpy as np

    from clusterable.cluster import Partition, clusterer_info

    partition = Partition.load(args.partition)
    points, ids = _assigned_items(partition, args)
    clusters = partition.predict(points)
    counts = np.bincount(clusters[clusters >= 0], minlength=partition.n_clusters)
    noise = int((clusters < 0).sum())
    if len(ids) <= MAX_PRINTED_ITEMS:
        for item, cluster in zip(ids, clusters, strict=True):
            print(f"{item}  {'noise' if cluster < 0 else cluster}")
    print(
        f"assigned {len(ids)} items to the {partition.n_clusters} {partition.method} clusters "
        f"of {args.partition} by {partition.RULE}"
        + (f"; {noise} called noise" if clusterer_info(partition.method).noise else "")
    )
    print("items per cluster: " + ", ".join(f"{c}: {n}" for c, n in enumerate(counts) if n))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        np.save(out, clusters)
        print(f"wrote {out}")
    write_json(
        {
            "partition": str(args.partition),
            "method": partition.method,
            "items": [
                {"id": plain(item), "cluster": int(cluster)}
                for item, cluster in zip(ids, clusters, strict=True)
            ],
        },
        args.json,
    )
    return 0


def _assigned_items(partition: Any, args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings and ids of ``assign``'s items: a saved ``.npy``, or items the run embeds;
    either refused when another model than the partition's made them."""
    import numpy as np

    from clusterable.trained_run import MODEL_IDENTITY, ModelIdentity

    remedy = "embed the items with the run whose embeddings the partition clustered"
    if args.items is not None:
        run = load_run(args.source, args)
        run.check_identity(partition.model, f"the partition {args.partition}", remedy)
        embedded = run.embed(args.items)
        return embedded.embeddings, embedded.ids
    source = Path(args.source)
    points = saved_embeddings(source, partition.n_features)
    if points is None:
        raise ValueError(
            f"{source} is not a .npy of {partition.n_features}-dimensional embeddings; give "
            "them, or a run folder and the items: clusterable assign PARTITION RUN ITEMS"
        )
    identity = ModelIdentity.beside(source)
    if partition.model is not None and identity is not None and identity.model != partition.model:
        raise ValueError(
            f"{source} was embedded by another model ({source.with_name(MODEL_IDENTITY)} names "
            f"it) than the one whose embeddings {args.partition} clustered: {remedy}"
        )
    return points, np.arange(len(points))


def add_assign(verbs: Verbs) -> argparse.ArgumentParser:
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
    assign.add_argument("--out", help="also write the cluster ids to this .npy file")
    assign.add_argument("--json", help="also write item ids and clusters to this JSON file")
    return assign


def command_export(args: argparse.Namespace) -> int:
    from clusterable.export import export_run
    from clusterable.train.run_folder import check_parent_writable

    out = Path(args.out)
    check_parent_writable(out)
    path = export_run(args.run, out, args.format, device=getattr(args, "device", None) or "cpu")
    print(f"wrote {path} and its description {path.name}.json (input, preprocessing, parity)")
    return 0


def add_export(verbs: Verbs) -> argparse.ArgumentParser:
    export = verbs(
        "export",
        "write a run's model as ONNX or TorchScript, checked against PyTorch, with a description",
        "clusterable export runs/fm --format onnx --out fm.onnx",
        command_export,
        runs=("model",),
    )
    export.add_argument("run", help="run folder or checkpoint")
    export.add_argument(
        "--format", choices=("onnx", "torchscript"), default="onnx", help="(default: %(default)s)"
    )
    export.add_argument("--out", required=True, help="file to write")
    return export
