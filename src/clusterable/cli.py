"""The ``clusterable`` command line: demo, train, evaluate, embed, cluster, plot.

Examples
--------
    clusterable demo
    clusterable train --data fashion-mnist --loss msdnn --loss-arg sigma=0.5 --label-view coarse \\
        --model lenet --epochs 10 --out runs/msdnn
    clusterable evaluate runs/msdnn --json table.json
    clusterable evaluate emb.npy labels.npy --clustering spectral
    torchrun --nproc_per_node 2 -m clusterable train --data digits --loss lifted --out runs/ddp
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from clusterable import __version__
from clusterable.cli_use import add_use_verbs, write_model_identity
from clusterable.cluster import available_clusterings, canonical_clustering, takes_n_clusters
from clusterable.data import available_datasets, labelled_mask
from clusterable.device import device_scope, resolve_device
from clusterable.losses import available_losses
from clusterable.metric_table import clustering_heading, format_metric_table
from clusterable.models import available_models
from clusterable.train.checkpoint import CheckpointWriteError
from clusterable.train.config import SAMPLERS
from clusterable.train.run_folder import (
    RunFolderError,
    check_parent_writable,
    check_writable,
    describe_os_error,
)


# ---------------------------------------------------------------------------------------------
# helpers
def _load_array(path: Path, what: str) -> np.ndarray:
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


def _parse_assignments(pairs: list[str], flag: str) -> dict[str, Any]:
    """``["margin=0.5", "mining=all"]`` -> ``{"margin": 0.5, "mining": "all"}`` (YAML values)."""
    values = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"{flag} takes name=value, got {pair!r}; e.g. {flag} margin=0.5")
        values[name.replace("-", "_")] = yaml.safe_load(text)
    return values


def _write_json(table: dict[str, Any], path: str | None) -> None:
    if path:
        Path(path).write_text(json.dumps(table, indent=2) + "\n")
        print(f"wrote {path}")


def _label_codes(labels: np.ndarray) -> np.ndarray:
    """Integer labels as they are; any other labels (text) numbered in sorted order."""
    if labels.dtype.kind in "iu":
        return labels.astype(np.int64)
    if labels.dtype.kind == "f" and np.all(np.isfinite(labels)) and np.all(labels == labels // 1):
        return labels.astype(np.int64)
    if labels.dtype.kind == "O" and any(value is None for value in labels):
        raise ValueError("labels hold None; give every item a label")
    _, codes = np.unique(labels.astype(str), return_inverse=True)
    return codes.astype(np.int64)


def _embeddings_of(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """Embeddings, labels, fine labels and dataset from ``EMB.npy LABELS.npy`` or a checkpoint."""
    source = Path(args.source)
    if source.suffix == ".npy":
        if args.labels is None:
            raise ValueError(
                f"{source} is an array: give its labels too (clusterable VERB EMB LAB)"
            )
        embeddings = _load_array(source, "embeddings")
        labels = _load_array(Path(args.labels), "labels")
        if labels.ndim != 1 or len(labels) != len(embeddings):
            raise ValueError(
                f"labels has shape {labels.shape} but embeddings has {len(embeddings)} rows; "
                "give one label per embedding row"
            )
        labels = _label_codes(labels)
        return embeddings, labels, labels, None
    from clusterable.data import load_dataset
    from clusterable.recipe import load_trained
    from clusterable.train import embed_dataset
    from clusterable.train.checkpoint import load_run_record

    model, _, spec, checkpoint = load_trained(source)
    data = args.data or spec.data
    dataset = load_dataset(
        data,
        root=args.root or (spec.root if args.data is None else None),
        split=args.split,
        labels=spec.labels,
        image_size=spec.image_size,
        channels=spec.channels,
    )
    trained_shape = tuple(load_run_record(checkpoint)["input_shape"])
    if dataset.input_shape != trained_shape:
        raise ValueError(
            f"the run {source} was trained on {spec.data}, items of shape {trained_shape}; "
            f"{data} has items of shape {dataset.input_shape}, which its model cannot embed: "
            "give data of the run's shape, or train a run on this data"
        )
    print(f"embedding {dataset.name} ({len(dataset)} items, {dataset.source}) with {checkpoint}")
    embeddings, labels = embed_dataset(model.to(resolve_device("auto")), dataset)
    return embeddings, labels, dataset.fine_labels, dataset


# ---------------------------------------------------------------------------------------------
# verbs
def command_demo(args: argparse.Namespace) -> int:
    from clusterable.demo import run_demo

    run_demo(check_writable(args.out), quick=args.quick, seed=args.seed)
    return 0


#: ``clusterable train`` flags that set a RunSpec field, and those that set a TrainConfig field.
SPEC_FLAGS = (
    "data",
    "root",
    "labels",
    "image_size",
    "channels",
    "loss",
    "model",
    "embedding_dim",
    "val_fraction",
    "memory_size",
)
CONFIG_FLAGS = (
    "epochs",
    "batch_size",
    "lr",
    "sampler",
    "items_per_class",
    "chunk_size",
    "patience",
    "device",
    "seed",
)


def _given_settings(
    args: argparse.Namespace, file_values: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run and training settings this command names (YAML file, then flags), untyped.

    ``file_values``: the ``--config`` file's mapping when the caller has read it already.
    """
    spec = _config_file(args) if file_values is None else file_values
    if "search" in spec:
        raise ValueError(
            f"{args.config} holds a search: mapping: run it with `clusterable tune --config`"
        )
    train = dict(spec.pop("train", {}) or {})
    for name in SPEC_FLAGS:
        if getattr(args, name) is not None:
            spec[name] = getattr(args, name)
    for name in ("normalize", "autoencoder", "unsupervised"):
        if getattr(args, name):
            spec[name] = True
    for flag, key in (("loss_arg", "loss_args"), ("model_arg", "model_args")):
        given = _parse_assignments(getattr(args, flag), f"--{flag.replace('_', '-')}")
        merged = {**spec.get(key, {}), **given}
        if merged:
            spec[key] = merged
    for name in CONFIG_FLAGS:
        if getattr(args, name) is not None:
            train[name] = getattr(args, name)
    train.update(_parse_assignments(args.set, "--set"))
    if getattr(args, "no_progress", False):  # train only: tune trains quietly
        train["progress"] = False
    return spec, train


def _config_file(args: argparse.Namespace) -> dict[str, Any]:
    """The mapping of the ``--config`` YAML file (empty without one)."""
    if not args.config:
        return {}
    values = yaml.safe_load(Path(args.config).read_text()) or {}
    if not isinstance(values, dict):
        raise ValueError(f"{args.config} must hold a mapping of setting: value")
    return values


def _resumed_settings(
    out: Path, spec_given: dict[str, Any], train_given: dict[str, Any]
) -> tuple[Any, Any]:
    """The run's own stored settings; the ones named again must agree (epochs may grow)."""
    from clusterable.recipe import RunSpec
    from clusterable.train import TrainConfig
    from clusterable.train.run_folder import (
        CHANGEABLE_ON_RESUME,
        check_resume_settings,
        read_run_record,
    )

    record = read_run_record(out)
    stored_train = record["config"]
    stored_spec = asdict(RunSpec.from_dict(record["spec"]))
    stored_config = TrainConfig.from_dict(stored_train).to_dict()
    wanted_spec = asdict(RunSpec.from_dict({**record["spec"], **spec_given}))
    wanted_config = TrainConfig.from_dict({**stored_train, **train_given}).to_dict()
    check_resume_settings(stored_spec, wanted_spec, spec_given, "run setting")
    check_resume_settings(
        stored_config, wanted_config, train_given, "training setting", CHANGEABLE_ON_RESUME
    )
    config = TrainConfig.from_dict(
        {**stored_train, **{k: wanted_config[k] for k in train_given}, "verbose": True}
    )
    return RunSpec.from_dict(record["spec"]), config


def command_train(args: argparse.Namespace) -> int:
    from clusterable.recipe import RunSpec, train_run
    from clusterable.train import TrainConfig
    from clusterable.train.distributed import end_distributed
    from clusterable.train.run_folder import default_run_folder, interrupted_message

    spec_given, train_given = _given_settings(args)
    spec = RunSpec.from_dict(spec_given)
    out = Path(args.out) if args.out else default_run_folder(spec.data, spec.loss)
    if args.resume:
        spec, config = _resumed_settings(out, spec_given, train_given)
    else:
        config = TrainConfig.from_dict({**train_given, "verbose": True})
    main_process = os.environ.get("RANK", "0") == "0"  # under torchrun, one process reports
    try:
        train_run(spec, config, out=out, resume=args.resume, overwrite=args.overwrite)
    except KeyboardInterrupt:
        if main_process:
            print(f"\nclusterable train: {interrupted_message(out)}", file=sys.stderr)
        return 130
    end_distributed()  # under torchrun: every process has trained and scored the test split
    if main_process:
        print(f"run folder: {out}")
        if args.report:
            from clusterable.reports import write_run_report

            print(f"report (open it in a browser): {write_run_report(out, seed=config.seed)}")
    return 0


def command_tune(args: argparse.Namespace) -> int:
    from clusterable.recipe import RunSpec
    from clusterable.train import TrainConfig
    from clusterable.train.run_folder import check_writable, default_run_folder
    from clusterable.tune import parse_parameter, parse_space, tune

    file_values = _config_file(args)
    search = file_values.pop("search", None) or {}
    spec_given, train_given = _given_settings(args, file_values)
    space = [parse_parameter(text) for text in args.param] + parse_space(search)
    spec = RunSpec.from_dict(spec_given)
    config = TrainConfig.from_dict(train_given)
    default = default_run_folder(spec.data, spec.loss)
    out = check_writable(args.out or default.with_name(f"tune-{default.name}"))
    print(
        f"searching {', '.join(p.describe() for p in space)} for {spec.loss} on {spec.data}: "
        f"{args.trials} trials, {args.folds} {args.protocol} folds of the training split, "
        f"maximising {args.metric}; study in {out}"
    )
    result = tune(
        spec,
        space,
        config=config,
        folds=args.folds,
        protocol=args.protocol,
        trials=args.trials,
        metric=args.metric,
        out=out,
        seed=config.seed,
    )
    values = ", ".join(
        f"{key.split('.', 1)[1]}={value:.4g}"
        if isinstance(value, float)
        else f"{key.split('.', 1)[1]}={value}"
        for key, value in result.best_values.items()
    )
    print(
        f"best: {values} ({args.metric} {result.best_score:.4f}, mean over {args.folds} folds; "
        f"{result.completed} trials completed, {result.pruned} pruned)\n"
        f"wrote {out / 'best.yaml'} and the search plot {out / 'search.png'}; train it with "
        f"`clusterable train --config {out / 'best.yaml'}`"
    )
    return 0


def command_evaluate(args: argparse.Namespace) -> int:
    from clusterable.evaluate import evaluate_embeddings
    from clusterable.evaluate.table import partition

    if args.json:
        check_parent_writable(args.json)
    embeddings, labels, _, _ = _embeddings_of(args)
    keep = labelled_mask(labels)
    embeddings, labels = embeddings[keep], labels[keep]
    counted = takes_n_clusters(args.clustering)
    k = (args.n_clusters or len(np.unique(labels))) if counted else None
    if not counted and args.n_clusters is not None:
        raise ValueError(
            f"--clustering {args.clustering} chooses its own number of clusters: drop --n-clusters"
        )
    if canonical_clustering(args.clustering) == "affinity_propagation":
        print(
            f"affinity propagation on {len(embeddings)} items: O(n^2) memory and time, "
            "may take minutes"
        )
    clusters = partition(embeddings, args.clustering, k, args.seed)
    table = evaluate_embeddings(
        embeddings,
        labels,
        clustering=clusters,
        ks=tuple(int(k) for k in args.ks.split(",")),
        seed=args.seed,
    )
    found = len(set(clusters.tolist()) - {-1})
    heading = clustering_heading(args.clustering, k, found, len(labels), "evaluated")
    print(format_metric_table(table, heading))
    _write_json(table, args.json)
    return 0


def command_embed(args: argparse.Namespace) -> int:
    out = check_writable(args.out)
    embeddings, labels, fine_labels, _ = _embeddings_of(args)
    np.save(out / "embeddings.npy", embeddings)
    np.save(out / "labels.npy", labels)
    np.save(out / "fine_labels.npy", fine_labels)
    if Path(args.source).suffix != ".npy":
        from clusterable.embedder import Embedder

        embedder = Embedder.from_run(args.source)
        where = {"data": args.data, "root": args.root, "split": args.split}
        write_model_identity(out, embedder.model_id, embedder.run, **where)
    print(f"wrote {embeddings.shape[0]} x {embeddings.shape[1]} embeddings and labels to {out}")
    return 0


def command_cluster(args: argparse.Namespace) -> int:
    from clusterable import cluster

    embeddings = _load_array(Path(args.embeddings), "embeddings")
    labels = None
    if args.labels:
        labels = _label_codes(_load_array(Path(args.labels), "labels"))
        if len(labels) != len(embeddings):
            raise ValueError(
                f"--labels holds {len(labels)} labels but the embeddings {len(embeddings)} rows; "
                "give one label per row"
            )
    check_parent_writable(args.out)
    if args.save:
        check_parent_writable(args.save)
    k = args.n_clusters
    method = canonical_clustering(args.clustering)
    if not takes_n_clusters(method):
        if k is not None:
            raise ValueError(
                f"--clustering {args.clustering} chooses its own number of clusters (it marks "
                "noise too): drop --n-clusters, or use another method to ask for k clusters"
            )
    elif k is None:
        if labels is None:
            raise ValueError(
                f"--clustering {args.clustering} needs the number of clusters: add --n-clusters N"
            )
        k = len(np.unique(labels[labelled_mask(labels)]))
        print(f"n_clusters = {k}: the number of classes in --labels")
    if method == "affinity_propagation":
        print(
            f"affinity propagation on {len(embeddings)} points: O(n^2) memory and time, "
            "may take minutes"
        )
    partition = cluster.fit(embeddings, method, k, seed=args.seed)
    clusters = partition.labels_
    if args.save:
        print(f"saved the partition ({partition.RULE}) to {partition.save(args.save)}")
    out = Path(args.out)
    np.save(out, clusters)
    found = len(set(clusters.tolist()) - {-1})
    print(f"{found} clusters, {int((clusters < 0).sum())} noise points; wrote {out}")
    if labels is not None:
        from clusterable.evaluate import ari, cluster_accuracy, nmi, pairwise_f1

        precision, recall, f1 = pairwise_f1(labels, clusters)
        table = {
            "nmi": nmi(labels, clusters),
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "accuracy": cluster_accuracy(labels, clusters),
            "ari": ari(labels, clusters),
        }
        heading = clustering_heading(args.clustering, k, found, len(labels), "scored")
        print(format_metric_table(table, heading))
    return 0


def command_plot(args: argparse.Namespace) -> int:
    from clusterable.plots import plot_retrieval_grid, plot_training_curves, plot_tsne

    out = check_writable(args.out)
    embeddings, labels, fine_labels, dataset = _embeddings_of(args)
    names = dataset.class_names if dataset is not None else None
    fine_names = dataset.fine_class_names if dataset is not None else None
    written = [
        plot_tsne(
            embeddings,
            labels,
            out / "tsne.png",
            subclasses=fine_labels,
            seed=args.seed,
            class_names=names,
            subclass_names=fine_names,
        )
    ]
    log = Path(args.source) / "log.jsonl"
    if log.is_file():
        written.append(plot_training_curves(log, out / "curves.png"))
    if dataset is not None and len(dataset.input_shape) == 3:
        images, _ = dataset.features()
        grid = out / "retrieval.png"
        written.append(
            plot_retrieval_grid(images, embeddings, labels, grid, seed=args.seed, class_names=names)
        )
    for path in written:
        print(f"wrote {path}")
    return 0


def command_reproduce(args: argparse.Namespace) -> int:
    from clusterable.reproduce import Budget, run_all, run_experiment, write_summary

    mode = "quick" if args.quick else "full" if args.full else "default"
    out = Path(args.out)
    if args.experiment == "all":
        if args.from_json:
            reports = write_summary(out)
        else:
            reports = run_all(mode, args.seeds, out, first_seed=args.seed)
        print(f"wrote {out.with_suffix('.md')} and {len(reports)} experiment folders in {out}")
        return 0
    folder = out / args.experiment
    budget = Budget(mode=mode, seeds=args.seeds, folder=folder, first_seed=args.seed)
    report = run_experiment(args.experiment, budget)
    print(report.markdown())
    print(f"wrote {folder / 'results.md'} and {folder / 'results.json'}")
    return 0


# ---------------------------------------------------------------------------------------------
# parser
def _add_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="a run folder or checkpoint, or an embeddings .npy file")
    parser.add_argument(
        "labels", nargs="?", help="labels .npy, integers or text (when source is an .npy file)"
    )
    parser.add_argument("--data", help="dataset to embed (default: the one the run trained on)")
    parser.add_argument(
        "--root", help="folder of the dataset's files (default: the run's, for the run's data)"
    )
    parser.add_argument("--split", default="test", help="dataset split (default: %(default)s)")


def _defaults_of(cls: type) -> dict[str, Any]:
    return {f.name: f.default for f in fields(cls)}


def add_run_settings(
    parser: argparse.ArgumentParser, spec_default: dict[str, Any], config_default: dict[str, Any]
) -> None:
    """The flags that describe a run (data, model, loss, training settings): `train`'s and
    `tune`'s, read back by :func:`_given_settings`."""

    def setting(flag: str, default: Any, text: str, **options: Any) -> None:
        parser.add_argument(flag, help=f"{text} (default: {default})", **options)

    parser.add_argument("--config", help="YAML run file: RunSpec keys and a `train:` mapping")
    setting(
        "--data",
        spec_default["data"],
        f"dataset: {', '.join(available_datasets())}, or folder:PATH (one sub-folder of images "
        "per class) or table:PATH (.npz, .csv, .npy); see the README's data rules",
    )
    parser.add_argument(
        "--root",
        help="folder of the dataset's files; when given, the only place looked in (default: "
        "/usr/share/datasets/NAME, then ~/.cache/clusterable/NAME)",
    )
    setting(
        "--label-view",
        spec_default["labels"],
        "which labels train: fine (the dataset's classes) or coarse (MsDNN's merged classes of a "
        "10-class set: 0-4 -> 0, 5-9 -> 1; the fine classes then score sub-class clustering)",
        dest="labels",
        choices=("fine", "coarse"),
    )
    setting(
        "--image-size",
        "a folder's own image size; 64 for cub200/cars196/sop",
        "resize image files to this square",
        type=int,
    )
    setting(
        "--channels",
        "1 when a folder's images are all grayscale, else 3",
        "read image files as 1 (grayscale) or 3 (RGB) channels",
        type=int,
        choices=(1, 3),
    )
    setting("--loss", spec_default["loss"], "the loss", choices=available_losses())
    parser.add_argument(
        "--loss-arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a keyword of the loss, typed as the loss declares it (repeatable)",
    )
    setting(
        "--model",
        spec_default["model"],
        f"the network: {', '.join(available_models())}, or timm:NAME / torchvision:NAME",
    )
    parser.add_argument(
        "--model-arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a keyword of the model, typed as the model declares it; lists comma-separated, "
        "e.g. channels=16,16,32,32,64,64 (repeatable)",
    )
    setting("--embedding-dim", spec_default["embedding_dim"], "embedding size", type=int)
    parser.add_argument("--normalize", action="store_true", help="l2-normalise embeddings")
    setting(
        "--memory-size",
        spec_default["memory_size"],
        "cross-batch memory (XBM): past embeddings kept as extra partners of a pair loss",
        type=int,
    )
    parser.add_argument(
        "--autoencoder",
        action="store_true",
        help="MsDNN-AE: add a decoder; its term's weight is --loss-arg reconstruction_weight=W "
        "(default 1)",
    )
    parser.add_argument(
        "--unsupervised",
        action="store_true",
        help="OPML: train on t-SNE + AAS pseudo-labels; labels only evaluate",
    )
    setting(
        "--val-fraction",
        spec_default["val_fraction"],
        "share of each training class held out for validation",
        type=float,
    )
    setting("--epochs", config_default["epochs"], "passes over the training set", type=int)
    setting("--batch-size", config_default["batch_size"], "items per batch", type=int)
    setting("--lr", config_default["lr"], "learning rate", type=float)
    setting(
        "--sampler",
        config_default["sampler"],
        "how batches are drawn",
        choices=SAMPLERS,
    )
    setting(
        "--items-per-class",
        config_default["items_per_class"],
        "items of each class in a class-balanced batch",
        type=int,
    )
    setting(
        "--chunk-size",
        "none: the whole batch at once",
        "DSCL large-batch trick: embed in chunks of this many items",
        type=int,
    )
    setting(
        "--patience",
        "none: never stop early",
        "stop after this many evaluations without improvement",
        type=int,
    )
    setting("--device", config_default["device"], DEVICE_HELP)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="any TrainConfig field, typed as the field declares it (repeatable)",
    )


def _experiment_choices() -> list[str] | None:
    """``all`` and the registered experiments; None (any name) when the reproductions cannot be
    imported, so that ``reproduce`` itself says which extra is missing."""
    try:
        from clusterable.reproduce import EXPERIMENTS
    except ImportError:
        return None
    return ["all", *EXPERIMENTS]


#: The verbs that run a model, a search or a clustering, and so take ``--device``.
DEVICE_VERBS = frozenset(
    {"train", "evaluate", "embed", "index", "search", "cluster", "assign", "tune", "demo"}
    | {"reproduce"}
)

DEVICE_HELP = (
    "where models, searches and k-means run: auto (CUDA, then MPS, then CPU), cpu, cuda, "
    "cuda:N or mps"
)


def build_parser() -> argparse.ArgumentParser:
    from clusterable.recipe import RunSpec
    from clusterable.train.config import TrainConfig

    spec_default, config_default = _defaults_of(RunSpec), _defaults_of(TrainConfig)
    parser = argparse.ArgumentParser(
        prog="clusterable",
        description="Clustering-oriented deep metric learning.",
        epilog="Run `clusterable VERB --help` for a verb's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"clusterable {__version__}")
    verbs = parser.add_subparsers(dest="command", required=True, metavar="VERB")

    def verb(name: str, help: str, example: str, handler: Any) -> argparse.ArgumentParser:
        # `help` is %-formatted by argparse in the verb list, the description is printed as is.
        sub = verbs.add_parser(
            name, help=help, description=help.replace("%%", "%"), epilog=f"example: {example}"
        )
        sub.set_defaults(handler=handler)
        if name in DEVICE_VERBS and name not in ("train", "tune"):  # theirs is a run setting
            sub.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default: auto)")
        if name in ("train", "tune"):
            seed_help = f"seed of every random step (default: {config_default['seed']})"
            sub.add_argument("--seed", type=int, default=None, help=seed_help)
        else:
            sub.add_argument(
                "--seed", type=int, default=0, help="seed of random steps (default: %(default)s)"
            )
        return sub

    demo = verb(
        "demo",
        "train every loss on the bundled digits, evaluate each, print and write one table",
        "clusterable demo --quick --out /tmp/demo",
        command_demo,
    )
    demo.add_argument("--out", default="reports/demo", help="report folder (default: %(default)s)")
    demo.add_argument("--quick", action="store_true", help="a few epochs only (seconds)")

    train = verb(
        "train",
        "train an embedding on a dataset with a loss; checkpoints, logs and test metrics. "
        "Every setting has a default (below): `clusterable train` alone trains "
        f"{spec_default['data']}/{spec_default['loss']} for {config_default['epochs']} epochs",
        "clusterable train --data digits --loss lifted --loss-arg margin=1.0 --epochs 20",
        command_train,
    )

    add_run_settings(train, spec_default, config_default)
    train.add_argument(
        "--out",
        help="run folder, absent or empty unless --resume or --overwrite (default: "
        "runs/DATA-LOSS, DATA the folder or file name for folder:/table: data)",
    )
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its latest checkpoint, with its own settings "
        "(only --epochs and output flags may change)",
    )
    train.add_argument(
        "--overwrite", action="store_true", help="delete what --out holds, then start a new run"
    )
    train.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars (bars are shown only on a terminal; the line per epoch stays)",
    )
    train.add_argument(
        "--report",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write RUN/report.html at the end (clusterable report RUN)",
    )

    tune = verb(
        "tune",
        "search hyper-parameters by cross-validation on the training split (Optuna); resumes a "
        "killed search; writes the best settings as a YAML file `train --config` takes",
        "clusterable tune --data digits --loss msdnn --param sigma=log:0.001:1000 --trials 20",
        command_tune,
    )
    add_run_settings(tune, spec_default, config_default)
    tune.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=KIND:...",
        help="a searched setting: NAME=log:LOW:HIGH, float:LOW:HIGH, int:LOW:HIGH or "
        "choice:A,B,C (repeatable; or a `search:` mapping in --config); NAME a loss keyword, "
        "a training setting or run.embedding_dim",
    )
    tune.add_argument("--trials", type=int, default=20, help="trials in all (default: %(default)s)")
    tune.add_argument("--folds", type=int, default=3, help="folds (default: %(default)s)")
    tune.add_argument(
        "--protocol",
        choices=("stratified", "class-disjoint"),
        default="stratified",
        help="stratified folds, or folds of whole classes for zero-shot protocols "
        "(default: %(default)s)",
    )
    tune.add_argument(
        "--metric",
        default="map@r",
        help="what to maximise: a key of the evaluation table or knn@K (default: %(default)s)",
    )
    tune.add_argument(
        "--out",
        help="folder of the study (study.db, best.yaml, search.png); a search found there "
        "resumes (default: runs/tune-DATA-LOSS)",
    )

    evaluate = verb(
        "evaluate",
        "score a trained model on a dataset split, or saved embeddings: Recall@K, MAP@R, NMI, F1, "
        "Hungarian accuracy, ARI, V-measure, silhouette (printed in %%)",
        "clusterable evaluate emb.npy labels.npy --clustering spectral --json table.json",
        command_evaluate,
    )
    _add_source(evaluate)
    evaluate.add_argument(
        "--clustering",
        choices=available_clusterings(aliases=True),
        default="kmeans",
        help="partition the cluster scores are computed on (default: %(default)s)",
    )
    evaluate.add_argument(
        "--n-clusters", type=int, help="clusters to ask for (default: the number of classes)"
    )
    evaluate.add_argument("--ks", default="1,2,4,8", help="Recall@K list (default: %(default)s)")
    evaluate.add_argument("--json", help="also write the table to this JSON file")

    embed = verb(
        "embed",
        "write the embeddings of a dataset split under a trained model as .npy files",
        "clusterable embed runs/digits-lifted --split test --out emb/",
        command_embed,
    )
    _add_source(embed)
    embed.add_argument("--out", required=True, help="folder for embeddings.npy and labels.npy")

    cluster = verb(
        "cluster",
        "partition saved embeddings (k-means, DSCL spectral, AAS, affinity propagation, GMM)",
        "clusterable cluster emb.npy --clustering spectral --n-clusters 10 --labels labels.npy",
        command_cluster,
    )
    cluster.add_argument("embeddings", help="(n, d) .npy file")
    cluster.add_argument(
        "--clustering",
        choices=available_clusterings(aliases=True),
        default="kmeans",
        help="the partition method (default: %(default)s)",
    )
    cluster.add_argument(
        "--n-clusters",
        type=int,
        help="number of clusters (default: the classes in --labels; aas takes none)",
    )
    # The names of earlier releases, kept working; `evaluate` and `cluster` now share one pair.
    cluster.add_argument("--method", dest="clustering", help=argparse.SUPPRESS)
    cluster.add_argument("--k", dest="n_clusters", type=int, help=argparse.SUPPRESS)
    cluster.add_argument(
        "--labels", help="a .npy file of labels (integers or text): also score the partition"
    )
    cluster.add_argument(
        "--out", default="clusters.npy", help="cluster ids .npy (default: %(default)s)"
    )
    cluster.add_argument(
        "--save", help="also save the partition, to assign new items later (`clusterable assign`)"
    )

    plot = verb(
        "plot",
        "PNG figures: t-SNE by class and sub-class, training curves, retrieval grid for images",
        "clusterable plot runs/digits-lifted --out plots/",
        command_plot,
    )
    _add_source(plot)
    plot.add_argument(
        "--out", default="plots", help="folder for the PNG files (default: %(default)s)"
    )

    add_use_verbs(verb)

    reproduce = verb(
        "reproduce",
        "run a paper's experiment (or all) and print our numbers beside the paper's",
        "clusterable reproduce aas-synthetic --quick",
        command_reproduce,
    )
    reproduce.add_argument(
        "experiment", choices=_experiment_choices(), help="an experiment, or all of them"
    )
    budget = reproduce.add_mutually_exclusive_group()
    budget.add_argument("--quick", action="store_true", help="about a minute (for tests)")
    budget.add_argument("--full", action="store_true", help="the paper's own budget")
    reproduce.add_argument("--seeds", type=int, help="number of seeds (default: per experiment)")
    reproduce.add_argument(
        "--from-json", action="store_true", help="with all: rebuild OUT.md from OUT/*/results.json"
    )
    reproduce.add_argument(
        "--out", default="docs/results", help="results folder (default: %(default)s)"
    )
    return parser


def _one_line_warning(message: Any, category: type, *_: Any, **__: Any) -> None:
    """Warnings as one line, without the library's source path."""
    print(f"clusterable: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        try:
            with device_scope(getattr(args, "device", None)):
                return args.handler(args)
        except (RunFolderError, CheckpointWriteError, FileNotFoundError) as error:
            parser.exit(2, f"clusterable {args.command}: error: {error}\n")
        except OSError as error:
            parser.exit(2, f"clusterable {args.command}: error: {describe_os_error(error)}\n")
        except (ValueError, ImportError) as error:
            parser.exit(2, f"clusterable {args.command}: error: {error}\n")


if __name__ == "__main__":
    sys.exit(main())
