"""The ``clusterable`` command line: demo, train, evaluate, embed, cluster, plot.

Examples
--------
    clusterable demo
    clusterable train --data fashion-mnist --loss msdnn --loss-arg sigma=0.5 --labels coarse \\
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
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from clusterable.cli_use import add_use_verbs, write_model_identity

CLUSTERINGS = ("kmeans", "spectral", "aas", "ap", "gmm")


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


def _print_table(table: dict[str, float]) -> None:
    width = max(len(name) for name in table)
    for name, value in table.items():
        print(f"{name:<{width}}  {100 * value:6.2f}")


def _write_json(table: dict[str, Any], path: str | None) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(table, indent=2) + "\n")
        print(f"wrote {path}")


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
        return embeddings, labels, labels, None
    from clusterable.data import load_dataset
    from clusterable.train import embed_dataset
    from clusterable.train.run import load_trained

    model, _, spec, checkpoint = load_trained(source)
    data = args.data or spec.data
    dataset = load_dataset(data, root=args.root or spec.root, split=args.split, labels=spec.labels)
    print(f"embedding {dataset.name} ({len(dataset)} items) with {checkpoint}")
    embeddings, labels = embed_dataset(model, dataset)
    return embeddings, labels, dataset.fine_labels, dataset


# ---------------------------------------------------------------------------------------------
# verbs
def command_demo(args: argparse.Namespace) -> int:
    from clusterable.demo import run_demo

    run_demo(Path(args.out), quick=args.quick, seed=args.seed)
    return 0


def command_train(args: argparse.Namespace) -> int:
    from clusterable.train import TrainConfig
    from clusterable.train.run import RunSpec, train_run

    settings: dict[str, Any] = {}
    if args.config:
        settings = yaml.safe_load(Path(args.config).read_text()) or {}
        if not isinstance(settings, dict):
            raise ValueError(f"{args.config} must hold a mapping of setting: value")
    train_settings = dict(settings.pop("train", {}) or {})
    spec_flags = ("data", "root", "labels", "loss", "model", "embedding_dim", "val_fraction")
    for name in spec_flags:
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    if args.memory_size is not None:
        settings["memory_size"] = args.memory_size
    if args.normalize:
        settings["normalize"] = True
    if args.autoencoder:
        settings["autoencoder"] = True
    if args.unsupervised:
        settings["unsupervised"] = True
    settings["loss_args"] = {
        **settings.get("loss_args", {}),
        **_parse_assignments(args.loss_arg, "--loss-arg"),
    }
    config_flags = (
        "epochs",
        "batch_size",
        "lr",
        "sampler",
        "items_per_class",
        "chunk_size",
        "patience",
        "seed",
    )
    for name in config_flags:
        if getattr(args, name) is not None:
            train_settings[name] = getattr(args, name)
    train_settings.update(_parse_assignments(args.set, "--set"))
    if args.no_progress:
        train_settings["progress"] = False
    spec = RunSpec.from_dict(settings)
    config = TrainConfig.from_dict(train_settings)
    out = Path(args.out) if args.out else Path("runs") / f"{spec.data}-{spec.loss}"
    result, metrics = train_run(spec, config, out=out, resume=args.resume)
    if os.environ.get("RANK", "0") == "0":  # under torchrun, one process reports
        print(f"\ntest split of {spec.data}, best checkpoint {result.checkpoint}:")
        _print_table(metrics)
        print(f"run folder: {out}")
    return 0


def command_evaluate(args: argparse.Namespace) -> int:
    from clusterable.evaluate import evaluate_embeddings

    embeddings, labels, _, _ = _embeddings_of(args)
    keep = labels >= 0
    table = evaluate_embeddings(
        embeddings[keep],
        labels[keep],
        clustering=args.clustering,
        n_clusters=args.n_clusters,
        ks=tuple(int(k) for k in args.ks.split(",")),
        seed=args.seed,
    )
    _print_table(table)
    _write_json(table, args.json)
    return 0


def command_embed(args: argparse.Namespace) -> int:
    embeddings, labels, fine_labels, _ = _embeddings_of(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "embeddings.npy", embeddings)
    np.save(out / "labels.npy", labels)
    np.save(out / "fine_labels.npy", fine_labels)
    if Path(args.source).suffix != ".npy":
        from clusterable.embedder import Embedder

        embedder = Embedder.from_run(args.source, device="cpu")
        write_model_identity(out, embedder.model_id, embedder.run)
    print(f"wrote {embeddings.shape[0]} x {embeddings.shape[1]} embeddings and labels to {out}")
    return 0


def command_cluster(args: argparse.Namespace) -> int:
    from clusterable import cluster

    embeddings = _load_array(Path(args.embeddings), "embeddings")
    k = args.k
    if args.method != "aas" and k is None:
        raise ValueError(f"--method {args.method} needs the number of clusters: add --k N")
    method = "affinity_propagation" if args.method == "ap" else args.method
    partition = cluster.fit(embeddings, method, k, seed=args.seed)
    clusters = partition.labels_
    if args.save:
        print(f"saved the partition ({partition.RULE}) to {partition.save(args.save)}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.save(out, clusters)
    found = len(set(clusters.tolist()) - {-1})
    print(f"{found} clusters, {int((clusters < 0).sum())} noise points; wrote {out}")
    if args.labels:
        from clusterable.evaluate import ari, cluster_accuracy, nmi, pairwise_f1

        labels = _load_array(Path(args.labels), "labels")
        precision, recall, f1 = pairwise_f1(labels, clusters)
        _print_table(
            {
                "nmi": nmi(labels, clusters),
                "precision": precision,
                "recall": recall,
                "f1": f1,
                "accuracy": cluster_accuracy(labels, clusters),
                "ari": ari(labels, clusters),
            }
        )
    return 0


def command_plot(args: argparse.Namespace) -> int:
    from clusterable.plots import plot_retrieval_grid, plot_training_curves, plot_tsne

    embeddings, labels, fine_labels, dataset = _embeddings_of(args)
    out = Path(args.out)
    written = [
        plot_tsne(embeddings, labels, out / "tsne.png", subclasses=fine_labels, seed=args.seed)
    ]
    log = Path(args.source) / "log.jsonl"
    if log.is_file():
        written.append(plot_training_curves(log, out / "curves.png"))
    if dataset is not None and len(dataset.input_shape) == 3:
        images = np.stack([dataset[i][0].numpy() for i in range(len(dataset))])
        grid = out / "retrieval.png"
        written.append(plot_retrieval_grid(images, embeddings, labels, grid, seed=args.seed))
    for path in written:
        print(f"wrote {path}")
    return 0


def command_reproduce(args: argparse.Namespace) -> int:
    from clusterable.reproduce import EXPERIMENTS, Budget, run_all, run_experiment, write_summary

    mode = "quick" if args.quick else "full" if args.full else "default"
    out = Path(args.out)
    if args.experiment == "all":
        if args.from_json:
            reports = write_summary(out)
        else:
            reports = run_all(mode, args.seeds, out, first_seed=args.seed)
        print(f"wrote {out.with_suffix('.md')} and {len(reports)} experiment folders in {out}")
        return 0
    if args.experiment not in EXPERIMENTS:
        raise ValueError(
            f"unknown experiment {args.experiment!r}; choose one of: all, {', '.join(EXPERIMENTS)}"
        )
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
    parser.add_argument("labels", nargs="?", help="labels .npy (when source is an .npy file)")
    parser.add_argument("--data", help="dataset to embed (default: the one the run trained on)")
    parser.add_argument("--root", help="folder of the dataset's files")
    parser.add_argument("--split", default="test", help="dataset split (default: %(default)s)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clusterable",
        description="Clustering-oriented deep metric learning.",
        epilog="Run `clusterable VERB --help` for a verb's options and examples.",
    )
    verbs = parser.add_subparsers(dest="command", required=True, metavar="VERB")

    def verb(name: str, help: str, example: str, handler: Any) -> argparse.ArgumentParser:
        sub = verbs.add_parser(name, help=help, description=help, epilog=f"example: {example}")
        sub.set_defaults(handler=handler)
        sub.add_argument(
            "--seed", type=int, default=None if name == "train" else 0, help="seed of random steps"
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
        "train an embedding on a dataset with a loss; checkpoints, logs and test metrics",
        "clusterable train --data digits --loss lifted --loss-arg margin=1.0 --epochs 20",
        command_train,
    )
    train.add_argument("--config", help="YAML run file: RunSpec keys and a `train:` mapping")
    train.add_argument("--data", help="dataset name (clusterable.data.available_datasets())")
    train.add_argument("--root", help="folder of the dataset's files")
    train.add_argument("--labels", choices=("fine", "coarse"), help="label view (default fine)")
    train.add_argument("--loss", help="loss name (clusterable.losses.available_losses())")
    train.add_argument(
        "--loss-arg", action="append", default=[], metavar="NAME=VALUE", help="loss keyword"
    )
    train.add_argument("--model", help="model name (clusterable.models.available_models())")
    train.add_argument("--embedding-dim", type=int)
    train.add_argument("--normalize", action="store_true", help="l2-normalise embeddings")
    train.add_argument(
        "--memory-size",
        type=int,
        help="cross-batch memory (XBM): past embeddings kept as extra partners (pair losses)",
    )
    train.add_argument("--autoencoder", action="store_true", help="MsDNN-AE: add a decoder")
    train.add_argument(
        "--unsupervised",
        action="store_true",
        help="OPML: train on t-SNE + AAS pseudo-labels; labels only evaluate",
    )
    train.add_argument("--val-fraction", type=float, help="held out per class (default 0.1)")
    train.add_argument("--epochs", type=int)
    train.add_argument("--batch-size", type=int)
    train.add_argument("--lr", type=float)
    train.add_argument("--sampler", choices=("class-balanced", "random", "pairs-hard-negatives"))
    train.add_argument("--items-per-class", type=int)
    train.add_argument("--chunk-size", type=int, help="DSCL large-batch trick chunk size")
    train.add_argument("--patience", type=int, help="early stopping patience (evaluations)")
    train.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="any TrainConfig field"
    )
    train.add_argument("--out", help="run folder (default: runs/DATA-LOSS)")
    train.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")

    evaluate = verb(
        "evaluate",
        "score a trained model on a dataset split, or saved embeddings: Recall@K, MAP@R, NMI, F1, "
        "Hungarian accuracy, ARI, V-measure, silhouette (printed in %%)",
        "clusterable evaluate emb.npy labels.npy --clustering spectral --json table.json",
        command_evaluate,
    )
    _add_source(evaluate)
    evaluate.add_argument("--clustering", choices=CLUSTERINGS, default="kmeans")
    evaluate.add_argument("--n-clusters", type=int, help="default: number of classes")
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
        "clusterable cluster emb.npy --method spectral --k 10 --labels labels.npy",
        command_cluster,
    )
    cluster.add_argument("embeddings", help="(n, d) .npy file")
    cluster.add_argument("--method", choices=CLUSTERINGS, default="kmeans")
    cluster.add_argument("--k", type=int, help="number of clusters (not for aas)")
    cluster.add_argument("--labels", help="labels .npy: also score the partition")
    cluster.add_argument("--out", default="clusters.npy", help="(default: %(default)s)")
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
    plot.add_argument("--out", default="plots", help="folder for the PNG files")

    add_use_verbs(verb)

    reproduce = verb(
        "reproduce",
        "run a paper's experiment (or all) and print our numbers beside the paper's",
        "clusterable reproduce aas-synthetic --quick",
        command_reproduce,
    )
    reproduce.add_argument("experiment", help="experiment name, or all (see the README)")
    budget = reproduce.add_mutually_exclusive_group()
    budget.add_argument("--quick", action="store_true", help="about a minute (for tests)")
    budget.add_argument("--full", action="store_true", help="the paper's own budget")
    reproduce.add_argument("--seeds", type=int, help="number of seeds (default: per experiment)")
    reproduce.add_argument(
        "--from-json", action="store_true", help="with all: rebuild OUT.md from OUT/*/results.json"
    )
    reproduce.add_argument("--out", default="docs/results", help="(default: %(default)s)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (ValueError, FileNotFoundError, ImportError) as error:
        parser.exit(2, f"clusterable {args.command}: error: {error}\n")


if __name__ == "__main__":
    sys.exit(main())
