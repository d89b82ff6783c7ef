"""The HTML report of a training run: settings, metrics, per-class results, curves, map,
retrieval, clusters and verification, on one self-contained page (``clusterable report RUN``).

The metrics table is the run's own test evaluation (``test_metrics.json``, the whole test split).
The panels below it embed the test split with the best checkpoint again (or with the checkpoint of
the run given, ``report RUN/checkpoints/NAME``, whose page has no test table); a large split is
sampled (seeded) for them, and the t-SNE map takes a smaller sample still: the page says how many.
The verification panel chooses its threshold on the run's validation split (sampled alike) and
reports its rates on the test split (`clusterable.reports.verification_view`).
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from clusterable.data import LabelledDataset, labelled_mask
from clusterable.device import DeviceSpec
from clusterable.evaluate import evaluate_embeddings
from clusterable.evaluate.clustering import describe_kmeans, kmeans_rule
from clusterable.evaluate.pair_sample import pair_distances
from clusterable.plots.curves import read_epoch_records
from clusterable.plots.maps import Colouring
from clusterable.reports.page import Section, note, render, write_page
from clusterable.reports.panels import (
    cluster_section,
    curves_section,
    map_section,
    metrics_section,
    per_class_section,
    retrieval_section,
    settings_section,
    verification_section,
)
from clusterable.reports.verification_view import (
    NO_VALIDATION,
    verification_view,
)
from clusterable.versions import library_versions

if TYPE_CHECKING:
    from clusterable.evaluate.pair_sample import PairDistances
    from clusterable.recipe import RunSpec
    from clusterable.trained_run import TrainedRun

#: Test items the panels use at most (a seeded sample beyond), and the t-SNE map at most.
PANEL_ITEMS = 5_000
MAP_ITEMS = 2_000

#: The report's file name in the run folder (``report-NAME.html`` for its checkpoint ``NAME``
#: other than the best).
REPORT_NAME = "report.html"


def write_run_report(
    run: str | os.PathLike[str] | TrainedRun,
    out: str | os.PathLike[str] | None = None,
    seed: int | None = None,
    device: DeviceSpec = "auto",
) -> Path:
    """Write the report of the training run in folder ``run``; returns its path.

    The test split is the run's own (:meth:`~clusterable.trained_run.TrainedRun.split`): the
    view, size and channels its test table embedded.

    Parameters
    ----------
    run : path or TrainedRun
        The folder ``clusterable train`` wrote (``run.json``, ``checkpoints/``, ``log.jsonl``),
        one of its checkpoints (the run with that checkpoint's weights), or a run already loaded.
    out : path, optional
        The HTML file to write; ``RUN/report.html`` by default (``RUN/report-NAME.html`` for
        the run's checkpoint ``NAME`` other than its best).
    seed : int, optional
        Seed of the samples, the t-SNE map and the clustering (default: the run's).
    device : str or torch.device
        Where the model embeds the test items (a loaded run keeps its own).

    Raises
    ------
    FileNotFoundError
        If ``run`` is neither a run folder (with ``run.json``) nor a checkpoint in one, or holds
        no checkpoint.
    """
    from clusterable.trained_run import TrainedRun

    trained = run if isinstance(run, TrainedRun) else _load_run_folder(Path(run), device)
    folder, spec = trained.folder, trained.spec
    if folder is None or spec is None:
        raise ValueError(
            "a run report reads the run's folder (its settings and log): give the folder "
            "`clusterable train` wrote, or a TrainedRun loaded from one"
        )
    seed = trained.seed if seed is None else seed
    sections = [settings_section({"run": asdict(spec), "train": trained.config})]
    sections.append(settings_section(library_versions(), "Versions", "versions"))
    log = folder / "log.jsonl"
    records = read_epoch_records(log) if log.is_file() else []
    curves = [curves_section(records)] if records else []
    metrics = trained.test_metrics
    # A run without a test table may have trained on unlabelled items (reading its train split
    # checks every file: left to the runs that need it).
    if metrics is None and trained.trained_unlabelled():
        body = note(
            f"{spec.data} has no classes: the run trained on its pseudo-labels, and there is no "
            "test split to score. Embed its items with `clusterable embed` (--items) and "
            "cluster them with `clusterable cluster`."
        )
        sections += [*curves, Section("test", "No test table", body)]
        return _write(trained, folder, spec, sections, out)
    test = trained.split("test")
    sample = _sample(test, PANEL_ITEMS, seed)
    embeddings = trained.embed(sample, progress=False).embeddings  # (m, d)
    labelled = labelled_mask(sample.labels)  # distractors take part in retrieval only as gallery
    if metrics is not None:
        before = trained.before_training
        sections.append(
            metrics_section(
                metrics,
                f"The run's test evaluation: all {len(test):,} items of the {test.name} test "
                f"split, k-means with k = the number of classes ({test.num_classes}; "
                f"{describe_kmeans(kmeans_rule(test.num_classes))}) for the clustering metrics.",
                None if before is None else (before.representation, before.metrics),
            )
        )
    sections += curves
    described = _sample_description(len(sample), len(test), spec.data)
    items = item_images(sample)
    names = test.class_names
    sections += _embedding_sections(
        embeddings[labelled],
        sample.labels[labelled],
        names,
        None if items is None else items[labelled],
        described,
        seed,
        subclasses=sample.fine_labels[labelled],
        subclass_names=test.fine_class_names,
        device=trained.device,
    )
    sections.append(_verification(trained, sample, embeddings, described, seed))
    return _write(trained, folder, spec, sections, out)


def _write(
    trained: TrainedRun,
    folder: Path,
    spec: RunSpec,
    sections: list[Section],
    out: str | os.PathLike[str] | None,
) -> Path:
    """The page of a run's ``sections``, titled by its loss, data and checkpoint, written to
    ``out`` (default: the run's ``report.html``, or ``report-NAME.html`` for a checkpoint other
    than its best)."""
    checkpoint = None if trained.is_best else Path(str(trained.checkpoint)).name
    title = f"{folder.name}: {spec.loss} on {spec.data}"
    if checkpoint is not None:
        title += f", {checkpoint}"
    subtitle = f"model {spec.model}, embedding {spec.embedding_dim}-d, labels {spec.labels}"
    page = render(title, subtitle, sections, f"clusterable report of {folder}")
    name = REPORT_NAME if checkpoint is None else f"report-{checkpoint}.html"
    return write_page(page, out if out is not None else folder / name)


def _load_run_folder(folder: Path, device: DeviceSpec) -> TrainedRun:
    """The run in ``folder``, which must be a run folder or a checkpoint of one (a checkpoint
    copied out of its run has none of the run's settings and log)."""
    from clusterable.train.checkpoint import resolve_checkpoint
    from clusterable.train.run_folder import RUN_RECORD, checkpoint_run_folder
    from clusterable.trained_run import TrainedRun

    if not (folder / RUN_RECORD).is_file():
        try:
            in_a_run = checkpoint_run_folder(resolve_checkpoint(folder, "best")) is not None
        except FileNotFoundError:
            in_a_run = False
        if not in_a_run:
            raise FileNotFoundError(
                f"{folder} is not a run folder (no {RUN_RECORD}) nor a checkpoint in one: give "
                "the folder `clusterable train` wrote"
            )
    return TrainedRun.load(folder, device=device)


def _embedding_sections(
    embeddings: np.ndarray,
    labels: np.ndarray,
    class_names: list[str] | None,
    items: np.ndarray | None,
    described: str,
    seed: int,
    subclasses: np.ndarray | None = None,
    subclass_names: list[str] | None = None,
    device: DeviceSpec = "auto",
) -> list[Section]:
    """Per-class results, the map, retrieval and k-means clusters of labelled embeddings (the
    partition the per-class table scored, `Evaluation.partition`)."""
    table = evaluate_embeddings(
        embeddings, labels, ks=(1,), seed=seed, per_class=True, device=device
    )
    partition = table.partition
    assert partition is not None  # k-means ran: the evaluation clusters by default
    clusters = partition.labels_
    rng = np.random.default_rng(seed)
    on_map = np.sort(rng.choice(len(labels), size=min(MAP_ITEMS, len(labels)), replace=False))
    return [
        per_class_section(table["per_class"], class_names, description=described),
        map_section(
            embeddings[on_map],
            _colourings(labels[on_map], class_names, subclasses, subclass_names, on_map),
            description=f"A seeded sample of the items below. {described}",
            seed=seed,
        ),
        retrieval_section(
            embeddings, labels, np.arange(len(labels)), class_names, items, seed=seed
        ),
        cluster_section(
            clusters,
            labels,
            class_names,
            items,
            description=f"k-means, k = {partition.asked} (the number of classes; "
            f"{partition.rule}). " + described,
            seed=seed,
        ),
    ]


def _verification(
    trained: TrainedRun,
    sample: LabelledDataset,
    embeddings: np.ndarray,
    described: str,
    seed: int,
) -> Section:
    """The verification panel: the threshold chosen on the run's validation split, its rates on
    the pairs of the labelled test items of ``sample`` (``embeddings`` ``(m, d)`` its rows)."""
    labelled = labelled_mask(sample.labels)
    queries = None if sample.is_query is None else sample.is_query[labelled]
    pairs = pair_distances(
        embeddings[labelled], sample.labels[labelled], queries=queries, seed=seed
    )
    view = verification_view(
        pairs,
        _validation_pairs(trained, seed),
        NO_VALIDATION,
    )
    return verification_section(view, "the test split", described)


def _validation_pairs(trained: TrainedRun, seed: int) -> PairDistances | None:
    """The pairs of the run's validation split (a seeded sample of `PANEL_ITEMS` items at most),
    or None when it has none."""
    validation = trained.validation_split()
    if validation is None:
        return None
    sample = _sample(validation, PANEL_ITEMS, seed)
    labelled = labelled_mask(sample.labels)
    embeddings = trained.embed(sample, progress=False).embeddings[labelled]  # (m, d)
    return pair_distances(embeddings, sample.labels[labelled], seed=seed)


def _colourings(
    labels: np.ndarray,
    class_names: list[str] | None,
    subclasses: np.ndarray | None,
    subclass_names: list[str] | None,
    rows: np.ndarray,
) -> list[Colouring]:
    """Colour by class, and by sub-class where the run trained on coarse labels."""
    colourings = [Colouring(labels, class_names, "by class")]
    if subclasses is not None and not np.array_equal(subclasses[rows], labels):
        colourings.append(Colouring(subclasses[rows], subclass_names, "by sub-class"))
    return colourings


def _sample(dataset: LabelledDataset, size: int, seed: int) -> LabelledDataset:
    if len(dataset) <= size:
        return dataset
    rows = np.random.default_rng(seed).choice(len(dataset), size=size, replace=False)
    return dataset.subset(np.sort(rows))


def _sample_description(used: int, total: int, name: str) -> str:
    if used == total:
        return f"All {total:,} items of the {name} test split."
    return f"A seeded sample of {used:,} of the {total:,} items of the {name} test split."


def item_images(dataset: LabelledDataset) -> np.ndarray | None:
    """The items as ``(n, C, H, W)`` when they are images, else None (tables)."""
    if len(dataset.input_shape) != 3:
        return None
    return dataset.features()[0]
