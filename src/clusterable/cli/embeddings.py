"""The verbs on embeddings, saved or made by a trained run: ``evaluate``, ``embed``, ``cluster``,
``plot``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from clusterable.cli._clusters import clustering_options, clusters_to_ask, n_clusters_flag
from clusterable.cli._files import (
    CLASS_NAMES_FILE,
    EMBEDDINGS_FILE,
    FINE_LABELS_FILE,
    HTML,
    IDENTITY_FILE,
    IDS_FILE,
    JSON,
    LABELS_FILE,
    NPY,
    NPZ,
    ROLES_FILE,
    Embedded,
    Output,
    add_overwrite,
    add_source,
    check_classes,
    check_each_once,
    check_outputs,
    embed_files,
    embeddings_of,
    ids_beside,
    items_in_clusters,
    load_array,
    load_embeddings,
    load_labels,
    load_run,
    roles_beside,
    seed_of,
    split_of_run,
    write_json,
)
from clusterable.cli._flag_types import ks_list, metric_name
from clusterable.cli._names import CLASSIFICATION_ACCURACY, registry_names
from clusterable.cli._parser import Verbs
from clusterable.cli._settings import assignment
from clusterable.cli.report import write_evaluation_page

if TYPE_CHECKING:
    import numpy as np

    from clusterable.data import LabelledDataset
    from clusterable.recipe import KnnReference
    from clusterable.trained_run import TrainedRun


#: Recall@K of ``evaluate`` on saved arrays (a run's own are its test table's).
DEFAULT_KS = (1, 2, 4, 8)


def partition_scores() -> list[str]:
    """The scores of ``cluster --labels``: those of the partition alone, read from the metric
    registry (`clusterable.evaluate.partition_metric_names`), so that a metric registered with
    ``needs={"partition"}`` is among them."""
    from clusterable.evaluate import partition_metric_names

    return partition_metric_names()


def _add_clustering(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument(
        "--clustering",
        choices=registry_names("clusterings"),
        default="kmeans",
        help=f"{help} (default: %(default)s)",
    )
    parser.add_argument(
        "--clustering-arg",
        dest="clustering_args",
        action="append",
        type=assignment("--clustering-arg", "eps=0.3"),
        metavar="NAME=VALUE",
        help="an option of the --clustering method, typed as the method declares it, e.g. "
        "eps=0.3 or k_graph=20 for aas, min_cluster_size=10 for hdbscan, n_init=20 for kmeans "
        "(repeatable)",
    )


def command_evaluate(args: argparse.Namespace) -> int:
    """Run ``clusterable evaluate`` with the parsed ``args``; its exit status."""
    from clusterable.data import labelled_mask
    from clusterable.evaluate.registry import needs_of, select_metrics
    from clusterable.metric_table import format_metric_table, partition_heading
    from clusterable.recipe import score_test_table
    from clusterable.train.answerable import Answerable

    check_outputs(
        args,
        Output("json", "--json", JSON, "the table is"),
        Output("report", "--report", HTML, "the page is"),
    )
    asked, knn_asked = knn_of_metrics(args.metrics)
    asked, classifier_asked = classifier_of_metrics(asked)
    options = clustering_options(args.clustering, args.clustering_args)
    if Path(args.source).suffix == ".npy":  # saved embeddings: no run to read these from
        if knn_asked is not None:
            _refuse_of_saved_embeddings(
                knn_asked.spelled,
                "k-NN accuracy votes among a run's training items",
                "precision@1, the leave-one-out 1-NN",
            )
        if classifier_asked:
            _refuse_of_saved_embeddings(
                CLASSIFICATION_ACCURACY,
                "the accuracy of a run's trained classifier",
                "knn@K of the run",
            )
    # A run's default table is its test table's (`score_test_table`, the one owner): k-NN
    # accuracy from its training items, and a coarse run's scores against the fine classes.
    reference: list[tuple[KnnReference | None, list[str]]] = []

    def before_embedding(run: TrainedRun, split: LabelledDataset) -> None:
        check_counts(args, split)
        check_classes(split.labels, f"the {split.name} items")
        if classifier_asked:
            reference.append(classifier_reference(run, split, args, knn_asked))
        elif args.metrics is None or knn_asked is not None:
            # The default table scores the trained classifier too, where the loss has one.
            scored = args.metrics is None and has_classifier(run)
            reference.append(knn_to_score(run, split, args, knn_asked, classifier=scored))

    source = embeddings_of(args, before_embedding=before_embedding, scores=True)
    if source.run is None:  # saved arrays: their labels file, named
        check_classes(source.labels, f"labels file {source.labels_file}")
    keep = labelled_mask(source.labels)
    embeddings, labels = source.embeddings[keep], source.labels[keep]
    queries = query_roles(args, source)
    queries = None if queries is None else queries[keep]
    metrics, ks, notes = table_asked(args, asked, source, labels, queries)
    k = None
    if metrics != [] and "partition" in needs_of(select_metrics(metrics)):  # in its words
        k = clusters_to_ask(args.clustering, args.n_clusters, labels, len(embeddings))
    knn, knn_notes = reference[0] if reference else (None, [])
    notes = [*notes, *knn_notes]
    fine = source.fine_labels[keep] if args.metrics is None else None
    table = score_test_table(
        embeddings,
        labels,
        Answerable(metrics, ks, notes),
        seed_of(args, source),
        knn=knn,
        fine_labels=fine,
        queries=queries,
        clustering=args.clustering,
        n_clusters=k,
        device=args.device,
        clustering_options=options,
        # The run's trained classifier scores as in its own table (the default table), or asked.
        classifier=(
            source.run.loss
            if source.run is not None and (args.metrics is None or classifier_asked)
            else None
        ),
    )
    heading = f"evaluated: {len(labels)} items"
    if table.partition is not None:  # the partition the scores were computed on
        heading = partition_heading(table.partition, len(labels), "evaluated")
    if queries is not None:
        heading += f"; retrieval: {int(queries.sum())} queries ranking the gallery"
    print(format_metric_table(table, heading, notes=notes))
    write_json(table, args.json)
    if args.report:
        write_evaluation_page(args, source, table, keep, queries, heading)
    return 0


def check_counts(args: argparse.Namespace, split: LabelledDataset) -> None:
    """``--ks`` and ``--n-clusters`` against the labelled items of ``split``, before a run
    embeds it: K beyond a query's candidates, or more clusters than items, is refused now rather
    than after the embedding."""
    from clusterable.cluster._validation import check_n_clusters
    from clusterable.data import labelled_mask
    from clusterable.evaluate._inputs import check_ks

    keep = labelled_mask(split.labels)
    items = int(keep.sum())
    if args.ks is not None and args.metrics is None:  # the default table's Recall@K
        roles = split.is_query
        candidates = items - 1 if roles is None else int((~roles[keep]).sum())
        check_ks(tuple(int(value) for value in args.ks.split(",")), candidates)
    if isinstance(args.n_clusters, int):
        check_n_clusters(args.n_clusters, items)


def _refuse_of_saved_embeddings(metric: str, needs: str, instead: str) -> NoReturn:
    """Refuse ``--metrics metric`` of saved embeddings: it ``needs`` what only a run holds."""
    raise ValueError(
        f"--metrics {metric}: {needs}, which saved embeddings do not hold; evaluate the run "
        f"instead (clusterable evaluate RUN --metrics {metric}), or ask {instead}"
    )


#: The k-NN accuracy that ``evaluate --metrics`` scores from a run's training items, as
#: ``knn@K``; the bare ``knn@k`` takes the K of the run's own test table.
KNN_METRIC = "knn@k"


class KnnAsked(NamedTuple):
    """The k-NN accuracy ``--metrics`` asks: its ``ks``, and whether the bare ``knn@k`` asks
    the test table's own too (``defaults``); ``spelled`` as given."""

    ks: tuple[int, ...]
    defaults: bool
    spelled: str


def knn_of_metrics(metrics: list[str] | None) -> tuple[list[str] | None, KnnAsked | None]:
    """``--metrics`` parted into the registry's metrics (None: the default table) and the k-NN
    accuracy asked (None: not asked)."""
    if metrics is None:
        return None, None
    knn = [name for name in metrics if name.startswith(KNN_METRIC[:-1])]
    if not knn:
        return metrics, None
    ks = tuple(sorted({int(name.rpartition("@")[2]) for name in knn if name != KNN_METRIC}))
    asked = KnnAsked(ks, KNN_METRIC in knn, " ".join(knn))
    return [name for name in metrics if name not in knn], asked


def knn_to_score(
    run: TrainedRun,
    split: LabelledDataset,
    args: argparse.Namespace,
    asked: KnnAsked | None,
    classifier: bool = False,
) -> tuple[KnnReference | None, list[str]]:
    """The run's k-NN reference for ``split``
    (`clusterable.trained_run.TrainedRun.knn_reference`) with its notes: the test table's ks, or
    those ``--metrics`` asks, which are refused (before any embedding) where the run has no
    training items for ``split`` or fewer than a K. ``classifier``: the run's trained
    classifier is scored beside them (its notes say so)."""
    if asked is not None and asked.ks:
        training = run.training_items()
        count = None if training is None else len(training)
        if count is not None and asked.ks[-1] > count:
            raise ValueError(
                f"--metrics knn@{asked.ks[-1]}: the run has {count} training items to vote; ask "
                f"K up to {count}"
            )
    knn, notes = run.knn_reference(split, args.data, args.split, classifier=classifier)
    if asked is None:
        return knn, notes
    if knn is None:
        raise ValueError(f"--metrics {asked.spelled}: {notes[0]}")
    ks = tuple(sorted({*asked.ks, *(knn.ks if asked.defaults else ())}))
    return knn._replace(ks=ks), notes


def classifier_of_metrics(metrics: list[str] | None) -> tuple[list[str] | None, bool]:
    """``--metrics`` (less its ``knn@K``) parted into the registry's metrics and whether
    ``classification_accuracy``, the run's trained classifier's, is asked."""
    if metrics is None or CLASSIFICATION_ACCURACY not in metrics:
        return metrics, False
    return [name for name in metrics if name != CLASSIFICATION_ACCURACY], True


def classifier_reference(
    run: TrainedRun, split: LabelledDataset, args: argparse.Namespace, knn: KnnAsked | None
) -> tuple[KnnReference | None, list[str]]:
    """The k-NN reference that ``--metrics classification_accuracy`` scores the run's classifier
    by (:func:`knn_to_score`: which items are of the training classes, in its codes), with only
    the ``knn@K`` asked beside it, and its notes: who votes where a ``knn@K`` is asked, and how
    many items are of no training class, which the classifier counts as errors as k-NN accuracy
    does; refused before any embedding where the run's loss has no classifier, and where the
    items have no training class or are the training items."""
    from clusterable.recipe import knn_left_out_reason
    from clusterable.train.config import losses_with_a_classifier, without_classifier

    spelled = f"--metrics {CLASSIFICATION_ACCURACY}"
    if run.loss is None:  # a run of no epochs: its classifier never trained
        raise ValueError(
            f"{spelled}: the accuracy of a run's trained classifier, and this run trained none "
            "(a run of no epochs: its pretrained backbone as it is); ask knn@K"
        )
    lacking = without_classifier(run.loss)
    if lacking is not None:
        raise ValueError(
            f"{spelled}: the accuracy of a run's trained classifier, and this run's loss "
            f"({lacking}) has none; ask it of a run of "
            f"{', '.join(losses_with_a_classifier())}, or ask knn@K"
        )
    if knn is not None:
        reference, notes = knn_to_score(run, split, args, knn, classifier=True)
    else:  # the training items' classes only: none of them is embedded
        reference, notes = run.knn_reference(split, args.data, args.split, voters=False)
    if reference is None:
        why = knn_left_out_reason(notes[0])
        raise ValueError(
            f"{spelled} is scored as the run's test table scores it, on items of the training "
            f"classes that are not the training items, and here {why}"
        )
    return reference, notes


def has_classifier(run: TrainedRun) -> bool:
    """Whether the run's trained loss has a classifier of its own (cross-entropy, center,
    COREL), which its test table scores as ``classification_accuracy``."""
    from clusterable.train.config import without_classifier

    return run.loss is not None and without_classifier(run.loss) is None


def table_asked(
    args: argparse.Namespace,
    asked: list[str] | None,
    source: Embedded,
    labels: np.ndarray,
    queries: np.ndarray | None,
) -> tuple[list[str] | None, tuple[int, ...], list[str]]:
    """``(metrics, ks, notes)`` to evaluate: the registry's metrics ``asked`` (``--metrics``
    less its ``knn@K``) where given; else the run's own test table (its benchmark's Recall@K),
    less what the items cannot answer, each with a note, as the run's table left it out
    (`clusterable.train.answerable`). The k-NN accuracy from a run's training items joins
    without ``--metrics`` (`clusterable.trained_run.TrainedRun.knn_reference`)."""
    from clusterable.evaluate.registry import metric_of_key
    from clusterable.train.answerable import answerable_table

    wanted = source.run.recall_ks if source.run is not None else DEFAULT_KS
    ks = wanted if args.ks is None else tuple(int(value) for value in args.ks.split(","))
    if asked is not None:  # recall@4 is recall@k with K = 4, which joins the Ks
        registered = {name: metric_of_key(name) or name for name in asked}
        named_ks = {int(key.rpartition("@")[2]) for key, name in registered.items() if key != name}
        if named_ks:
            ks = tuple(sorted(named_ks | (set() if args.ks is None else set(ks))))
        return list(dict.fromkeys(registered.values())), ks, []
    if args.ks is not None:
        return None, ks, []
    gallery = None if queries is None else int((~queries).sum())
    table = answerable_table(labels, ks, candidates=gallery)
    return table.metrics, table.ks, table.notes


def query_roles(args: argparse.Namespace, source: Embedded) -> np.ndarray | None:
    """``(n,)`` query flags of the evaluated items: ``--queries FILE``, else the source's own
    (In-Shop's test split, a folder's ``query/`` and ``gallery/``, the ``is_query.npy`` beside
    saved embeddings), else None (leave-one-out)."""
    if args.queries is None and source.dataset is None:
        return roles_beside(Path(args.source), len(source.labels))
    if args.queries is None:
        return source.is_query
    flags = load_array(args.queries, "--queries")
    if flags.dtype != bool or flags.shape != source.labels.shape:
        raise ValueError(
            f"--queries {args.queries} holds {flags.dtype} of shape {flags.shape}; give "
            f"{source.labels.shape[0]} booleans, one per item (True: query, False: gallery), "
            "saved with numpy.save"
        )
    return flags


def add_evaluate(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``evaluate`` verb's parser: its flags, defaults and help."""
    evaluate = verbs(
        "evaluate",
        "score a trained model on a dataset split, or saved embeddings: Recall@K, MAP@R, NMI, F1, "
        "Hungarian accuracy, ARI, V-measure, silhouette (printed in %%); a run's own test split: "
        "its test_metrics.json again",
        "clusterable evaluate emb.npy labels.npy --clustering spectral --json table.json",
        command_evaluate,
        runs=("model", "search", "clustering"),
        seed_of_run=True,
    )
    add_source(evaluate)
    metrics, default = registry_names("metrics"), registry_names("default metrics")
    left_out = [name for name in metrics if name not in default]
    evaluate.add_argument(
        "--metrics",
        nargs="+",
        type=metric_name([*metrics, KNN_METRIC, CLASSIFICATION_ACCURACY]),
        metavar="METRIC",
        help=f"the scores to compute, among {', '.join(metrics)}, or a table's own names "
        "(recall@1, recall@4: the K joins --ks), and for a run knn@K, k-NN accuracy from its "
        "training items, and classification_accuracy, its trained classifier's (cross-entropy, "
        "center, COREL); only what they read is computed (default: all "
        f"but {', '.join(left_out)}; a run's items add knn@1,3,5,7, "
        "and a coarse run's sub-class scores)",
    )
    _add_clustering(evaluate, "partition the cluster scores are computed on")
    evaluate.add_argument(
        "--n-clusters",
        type=n_clusters_flag,
        help="clusters to ask for, or auto (default: the number of classes; aas and hdbscan "
        "find their own)",
    )
    evaluate.add_argument(
        "--ks",
        type=ks_list,
        help="Recall@K list (default: a run's own test table's, e.g. 1,10,100,1000 for SOP; "
        f"{','.join(str(k) for k in DEFAULT_KS)} for saved arrays; without --ks and --metrics, "
        "what a small set cannot answer is left out with a note)",
    )
    evaluate.add_argument(
        "--queries",
        help="a .npy of booleans, one per item: the True items query, each ranking the False "
        "ones (the gallery) for the retrieval scores (default: the split's own query and "
        "gallery, as In-Shop's test split and embed's is_query.npy; else leave-one-out)",
    )
    evaluate.add_argument("--json", help="also write the table to this JSON file")
    evaluate.add_argument(
        "--report",
        metavar="PAGE.html",
        help="also write an HTML page of the table and the verification view: same-class and "
        "other pair distances, the DET curve, and the F1 threshold with its FMR and FNMR (chosen "
        "on a run's validation split for its own test split, else on these items)",
    )
    add_overwrite(evaluate, "replace the files --json and --report name")
    return evaluate


def command_embed(args: argparse.Namespace) -> int:
    """Run ``clusterable embed`` with the parsed ``args``; its exit status. The files of an
    earlier embed in ``--out`` that this one does not write (``is_query.npy`` of a split with
    query and gallery roles, ``model.json`` of a run's embeddings) are removed, so that none
    is read back beside the new embeddings."""
    import numpy as np

    from clusterable.train.run_folder import RunFolderError, check_writable, run_owner

    out = Path(args.out)
    if (out / "run.json").is_file() or run_owner(out / EMBEDDINGS_FILE) is not None:
        raise RunFolderError(
            f"--out {out} is a run folder (or inside one): write the embeddings to a folder "
            "of their own"
        )
    # None of its files a file this command reads; an earlier embed's replaced only when told.
    check_outputs(args, Output("out", "--out", kind="the embeddings are", files=embed_files()))
    if args.items is not None:
        _check_items_flags(args)
    check_writable(out, keep=False)  # a refused source leaves no folder behind
    source = embeddings_of(args) if args.items is None else _embedded_items(args)
    out = check_writable(out)
    np.save(out / EMBEDDINGS_FILE, source.embeddings)
    np.save(out / LABELS_FILE, source.labels)
    np.save(out / FINE_LABELS_FILE, source.fine_labels)
    written = {EMBEDDINGS_FILE, LABELS_FILE, FINE_LABELS_FILE}
    if source.ids is not None:
        np.save(out / IDS_FILE, source.ids)
        written.add(IDS_FILE)
    if source.dataset is not None and source.dataset.class_names:  # read back by index
        np.save(out / CLASS_NAMES_FILE, np.array(source.dataset.class_names, dtype=str))
        written.add(CLASS_NAMES_FILE)
    roles = source.is_query
    if roles is not None:
        np.save(out / ROLES_FILE, roles)  # read back by evaluate
        written.add(ROLES_FILE)
    if source.run is not None:
        source.run.identity(_data_named(args), args.root, args.split).save(out)
        written.add(IDENTITY_FILE)
    why = {
        ROLES_FILE: "these items have no query and gallery roles",
        IDENTITY_FILE: "no run made these",
        IDS_FILE: "saved arrays have no ids",
        CLASS_NAMES_FILE: "saved arrays' classes have no names",
    }
    for name in embed_files():
        if name not in written and (out / name).is_file():
            (out / name).unlink()
            print(f"removed {out / name}, left by an earlier embed ({why.get(name, name)})")
    rows, dim = source.embeddings.shape
    roles_note = "" if roles is None else " (and is_query.npy: the query and gallery roles)"
    ids_note = "" if source.ids is None else ", their ids (ids.npy)"
    print(f"wrote {rows} x {dim} embeddings{ids_note} and labels to {out}{roles_note}")
    return 0


def _data_named(args: argparse.Namespace) -> str | list[str] | None:
    """The data set the embeddings' identity names, for reading their split again (None: the
    run's own): ``--data``, or ``--items`` read as a data set (one folder with ``--split``,
    recorded as ``folder:PATH``); items without a split are no data set's, and are named by
    their paths (a split of None tells the readers so), which
    `clusterable.trained_run.TrainedRun.identity` records absolute, as their ``ids.npy``."""
    if args.items is None:
        return args.data
    if args.split is not None and Path(args.items[0]).is_dir():
        return f"folder:{args.items[0]}"
    return list(args.items)


def _check_items_flags(args: argparse.Namespace) -> None:
    """``--items`` names what the run embeds: refuse the flags that name a data set instead,
    saved arrays (which a run does not embed again) and a file named twice, before any work."""
    if Path(args.source).suffix == ".npy":
        raise ValueError(
            f"--items are embedded by a run, and {args.source} holds embeddings already: give a "
            "run folder or checkpoint"
        )
    if args.labels is not None:
        raise ValueError(
            f"LABELS {args.labels} goes with an embeddings .npy; --items take their labels from "
            "their class folders: drop LABELS, or name it among --items"
        )
    for flag in ("data", "root"):
        if getattr(args, flag) is not None:
            raise ValueError(
                f"--{flag} names a data set to embed, and --items names the items: give one of them"
            )
    check_each_once(args.items, "--items")


def _embedded_items(args: argparse.Namespace) -> Embedded:
    """The ``--items`` (image files, a folder of images, flat or one sub-folder per class, a
    table file) embedded by the run ``args.source`` in its own view, with their ids (file paths,
    or row numbers) and labels (the class folders' codes, -1 for an item without one)."""
    run = load_run(args.source, args)
    items = args.items if len(args.items) > 1 else args.items[0]
    embedded = run.embed(items, split=args.split)
    dataset = embedded.dataset
    print(f"embedded {embedded.source} ({len(dataset)} items) with {run.checkpoint}")
    return Embedded(
        embedded.embeddings,
        dataset.labels,
        dataset.fine_labels,
        dataset,
        run,
        dataset.is_query,
        ids=embedded.ids,
    )


def add_embed(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``embed`` verb's parser: its flags, defaults and help."""
    embed = verbs(
        "embed",
        "write the embeddings of a dataset split, or of your own files (--items), under a trained "
        "model as .npy files",
        "clusterable embed runs/photos --items my-photos/ --out emb/",
        command_embed,
        runs=("model",),
    )
    add_source(embed, items=True)
    embed.add_argument(
        "--items",
        nargs="+",
        metavar="PATH",
        help="embed these with the run instead of a data set's split: image files, a folder of "
        "images (flat, or one sub-folder per class), or a table file; ids.npy names each row's "
        "file",
    )
    embed.add_argument(
        "--out",
        required=True,
        help="folder for embeddings.npy, labels.npy (-1: no label), fine_labels.npy (a coarse "
        "run's fine classes; else the labels), class_names.npy, ids.npy (each row's file path, "
        "or row number), model.json (the run and checkpoint that embedded them) and is_query.npy "
        "(where the items have query and gallery roles)",
    )
    add_overwrite(embed, "replace the files of an earlier embed in --out")
    return embed


def command_cluster(args: argparse.Namespace) -> int:
    """Run ``clusterable cluster`` with the parsed ``args``; its exit status."""
    import numpy as np

    from clusterable import cluster
    from clusterable.cluster import canonical_clustering, clusterer_info
    from clusterable.data import labelled_mask
    from clusterable.evaluate import describe_clustering, evaluate_embeddings, kmeans_rule
    from clusterable.metric_table import clustering_heading, format_metric_table

    written = check_outputs(
        args,
        Output("out", "--out", NPY, "cluster ids are"),
        Output("save", "--save", NPZ, "the partition is"),
        Output("json", "--json", JSON, "the clusters are"),
    )
    out = written["out"]
    assert out is not None  # --out has a default
    options = clustering_options(args.clustering, args.clustering_args)
    embeddings, labels, model_id, ids = _points_to_cluster(args)
    k = clusters_to_ask(args.clustering, args.n_clusters, labels, len(embeddings), announce=True)
    # k-means by the one rule `evaluate` uses too (seeding, restarts), stated under the table;
    # --clustering-arg updates it.
    rule: dict[str, Any] = {}
    if k is not None and canonical_clustering(args.clustering) == "kmeans":
        rule = kmeans_rule(k)
    partition = cluster.fit(
        embeddings, args.clustering, k, seed=args.seed, device=args.device, **{**rule, **options}
    )
    clusters = partition.labels_
    if k == "auto":
        k = partition.n_clusters
        print(f"n_clusters = {k}: chosen by {clusterer_info(args.clustering).auto}")
    if args.save:
        partition.model = model_id  # assign refuses another model's items
        print(f"saved the partition ({partition.RULE}) to {partition.save(args.save)}")
    np.save(out, clusters)
    found = len(set(clusters.tolist()) - {-1})
    print(f"{found} clusters, {int((clusters < 0).sum())} noise points; wrote {out}")
    write_json(
        {
            "method": canonical_clustering(args.clustering),
            "n_clusters": found,
            "items": items_in_clusters(ids, clusters),
        },
        args.json,
    )
    if labels is not None:
        keep = labelled_mask(labels)
        table = evaluate_embeddings(
            embeddings[keep],
            labels[keep],
            metrics=partition_scores(),
            clustering=clusters[keep],
            seed=args.seed,
            device=args.device,
        )
        how = describe_clustering(partition.method, {**rule, **options})
        noise = int((clusters[keep] < 0).sum())
        heading = clustering_heading(
            args.clustering, k, found, int(keep.sum()), "scored", how, noise
        )
        print(format_metric_table(table, heading))
    return 0


class _PointsToCluster(NamedTuple):
    """What ``cluster`` partitions: ``(n, d)`` embeddings, ``(n,)`` labels to score by (None:
    unscored), the checksum of the model that made them (None: unknown) and ``(n,)`` item ids
    (file paths, or row numbers)."""

    embeddings: np.ndarray
    labels: np.ndarray | None
    model_id: str | None
    ids: np.ndarray


def _points_to_cluster(args: argparse.Namespace) -> _PointsToCluster:
    """A saved ``.npy`` (its ``--labels``, the model its ``model.json`` names, the ids in its
    ``ids.npy``), or a split a run embeds in its own view (its labels unless ``--labels``). The
    labels are read and checked (their count, two classes or more) before a run embeds the split
    and before any clustering."""
    from clusterable.trained_run import ModelIdentity

    source = Path(args.embeddings)
    if source.is_dir():
        run = load_run(source, args)
        dataset = run.split(split_of_run(run, args), args.data, args.root)
        labels = _cluster_labels(args, len(dataset), dataset.labels, f"the {dataset.name} items")
        embedded = run.embed(dataset)
        return _PointsToCluster(embedded.embeddings, labels, run.model_id, embedded.ids)
    for flag in ("data", "root", "split"):
        if getattr(args, flag) is not None:
            raise ValueError(
                f"--{flag} picks the items a run embeds; {source} holds embeddings already: "
                f"drop --{flag}, or give a run folder"
            )
    embeddings = load_embeddings(source)
    identity = ModelIdentity.beside(source)
    labels = _cluster_labels(args, len(embeddings), None, "")
    model_id = None if identity is None else identity.model
    return _PointsToCluster(embeddings, labels, model_id, ids_beside(source, len(embeddings)))


def _cluster_labels(
    args: argparse.Namespace, rows: int, own: np.ndarray | None, own_name: str
) -> np.ndarray | None:
    """The labels ``cluster`` scores its partition by: ``--labels`` (``rows`` of them), else the
    split's ``own`` (named ``own_name``), else None (nor for a split of unlabelled items: an
    unsupervised run's folder without classes); refused with fewer than two classes."""
    from clusterable.data import labelled_mask

    if args.labels is not None:
        labels = load_labels(args.labels, rows, "--labels")
        check_classes(labels, f"--labels {args.labels}")
        return labels
    if own is None or not labelled_mask(own).any():
        return None
    check_classes(own, own_name)
    return own


def add_cluster(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``cluster`` verb's parser: its flags, defaults and help."""
    cluster = verbs(
        "cluster",
        "partition saved embeddings, or a split a trained run embeds: "
        f"{', '.join(registry_names('clustering labels'))}",
        "clusterable cluster emb.npy --clustering spectral --n-clusters 10 --labels labels.npy",
        command_cluster,
        runs=("model", "clustering"),
    )
    cluster.add_argument(
        "embeddings",
        help="(n, d) .npy file, or a run folder whose model embeds a split (scored by its labels)",
    )
    cluster.add_argument("--data", help="with a run: dataset to embed (default: the run's)")
    cluster.add_argument("--root", help="with a run: folder of the dataset's files")
    cluster.add_argument(
        "--split",
        help="with a run: dataset split (default: test; train, every item, for a run on "
        "unlabelled items, which has no test split)",
    )
    _add_clustering(cluster, "the partition method")
    cluster.add_argument(
        "--n-clusters",
        type=n_clusters_flag,
        help="number of clusters, or auto (default: the classes in --labels, else auto for "
        "kmeans and spectral; aas and hdbscan find their own)",
    )
    # The names of earlier releases, kept working; `evaluate` and `cluster` now share one pair.
    cluster.add_argument("--method", dest="clustering", help=argparse.SUPPRESS)
    cluster.add_argument("--k", dest="n_clusters", type=n_clusters_flag, help=argparse.SUPPRESS)
    cluster.add_argument(
        "--labels", help="a .npy file of labels (integers or text): also score the partition"
    )
    cluster.add_argument(
        "--out", default="clusters.npy", help="cluster ids .npy (default: %(default)s)"
    )
    cluster.add_argument(
        "--json",
        help="also write each item's id (its file, from the ids.npy beside the embeddings, or "
        "its row number) and cluster to this .json file",
    )
    cluster.add_argument(
        "--save", help="also save the partition, to assign new items later (`clusterable assign`)"
    )
    add_overwrite(cluster, "replace the files --out, --json and --save name")
    return cluster


#: The figures ``plot`` writes: the t-SNE map, a run's training curves, an image run's
#: retrieval grid.
TSNE_FILE, CURVES_FILE, RETRIEVAL_FILE = "tsne.png", "curves.png", "retrieval.png"
PLOT_FILES = (TSNE_FILE, CURVES_FILE, RETRIEVAL_FILE)


def command_plot(args: argparse.Namespace) -> int:
    """Run ``clusterable plot`` with the parsed ``args``; its exit status. ``--out`` follows
    the rule of every output (`check_outputs`: an earlier plot's figures are replaced only with
    ``--overwrite``); without it, the figures go to the folder of their source's that ``plot``
    keeps for them (:func:`plots_folder`), rewritten each time."""
    from clusterable.plots import plot_retrieval_grid, plot_training_curves, plot_tsne
    from clusterable.train.run_folder import check_writable

    if args.out:  # checked before any work; a refused source leaves no folder behind
        check_outputs(args, Output("out", "--out", kind="the figures are", files=PLOT_FILES))
        check_writable(args.out, keep=False)
    source = embeddings_of(args)
    out = check_writable(args.out or plots_folder(source, args.source))
    dataset = source.dataset
    names = dataset.class_names if dataset is not None else None
    fine_names = dataset.fine_class_names if dataset is not None else None
    written = [
        plot_tsne(
            source.embeddings,
            source.labels,
            out / TSNE_FILE,
            subclasses=source.fine_labels,
            seed=seed_of(args, source),
            class_names=names,
            subclass_names=fine_names,
        )
    ]
    run_folder = None if source.run is None else source.run.folder
    log = None if run_folder is None else run_folder / "log.jsonl"
    if log is not None and log.is_file():
        written.append(plot_training_curves(log, out / CURVES_FILE))
    if dataset is not None and len(dataset.input_shape) == 3:
        images, _ = dataset.features()
        written.append(
            plot_retrieval_grid(
                images,
                source.embeddings,
                source.labels,
                out / RETRIEVAL_FILE,
                seed=seed_of(args, source),
                class_names=names,
            )
        )
    for path in written:
        print(f"wrote {path}")
    return 0


def plots_folder(source: Embedded, given: str) -> Path:
    """Where ``plot`` writes by default: ``plots/`` in the run folder, else beside the array."""
    if source.run is not None and source.run.folder is not None:
        return source.run.folder / "plots"
    return Path(given).parent / "plots"


def add_plot(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``plot`` verb's parser: its flags, defaults and help."""
    plot = verbs(
        "plot",
        "PNG figures: t-SNE by class and sub-class, training curves, retrieval grid for images",
        "clusterable plot runs/digits-lifted --out plots/",
        command_plot,
        seed_of_run=True,
        runs=("model",),
    )
    add_source(plot)
    plot.add_argument(
        "--out",
        help="folder for the PNG files (default: plots/ in the run folder, or beside the "
        "embeddings .npy, rewritten each time)",
    )
    add_overwrite(plot, "replace the figures of an earlier plot in --out")
    return plot
