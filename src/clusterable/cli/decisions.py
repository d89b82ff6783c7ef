"""Decisions with a trained model: the ``classify`` verb, and the flags that let ``search``,
``assign`` and ``classify`` say "none of these" (``--max-distance``, ``--threshold-criterion``).

    clusterable classify fm-index.npz photos/ -k 10 --weighting distance --output labels.csv
    clusterable classify fm-index.npz photos/ --method class-mean --max-distance 0.8

``classify`` labels each item by its nearest gallery items' vote or the nearest class mean
(`clusterable.index.EmbeddingIndex.classify`), from a saved index with labels or a run's training
split; its items are embedded and checked as ``search``'s queries are.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from clusterable.cli._files import add_overwrite, load_run, plain
from clusterable.cli._flag_types import whole_number
from clusterable.cli._parser import Verbs

if TYPE_CHECKING:
    from clusterable.evaluate.verification import Criterion
    from clusterable.index import EmbeddingIndex

#: ``classify`` prints one line per item up to this many items, the counts per label beyond.
MAX_PRINTED_ITEMS = 50

#: The scores ``--threshold-criterion`` may maximise (`clusterable.evaluate.select_threshold`).
CRITERIA = ("f1", "accuracy", "balanced_accuracy")

#: What ``--max-distance auto`` optimises unless told: keeping the items of known classes and
#: refusing the stand-ins of unknown ones count alike, whatever their numbers.
DEFAULT_CRITERION: Final = "balanced_accuracy"


def max_distance_flag(text: str) -> float:
    """``--max-distance``: a distance of 0 or more (``inf`` keeps everything)."""
    try:
        number = float(text.strip())
    except ValueError:
        number = math.nan
    if not number >= 0.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r} is not a distance: give a number of 0 or more")
    return number


def max_distance_or_auto(text: str) -> float | str:
    """``assign --max-distance``: a distance of 0 or more, or ``auto`` (chosen on held-out
    items, `clusterable.open_set.choose_max_distance`)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return max_distance_flag(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a distance: give a number of 0 or more, or auto"
        ) from None


def criterion_flag(text: str) -> Criterion:
    """``--threshold-criterion``: ``f1``, ``accuracy``, ``balanced_accuracy`` or ``fmr=EPS``
    (at most a share EPS in [0, 1] of false matches), as `select_threshold` takes them."""
    name, equals, value = text.strip().lower().partition("=")
    if not equals and name in CRITERIA:
        return name  # type: ignore[return-value]
    try:
        eps = float(value) if name == "fmr" and equals else math.nan
    except ValueError:
        eps = math.nan
    if not 0.0 <= eps <= 1.0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a criterion: give {', '.join(CRITERIA)} or fmr=EPS with EPS in "
            "[0, 1] (fmr=0.01: at most 1 % false matches)"
        )
    return ("fmr", eps)


def add_items_split(parser: argparse.ArgumentParser, items: str) -> None:
    """``--split`` on ``parser``: the split of its ``items`` argument when they name a data set
    (``classify``, ``search`` and ``assign`` embed only it, not every item)."""
    parser.add_argument(
        "--split", help=f"split of {items} when they are a data set (default: every item)"
    )


def add_max_distance(parser: argparse.ArgumentParser, help: str, auto: bool = False) -> None:
    """``--max-distance`` on ``parser``: a distance, or (``auto``) also the word auto."""
    parser.add_argument(
        "--max-distance",
        type=max_distance_or_auto if auto else max_distance_flag,
        metavar="D|auto" if auto else "D",
        help=help,
    )


def check_output(args: argparse.Namespace) -> Path | None:
    """``--output``: a ``.csv`` or ``.json`` file in a writable folder, none of the command's
    other files (`clusterable.cli._files.check_outputs`), checked before any work."""
    from clusterable.cli._files import Output, check_outputs

    output = Output("output", "--output", (".csv", ".json"), "the decisions are")
    return check_outputs(args, output)["output"]


def check_calibration_flags(args: argparse.Namespace) -> None:
    """``--calibration`` and ``--threshold-criterion`` choose ``--max-distance auto``: refused
    without it, before any work."""
    if args.max_distance == "auto":
        return
    for flag, value in (
        ("--calibration", args.calibration),
        ("--threshold-criterion", args.threshold_criterion),
    ):
        if value is not None:
            raise ValueError(
                f"{flag} serves --max-distance auto: add --max-distance auto, or leave {flag} out"
            )


def calibrated_max_distance(partition: Any, args: argparse.Namespace, run: Any) -> float:
    """``assign --max-distance auto``: the distance `clusterable.open_set.choose_max_distance`
    picks on the held-out items of ``--calibration`` (default: ``run``'s validation split) by
    ``--threshold-criterion``; printed with its criterion and rates."""
    from clusterable.open_set import choose_max_distance

    points, labels, what = _calibration_items(partition, args, run)
    fitted = _fitted_items(partition, points)
    choice = choose_max_distance(
        partition, points, labels, args.threshold_criterion or DEFAULT_CRITERION
    )
    name = choice.criterion
    score = choice.fmr if name.startswith("fmr") else getattr(choice, name)
    print(
        f"--max-distance auto: {choice.threshold:g}, the best {name} ({score:.3f}) on "
        f"{len(points)} {'' if fitted else 'held-out '}items of {what}: each item's "
        f"distance to its own class's cluster (a match) against the nearest other class's "
        f"(none); false match rate {choice.fmr:.3f}, false non-match rate {choice.fnmr:.3f}"
    )
    if fitted:
        print(
            f"note: {fitted} of these {len(points)} items are not held out: the partition was "
            "fitted on them, so the distance suits them better than new items; give "
            "--calibration labelled items the clustering never saw (a split it did not cluster, "
            "a folder, an embeddings .npy)"
        )
    return choice.threshold


def _fitted_items(partition: Any, points: Any) -> int:
    """How many of ``points`` are items ``partition`` was fitted on
    (`clusterable.cluster.Partition.fitted_among`; only held-out items make a fair calibration).
    A partition saved before it kept its points' keys: all of them where they look like its
    fitted items (as many, each put in the cluster the fit gave it), else none."""
    import numpy as np

    among = partition.fitted_among(points)
    if among is not None:
        return int(among.sum())
    fitted = np.asarray(partition.labels_)
    same = len(points) == len(fitted) and np.array_equal(partition.predict(points), fitted)
    return len(points) if same else 0


def _calibration_items(partition: Any, args: argparse.Namespace, run: Any) -> tuple[Any, Any, str]:
    """``(embeddings, labels, what they are)`` of ``--calibration``: an embeddings ``.npy`` with
    ``labels.npy`` beside it, the run's validation split (by default), a split of the run's
    data, or labelled items the run embeds."""
    from clusterable.cli._files import load_labels, partition_embeddings
    from clusterable.cli._names import registry_names

    given = args.calibration
    if given is not None and given.endswith(".npy"):
        path = Path(given)
        points = partition_embeddings(
            path, partition, f"--calibration {given}", "embed held-out labelled items with its run"
        )
        if not path.with_name("labels.npy").is_file():
            raise ValueError(
                f"--calibration {given} has no labels.npy beside it: write the held-out items "
                "with `clusterable embed RUN --split SPLIT --out FOLDER`"
            )
        labels = load_labels(path.with_name("labels.npy"), len(points))
        return points, _calibration_labels(labels, given), given
    if run is None:
        raise ValueError(
            "--max-distance auto needs held-out labelled items: give --calibration EMB.npy "
            "(labels.npy beside it, as `clusterable embed` writes them), or assign a run's "
            "items (clusterable assign PARTITION RUN ITEMS)"
        )
    if given is not None and (
        Path(given).exists() or ":" in given or given in registry_names("datasets")
    ):
        embedded = run.embed(given)
        _calibration_labels(embedded.dataset.labels, given)
        return embedded.embeddings, embedded.labels, given  # by class name
    if given is None or given == "validation":
        dataset, what = run.validation_split(), "the run's validation split"
        if dataset is None:
            raise ValueError(
                f"the run {run.folder} kept no validation split: name held-out labelled items with "
                "--calibration (a split such as test, a labelled folder, or an embeddings .npy)"
            )
    else:
        dataset, what = run.split(given), f"the run's {given} split"
    labels = _calibration_labels(dataset.labels, what)  # before the embedding
    return run.embed(dataset).embeddings, labels, what


def _calibration_labels(labels: Any, what: str) -> Any:
    """``labels`` of the ``--calibration`` items ``what``, refused in one line where fewer than
    two classes are among them (unlabelled items: a flat folder, a run's unlabelled split)."""
    from clusterable.data import labelled_classes

    found = len(labelled_classes(labels))
    if found < 2:
        raise ValueError(
            f"--calibration: {what} holds {found} class{'' if found == 1 else 'es'} among its "
            "items' labels; the distance is chosen on labelled held-out items of 2 classes or "
            "more (class sub-folders, a label column, the labels.npy of `clusterable embed`)"
        )
    return labels


def command_classify(args: argparse.Namespace) -> int:
    """Label each item by the gallery of an index (or a run's training split), and print it."""
    import numpy as np

    from clusterable.cli.use import query_embeddings

    out = check_output(args)
    index, run, queries = _labelled_gallery(args)
    if queries is None:
        embeddings, ids = query_embeddings(index, args.items, args, source=args.source, run=run)
    else:
        embeddings, ids = queries.embeddings, queries.ids
    decided = index.classify(embeddings, args.k, args.weighting, args.method, args.max_distance)
    # Confidence 0 only where nothing was within --max-distance (a found neighbour has a vote).
    none = np.zeros(len(ids), bool) if args.max_distance is None else decided.confidence == 0.0
    labels = [
        None if rejected else plain(label)
        for label, rejected in zip(decided.labels, none, strict=True)
    ]
    if len(ids) <= MAX_PRINTED_ITEMS:
        for item, label, confidence in zip(ids, labels, decided.confidence, strict=True):
            print(f"{item}  {'none' if label is None else label}  {confidence:.3f}")
    rule = (
        "the nearest class mean"
        if args.method == "class-mean"
        else f"a {args.weighting} vote of the {args.k} nearest gallery items (a tie to the "
        "label that sorts first)"
    )
    within = "" if args.max_distance is None else f" within {args.max_distance:g}"
    print(f"classified {len(ids)} items by {rule}{within} of {args.source}")
    shown = ["none" if label is None else str(label) for label in labels]
    found, counts = np.unique(shown, return_counts=True)
    print(
        "items per label: "
        + ", ".join(f"{name}: {n}" for name, n in zip(found, counts, strict=True))
    )
    if out is not None:
        rows = [
            {"id": plain(item), "label": label, "confidence": float(confidence)}
            for item, label, confidence in zip(ids, labels, decided.confidence, strict=True)
        ]
        _write_decisions(out, rows, args)
    return 0


def _labelled_gallery(args: argparse.Namespace) -> tuple[EmbeddingIndex, Any, Any]:
    """The index ``classify`` decides by, the run already loaded for it (or None), and the items
    that run embedded (or None: `query_embeddings` reads or embeds them): a saved index with
    labels, or a run's training split embedded as one (exact, Euclidean). A run embeds the items
    before its gallery, so that items it cannot embed (a data set without the ``--split``) are
    refused before the whole training split is embedded; a training split without labels (a run
    on unlabelled items) is refused before either."""
    from clusterable.cli.use import check_items_model
    from clusterable.data import labelled_mask
    from clusterable.index import EmbeddingIndex

    source = Path(args.source)
    if not source.exists():
        raise FileNotFoundError(
            f"{source} does not exist: give a run folder (`clusterable train`) or an index file "
            "(`clusterable index`)"
        )
    if not source.is_dir():
        index = EmbeddingIndex.load(source)
        if index.labels is None:
            raise ValueError(
                f"{source} holds no labels, so it cannot classify: build the index from "
                "labelled items (`clusterable index RUN --data DATA`)"
            )
        return index, None, None
    run = load_run(source, args)
    training = run.split("train")
    if not labelled_mask(training.labels).any():  # before any embedding
        raise ValueError(
            f"the train split of {source} ({training.name}) has no labels to classify by: "
            f"classify by an index of labelled items (clusterable index {source} --data DATA "
            "--out INDEX), or put the items in clusters (clusterable cluster --save, then assign)"
        )
    saved = Path(args.items[0])
    queries = None
    if len(args.items) == 1 and saved.suffix == ".npy":  # another model's: before the gallery
        check_items_model(saved, run.model_id, str(source))
    else:
        items = args.items if len(args.items) > 1 else args.items[0]
        queries = run.embed(items, split=args.split)
    gallery = run.embed(training)
    print(f"gallery: {len(gallery.ids)} items of {gallery.source}, embedded with {source}")
    index = EmbeddingIndex.build(
        gallery.embeddings,
        ids=gallery.ids,
        labels=gallery.labels,
        model=run.model_id,
        run=str(run.folder),
    )
    return index, run, queries


def _write_decisions(out: Path, rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """``classify --output``: the rows as CSV (``id,label,confidence``; an empty label is
    "none of these") or as JSON with the settings, atomically."""
    from clusterable._atomic import atomic_write_text
    from clusterable.cli._files import write_json

    if out.suffix.lower() == ".json":
        settings = {
            "source": str(args.source),
            "method": args.method,
            "k": None if args.method == "class-mean" else args.k,
            "weighting": None if args.method == "class-mean" else args.weighting,
            "max_distance": args.max_distance,
        }
        write_json({**settings, "items": rows}, str(out))
        return
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=["id", "label", "confidence"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out, text.getvalue())
    print(f"wrote {out}")


def add_classify(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``classify`` verb."""
    classify = verbs(
        "classify",
        "label items by a labelled gallery (a saved index, or a run's training split): each "
        "item's label and confidence, or none of these beyond --max-distance",
        "clusterable classify fm-index.npz photos/ -k 10 --weighting distance --output labels.csv",
        command_classify,
        runs=("model", "search"),
    )
    classify.add_argument(
        "source",
        help="an index with labels (`clusterable index`), or a run folder (its whole train "
        "split is the gallery, validation items included; a tied vote goes to the label that "
        "sorts first)",
    )
    classify.add_argument(
        "items",
        nargs="+",
        help="image files, a folder of images, a table file, a data-set name, or a .npy of "
        "embeddings",
    )
    add_items_split(classify, "ITEMS")
    classify.add_argument(
        "-k",
        "--k",
        type=whole_number(1),
        default=10,
        help="neighbours that vote (default: %(default)s)",
    )
    classify.add_argument(
        "--weighting",
        choices=("uniform", "distance"),
        default="uniform",
        help="one vote per neighbour, or 1 / distance (default: %(default)s)",
    )
    classify.add_argument(
        "--method",
        choices=("knn", "class-mean"),
        default="knn",
        help="a vote of the k nearest gallery items, or the nearest class mean "
        "(default: %(default)s)",
    )
    add_max_distance(
        classify,
        "only neighbours (or class means) within D decide; an item with none is 'none of these'",
    )
    classify.add_argument("--run", help="embed the items with this run (default: the index's)")
    classify.add_argument("--output", help="also write id, label, confidence to this .csv or .json")
    add_overwrite(classify, "replace the file --output names")
    return classify
