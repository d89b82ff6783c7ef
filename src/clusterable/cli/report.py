"""``clusterable report``: one self-contained HTML page of a run, a clustering or a reproduction;
and the page of ``clusterable evaluate --report``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from clusterable.cli._files import (
    HTML,
    LABELS_FILE,
    Embedded,
    Output,
    add_overwrite,
    check_classes,
    check_outputs,
    ids_beside,
    load_array,
    load_embeddings,
    load_labels,
    load_run,
    seed_of,
)
from clusterable.cli._parser import Verbs

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    import numpy as np

    from clusterable.trained_run import TrainedRun


def command_report(args: argparse.Namespace) -> int:
    """Run ``clusterable report`` with the parsed ``args``; its exit status."""
    from clusterable import reports

    source = Path(args.source)
    if not source.exists():
        raise FileNotFoundError(
            f"{source} does not exist; give a run folder, an experiment folder of `reproduce`, "
            "or a partition (.npz) / cluster ids (.npy) with --embeddings"
        )
    out = check_outputs(args, Output("out", "--out", HTML, "the page is"))["out"]
    if source.is_dir() and (source / "results.json").is_file():
        report = reports.ExperimentReport.from_json(source / "results.json")
        written = reports.write_reproduction_report(report, source, out)
    elif source.is_dir():
        device = getattr(args, "device", None) or "auto"
        written = reports.write_run_report(source, out, seed=args.seed, device=device)
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
            f"{source} is neither a run folder nor an experiment folder; for a partition (.npz) "
            "or cluster ids (.npy), add --embeddings EMB.npy, the points it clustered"
        )
    embeddings_path = Path(args.embeddings)
    embeddings = load_embeddings(embeddings_path)
    if source.suffix == ".npz":
        partition = Partition.load(source)
        clusters, method = partition.labels_, partition.method
    else:
        clusters, method = load_array(source, "cluster ids"), "given"
    labels_path, labels = _labels_of(embeddings_path, len(embeddings), args)
    class_names, items = _items_of(embeddings_path, len(embeddings), args)
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


def _labels_of(
    embeddings_path: Path, count: int, args: argparse.Namespace
) -> tuple[Path | None, np.ndarray | None]:
    """``(file, labels)`` the page scores the clusters by: ``--labels`` (refused with fewer than
    two classes), else the ``labels.npy`` beside the embeddings where it holds two classes or
    more (``embed --items`` of a flat folder writes one of -1, none); else ``(None, None)``."""
    from clusterable.data import labelled_classes

    if args.labels:
        labels = load_labels(args.labels, count, "--labels")
        check_classes(labels, f"--labels {args.labels}")
        return Path(args.labels), labels
    beside = embeddings_path.with_name(LABELS_FILE)
    if not beside.is_file():
        return None, None
    labels = load_labels(beside, count, "labels")
    if len(labelled_classes(labels)) < 2:
        return None, None  # the items have no classes to score the clusters against
    return beside, labels


def _items_of(
    embeddings_path: Path, count: int, args: argparse.Namespace
) -> tuple[list[str] | None, np.ndarray | None]:
    """Class names and item images of embeddings written by ``clusterable embed``, when the
    identity beside them names the run they came from and the items can be read again in its
    view: the split it names, or (``embed --items``) the image files its ``ids.npy`` names;
    ``(None, None)`` otherwise."""
    import numpy as np

    from clusterable.data import LabelledDataset
    from clusterable.reports.run_report import item_images
    from clusterable.trained_run import ModelIdentity

    identity = ModelIdentity.beside(embeddings_path)
    if identity is None or not Path(identity.run).is_dir():
        return None, None
    try:
        run = load_run(identity.run, args)
        if identity.split is None:  # embed --items: the files its ids name, if images
            ids = ids_beside(embeddings_path, count)
            if ids.dtype.kind != "U" or not run.is_image_model:
                return None, None
            files = run.image_files([Path(path) for path in ids])
            unlabelled = np.full(count, -1, dtype=np.int64)
            data = LabelledDataset(str(embeddings_path.parent), files, unlabelled, class_names=[])
            return None, item_images(data)
        if identity.data is not None and not isinstance(identity.data, str):  # files: no split
            return None, None
        data = run.split(identity.split, identity.data, identity.root)
    except (ValueError, FileNotFoundError) as error:  # the items moved, or the run changed
        print(f"note: the page shows no item images: the items of {embeddings_path} ({error})")
        return None, None
    if len(data) != count:
        return None, None
    return data.class_names, item_images(data)


def write_evaluation_page(
    args: argparse.Namespace,
    source: Embedded,
    table: Mapping[str, Any],
    keep: np.ndarray,
    queries: np.ndarray | None,
    heading: str,
) -> None:
    """``evaluate --report PAGE``: the table and the verification view of the evaluated items
    (``keep``: the labelled ones among the source's). The threshold is chosen on the run's
    validation split when the items are the run's own test split, the one split held out beside
    it; on the evaluated items themselves otherwise, as the page says."""
    from clusterable import reports

    validation, reason = None, "Saved embeddings come with no validation split."
    settings: dict[str, Any] = {"source": args.source, "labels": args.labels}
    if source.run is not None:
        settings = {"run": source.run.folder, "checkpoint": source.run.checkpoint}
        settings.update(data=args.data or "the run's", split=args.split)
        validation, reason = _run_validation(args, source.run)
    written = reports.write_evaluation_report(
        table,
        source.embeddings[keep],
        source.labels[keep],
        args.report,
        queries=queries,
        validation=validation,
        without_validation=reason,
        heading=heading,
        settings={**settings, "seed": seed_of(args, source)},
        title=f"Evaluation of {args.source}",
        seed=seed_of(args, source),
    )
    print(f"wrote {written}")


def _run_validation(
    args: argparse.Namespace, run: TrainedRun
) -> tuple[tuple[np.ndarray, np.ndarray] | None, str]:
    """The run's validation split embedded (labelled items), when the evaluated items are the
    run's own test split; else None, with the reason."""
    from clusterable.data import labelled_mask
    from clusterable.reports.verification_view import NO_VALIDATION

    if args.split != "test" or args.data is not None or args.root is not None:
        return None, (
            "The run's validation split chooses the threshold of its own test split only "
            "(evaluate RUN without --data, --root or another --split)."
        )
    held_out = run.validation_split()
    if held_out is None:
        return None, NO_VALIDATION
    keep = labelled_mask(held_out.labels)
    embeddings = run.embed(held_out, progress=False).embeddings  # (v, d)
    return (embeddings[keep], held_out.labels[keep]), ""


def add_report(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``report`` verb's parser: its flags, defaults and help."""
    report = verbs(
        "report",
        "write one self-contained HTML page of a run, a clustering or a reproduction",
        "clusterable report runs/fm; clusterable report fm.npz --embeddings emb/embeddings.npy",
        command_report,
        runs=("model", "clustering"),
    )
    report.add_argument(
        "source",
        help="a run folder, an experiment folder of `reproduce`, or a partition .npz / cluster "
        "ids .npy (with --embeddings)",
    )
    report.add_argument(
        "--out",
        help="HTML file (default: report.html in the run or experiment folder; NAME-report.html "
        "beside a clustering NAME.npz or NAME.npy)",
    )
    add_overwrite(report, "replace the page --out names (the default page is rewritten each time)")
    report.add_argument("--embeddings", help="clusterings: the (n, d) .npy that was clustered")
    report.add_argument(
        "--labels", help="clusterings: class labels .npy (default: labels.npy beside --embeddings)"
    )
    return report
