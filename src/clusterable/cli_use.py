"""The command-line verbs that put a trained model to use: index, search, assign, export.

    clusterable index runs/fm --data fashion-mnist --split train --out fm-index.npz
    clusterable search fm-index.npz boot.png shirt.png -k 5
    clusterable assign fm-clusters.npz runs/fm photos/ --json assigned.json
    clusterable export runs/fm --format onnx --out fm.onnx

An index remembers the run whose model embedded its gallery and that model's checksum; ``search``
embeds image and table queries with that run and refuses them when the run's weights are no longer
the ones the gallery was embedded with. Embeddings saved by ``clusterable embed`` carry the same
identity in a ``model.json`` beside them, which ``search`` checks too.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from clusterable.train.run_folder import check_parent_writable

#: The file ``clusterable embed`` writes beside its embeddings: which model made them.
MODEL_IDENTITY = "model.json"

#: ``assign`` prints one line per item up to this many items, a summary beyond.
MAX_PRINTED_ITEMS = 50


def write_model_identity(folder: Path, model_id: str, run: str, **where: str | None) -> None:
    """Record in ``folder`` which model produced the embeddings saved there, and from which
    items (``data``, ``root``, ``split``; None: the run's own data)."""
    identity = {"model": model_id, "run": run, **where}
    (folder / MODEL_IDENTITY).write_text(json.dumps(identity, indent=2))


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value JSON and printing want."""
    return value.item() if isinstance(value, np.generic) else value


def _write_json(payload: dict[str, Any], path: str | None) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(payload, indent=2) + "\n")
        print(f"wrote {path}")


def _embedder(run: str) -> Any:
    from clusterable.embedder import Embedder

    if not Path(run).exists():
        raise FileNotFoundError(f"run folder {run} does not exist; give the folder `train` wrote")
    return Embedder.from_run(run)


def _saved_embeddings(path: Path, dim: int) -> np.ndarray | None:
    """The ``(m, dim)`` embeddings in ``path`` when it is a ``.npy`` of them, else None."""
    if path.suffix != ".npy" or not path.is_file():
        return None
    array = np.load(path, allow_pickle=False)
    if array.ndim == 1:
        array = array[None]
    return array if array.ndim == 2 and array.shape[1] == dim else None


# ---------------------------------------------------------------------------------------------
# verbs
def command_index(args: argparse.Namespace) -> int:
    from clusterable.index import EmbeddingIndex

    out = Path(args.out)
    check_parent_writable(out)
    embedder = _embedder(args.run)
    items = embedder.embed(args.data, split=args.split, root=args.root)
    print(f"embedded {len(items.ids)} items of {items.source} with {args.run}")
    index = EmbeddingIndex.build(
        items.embeddings,
        ids=items.ids,
        labels=items.labels,
        metric=args.metric,
        kind=args.kind,
        model=embedder.model_id,
        run=embedder.run,
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
    print(
        f"{index.kind} {index.metric} index of {len(index)} x {index.dim}{recall}; wrote {written}"
    )
    return 0


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
            label = None if index.labels is None else _plain(index.labels[rows[q, rank]])
            neighbours.append(
                {
                    "rank": rank + 1,
                    "distance": float(distances[q, rank]),
                    "id": _plain(ids[q, rank]),
                    "label": label,
                }
            )
            tail = "" if label is None else f"  {label}"
            print(f"  {rank + 1:3d}  {distances[q, rank]:.4f}  {ids[q, rank]}{tail}")
        results.append({"query": _plain(query_id), "neighbours": neighbours})
    _write_json(
        {"index": str(args.index), "k": args.k, "metric": index.metric, "queries": results},
        args.json,
    )
    return 0


def _queries(index: Any, args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """Query embeddings and ids from saved embeddings, or items embedded with the index's run."""
    first = Path(args.queries[0])
    saved = _saved_embeddings(first, index.dim) if len(args.queries) == 1 else None
    if saved is not None:
        identity = first.with_name(MODEL_IDENTITY)
        if identity.is_file():
            model = json.loads(identity.read_text())["model"]
            if index.model is not None and model != index.model:
                raise ValueError(
                    f"{first} was embedded by another model than the one that built "
                    f"{args.index} ({identity} names it); embed the queries with the index's run"
                )
        else:
            print(f"note: {first} does not say which model embedded it ({MODEL_IDENTITY})")
        return saved, np.arange(len(saved))
    run = args.run or index.run
    if run is None:
        raise ValueError(
            f"{args.index} does not name the run that embedded its gallery: add --run RUN"
        )
    embedder = _embedder(run)
    if index.model is not None and embedder.model_id != index.model:
        raise ValueError(
            f"the model of {run} is not the one that built {args.index} (its weights changed or "
            "it is another run): rebuild the index with `clusterable index`, or give --run"
        )
    items = args.queries if len(args.queries) > 1 else args.queries[0]
    embedded = embedder.embed(items)
    return embedded.embeddings, embedded.ids


def command_assign(args: argparse.Namespace) -> int:
    from clusterable.cluster import Partition

    partition = Partition.load(args.partition)
    if args.items is None:
        source = Path(args.source)
        points = _saved_embeddings(source, partition.n_features)
        if points is None:
            raise ValueError(
                f"{source} is not a .npy of {partition.n_features}-dimensional embeddings; give "
                "them, or a run folder and the items: clusterable assign PARTITION RUN ITEMS"
            )
        ids = np.arange(len(points))
    else:
        embedded = _embedder(args.source).embed(args.items)
        points, ids = embedded.embeddings, embedded.ids
    clusters = partition.predict(points)
    counts = np.bincount(clusters[clusters >= 0], minlength=partition.n_clusters)
    noise = int((clusters < 0).sum())
    if len(ids) <= MAX_PRINTED_ITEMS:
        for item, cluster in zip(ids, clusters, strict=True):
            print(f"{item}  {'noise' if cluster < 0 else cluster}")
    print(
        f"assigned {len(ids)} items to the {partition.n_clusters} {partition.method} clusters "
        f"of {args.partition} by {partition.RULE}"
        + (f"; {noise} called noise" if partition.method == "aas" else "")
    )
    print("items per cluster: " + ", ".join(f"{c}: {n}" for c, n in enumerate(counts) if n))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        np.save(out, clusters)
        print(f"wrote {out}")
    _write_json(
        {
            "partition": str(args.partition),
            "method": partition.method,
            "items": [
                {"id": _plain(item), "cluster": int(cluster)}
                for item, cluster in zip(ids, clusters, strict=True)
            ],
        },
        args.json,
    )
    return 0


def command_export(args: argparse.Namespace) -> int:
    from clusterable.export import export_run

    out = Path(args.out)
    check_parent_writable(out)
    path = export_run(args.run, out, args.format)
    print(f"wrote {path} and its description {path.name}.json (input, preprocessing, parity)")
    return 0


def command_report(args: argparse.Namespace) -> int:
    from clusterable import reports

    source = Path(args.source)
    if not source.exists():
        raise FileNotFoundError(
            f"{source} does not exist; give a run folder, an experiment folder of `reproduce`, "
            "or a partition (.npz) / cluster ids (.npy) with --embeddings"
        )
    out = Path(args.out) if args.out else None
    if out is not None:
        check_parent_writable(out)
    if source.is_dir() and (source / "results.json").is_file():
        from clusterable.reports import ExperimentReport

        report = ExperimentReport.from_json(source / "results.json")
        written = reports.write_reproduction_report(report, source, out)
    elif source.is_dir():
        written = reports.write_run_report(source, out, seed=args.seed)
    else:
        written = _clustering_report(source, out, args)
    print(f"wrote {written}")
    return 0


def _clustering_report(source: Path, out: Path | None, args: argparse.Namespace) -> Path:
    """The report of a saved partition or cluster-id array, on the embeddings it clustered."""
    from clusterable import reports
    from clusterable.cluster import Partition

    if args.embeddings is None:
        raise ValueError(
            f"{source} holds cluster ids only: add --embeddings EMB.npy, the points it clustered"
        )
    embeddings_path = Path(args.embeddings)
    embeddings = np.load(embeddings_path, allow_pickle=False)
    if source.suffix == ".npz":
        partition = Partition.load(source)
        clusters, method = partition.labels_, partition.method
    else:
        clusters, method = np.load(source, allow_pickle=False), "given"
    beside = embeddings_path.with_name("labels.npy")
    labels_path = Path(args.labels) if args.labels else beside if beside.is_file() else None
    labels = None if labels_path is None else np.load(labels_path, allow_pickle=False)
    class_names, items = _items_of(embeddings_path, len(embeddings))
    settings = {"method": method, "clusters file": source.resolve(), "embeddings": embeddings_path}
    if labels_path is not None:
        settings["labels"] = labels_path
    return reports.write_clustering_report(
        embeddings,
        clusters,
        out or source.with_name(f"{source.stem}-report.html"),
        labels=labels,
        class_names=class_names,
        items=items,
        settings=settings,
        title=f"{method} clusters of {embeddings_path}",
        seed=args.seed,
    )


def _items_of(embeddings_path: Path, count: int) -> tuple[list[str] | None, np.ndarray | None]:
    """Class names and item images of embeddings written by ``clusterable embed``, when the
    identity beside them names the run and split they came from; ``(None, None)`` otherwise."""
    identity = embeddings_path.with_name(MODEL_IDENTITY)
    if not identity.is_file():
        return None, None
    where = json.loads(identity.read_text())
    record = Path(where["run"]) / "run.json"
    if "split" not in where or not record.is_file():
        return None, None
    from clusterable.data import load_dataset
    from clusterable.reports.run_report import item_images

    spec = json.loads(record.read_text())["spec"]
    data = load_dataset(
        where["data"] or spec["data"],
        root=where["root"] or spec["root"],
        split=where["split"],
        labels=spec["labels"],
    )
    if len(data) != count:
        return None, None
    return data.class_names, item_images(data)


# ---------------------------------------------------------------------------------------------
# parser
def add_use_verbs(verb: Callable[..., argparse.ArgumentParser]) -> None:
    """Register ``index``, ``search``, ``assign`` and ``export`` with the CLI's verb factory."""
    index = verb(
        "index",
        "embed a gallery with a trained run and save a search index (ids, labels, model checksum)",
        "clusterable index runs/fm --data fashion-mnist --split train --out fm-index.npz",
        command_index,
    )
    index.add_argument("run", help="run folder (or checkpoint) whose model embeds the gallery")
    index.add_argument(
        "--data",
        required=True,
        help="gallery: a dataset name, folder:PATH, table:PATH, a folder of images or a table file",
    )
    index.add_argument("--split", default="all", help="dataset split (default: %(default)s)")
    index.add_argument("--root", help="folder of the dataset's files")
    index.add_argument("--out", required=True, help="index file to write (.npz)")
    index.add_argument(
        "--kind",
        choices=("exact", "ivf", "hnsw"),
        default="exact",
        help="exact search, or faiss's approximate IVF / HNSW (default: %(default)s)",
    )
    index.add_argument(
        "--metric",
        choices=("euclidean", "cosine"),
        default="euclidean",
        help="(default: %(default)s)",
    )
    index.add_argument(
        "--target-recall",
        type=float,
        default=0.95,
        help="approximate kinds: recall@10 to tune the search breadth to (default: %(default)s)",
    )

    search = verb(
        "search",
        "print the gallery items nearest to each query: distance, id, label",
        "clusterable search fm-index.npz boot.png shirt.png -k 5 --json hits.json",
        command_search,
    )
    search.add_argument("index", help="index file written by `clusterable index`")
    search.add_argument(
        "queries",
        nargs="+",
        help="image files, a folder of images, a table file, or a .npy of embeddings",
    )
    search.add_argument(
        "-k", type=int, default=10, help="neighbours per query (default: %(default)s)"
    )
    search.add_argument("--run", help="embed the queries with this run (default: the index's)")
    search.add_argument("--json", help="also write the neighbours to this JSON file")

    assign = verb(
        "assign",
        "put new items into the clusters of a saved partition (`cluster --save`)",
        "clusterable assign fm-clusters.npz runs/fm photos/ --json assigned.json",
        command_assign,
    )
    assign.add_argument("partition", help="partition file written by `clusterable cluster --save`")
    assign.add_argument("source", help="a .npy of embeddings, or the run folder that embeds ITEMS")
    assign.add_argument(
        "items", nargs="?", help="with a run: images, a folder, a table or a dataset name"
    )
    assign.add_argument("--out", help="also write the cluster ids to this .npy file")
    assign.add_argument("--json", help="also write item ids and clusters to this JSON file")

    report = verb(
        "report",
        "write one self-contained HTML page of a run, a clustering or a reproduction",
        "clusterable report runs/fm; clusterable report fm.npz --embeddings emb/embeddings.npy",
        command_report,
    )
    report.add_argument(
        "source",
        help="a run folder, an experiment folder of `reproduce`, or a partition .npz / cluster "
        "ids .npy (with --embeddings)",
    )
    report.add_argument(
        "--out", help="HTML file (default: report.html in the run or experiment folder)"
    )
    report.add_argument("--embeddings", help="clusterings: the (n, d) .npy that was clustered")
    report.add_argument(
        "--labels", help="clusterings: class labels .npy (default: labels.npy beside --embeddings)"
    )

    export = verb(
        "export",
        "write a run's model as ONNX or TorchScript, checked against PyTorch, with a description",
        "clusterable export runs/fm --format onnx --out fm.onnx",
        command_export,
    )
    export.add_argument("run", help="run folder or checkpoint")
    export.add_argument(
        "--format", choices=("onnx", "torchscript"), default="onnx", help="(default: %(default)s)"
    )
    export.add_argument("--out", required=True, help="file to write")
