"""The verbs on embeddings, saved or made by a trained run: ``evaluate``, ``embed``, ``cluster``,
``plot``."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from clusterable.cli._clusters import clusters_to_ask, n_clusters_flag
from clusterable.cli._files import (
    Embedded,
    add_source,
    embeddings_of,
    load_array,
    load_labels,
    write_json,
)
from clusterable.cli._parser import Verbs
from clusterable.cluster import available_clusterings
from clusterable.data import labelled_mask
from clusterable.evaluate import available_metrics, evaluate_embeddings
from clusterable.metric_table import clustering_heading, format_metric_table
from clusterable.train.run_folder import check_parent_writable, check_writable

#: The scores of ``cluster --labels``: those of the partition alone.
PARTITION_SCORES = ("nmi", "precision", "recall", "f1", "accuracy", "ari")


def _add_clustering(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument(
        "--clustering",
        choices=available_clusterings(aliases=True),
        default="kmeans",
        help=f"{help} (default: %(default)s)",
    )


def command_evaluate(args: argparse.Namespace) -> int:
    from clusterable.evaluate.registry import needs_of, select_metrics
    from clusterable.evaluate.table import partition

    if args.json:
        check_parent_writable(args.json)
    source = embeddings_of(args)
    keep = labelled_mask(source.labels)
    embeddings, labels = source.embeddings[keep], source.labels[keep]
    queries = query_roles(args, source)
    heading = f"evaluated: {len(labels)} items"
    clusters: np.ndarray | str = args.clustering
    if "partition" in needs_of(select_metrics(args.metrics)):
        k = clusters_to_ask(args.clustering, args.n_clusters, labels, len(embeddings))
        clusters = partition(embeddings, args.clustering, k, args.seed)
        found = len(set(clusters.tolist()) - {-1})
        heading = clustering_heading(args.clustering, k, found, len(labels), "evaluated")
    table = evaluate_embeddings(
        embeddings,
        labels,
        metrics=args.metrics,
        clustering=clusters,
        ks=tuple(int(k) for k in args.ks.split(",")),
        seed=args.seed,
        queries=None if queries is None else queries[keep],
    )
    if queries is not None:
        heading += f"; retrieval: {int(queries[keep].sum())} queries ranking the gallery"
    print(format_metric_table(table, heading))
    write_json(table, args.json)
    return 0


def query_roles(args: argparse.Namespace, source: Embedded) -> np.ndarray | None:
    """``(n,)`` query flags of the evaluated items: ``--queries FILE``, else the split's own
    (In-Shop's test split, a folder's ``query/`` and ``gallery/``), else None (leave-one-out)."""
    if args.queries is None:
        return None if source.dataset is None else source.dataset.is_query
    flags = load_array(args.queries, "--queries")
    if flags.dtype != bool or flags.shape != source.labels.shape:
        raise ValueError(
            f"--queries {args.queries} holds {flags.dtype} of shape {flags.shape}; give "
            f"{source.labels.shape[0]} booleans, one per item (True: query, False: gallery), "
            "saved with numpy.save"
        )
    return flags


def add_evaluate(verbs: Verbs) -> argparse.ArgumentParser:
    from clusterable.evaluate.registry import select_metrics

    evaluate = verbs(
        "evaluate",
        "score a trained model on a dataset split, or saved embeddings: Recall@K, MAP@R, NMI, F1, "
        "Hungarian accuracy, ARI, V-measure, silhouette (printed in %%)",
        "clusterable evaluate emb.npy labels.npy --clustering spectral --json table.json",
        command_evaluate,
    )
    add_source(evaluate)
    left_out = [name for name in available_metrics() if name not in select_metrics(None)]
    evaluate.add_argument(
        "--metrics",
        nargs="+",
        choices=available_metrics(),
        metavar="METRIC",
        help=f"the scores to compute, among {', '.join(available_metrics())}; only what they "
        f"read is computed (default: all but {', '.join(left_out)})",
    )
    _add_clustering(evaluate, "partition the cluster scores are computed on")
    evaluate.add_argument(
        "--n-clusters",
        type=n_clusters_flag,
        help="clusters to ask for, or auto (default: the number of classes; aas and hdbscan "
        "find their own)",
    )
    evaluate.add_argument("--ks", default="1,2,4,8", help="Recall@K list (default: %(default)s)")
    evaluate.add_argument(
        "--queries",
        help="a .npy of booleans, one per item: the True items query, each ranking the False "
        "ones (the gallery) for the retrieval scores (default: the split's own query and "
        "gallery, as In-Shop's test split and embed's is_query.npy; else leave-one-out)",
    )
    evaluate.add_argument("--json", help="also write the table to this JSON file")
    return evaluate


def command_embed(args: argparse.Namespace) -> int:
    out = check_writable(args.out)
    source = embeddings_of(args)
    np.save(out / "embeddings.npy", source.embeddings)
    np.save(out / "labels.npy", source.labels)
    np.save(out / "fine_labels.npy", source.fine_labels)
    roles = None if source.dataset is None else source.dataset.is_query
    if roles is not None:
        np.save(out / "is_query.npy", roles)  # for evaluate --queries
    if source.embedder is not None:
        source.embedder.identity(args.data, args.root, args.split).save(out)
    rows, dim = source.embeddings.shape
    roles_note = "" if roles is None else " (and is_query.npy: the query and gallery roles)"
    print(f"wrote {rows} x {dim} embeddings and labels to {out}{roles_note}")
    return 0


def add_embed(verbs: Verbs) -> argparse.ArgumentParser:
    embed = verbs(
        "embed",
        "write the embeddings of a dataset split under a trained model as .npy files",
        "clusterable embed runs/digits-lifted --split test --out emb/",
        command_embed,
    )
    add_source(embed)
    embed.add_argument("--out", required=True, help="folder for embeddings.npy and labels.npy")
    return embed


def command_cluster(args: argparse.Namespace) -> int:
    from clusterable import cluster
    from clusterable.cluster import clusterer_info

    embeddings = load_array(args.embeddings, "embeddings")
    labels = None if args.labels is None else load_labels(args.labels, len(embeddings), "--labels")
    check_parent_writable(args.out)
    if args.save:
        check_parent_writable(args.save)
    k = clusters_to_ask(args.clustering, args.n_clusters, labels, len(embeddings), announce=True)
    partition = cluster.fit(embeddings, args.clustering, k, seed=args.seed)
    clusters = partition.labels_
    if k == "auto":
        k = partition.n_clusters
        print(f"n_clusters = {k}: chosen by {clusterer_info(args.clustering).auto}")
    if args.save:
        print(f"saved the partition ({partition.RULE}) to {partition.save(args.save)}")
    out = Path(args.out)
    np.save(out, clusters)
    found = len(set(clusters.tolist()) - {-1})
    print(f"{found} clusters, {int((clusters < 0).sum())} noise points; wrote {out}")
    if labels is not None:
        keep = labelled_mask(labels)
        table = evaluate_embeddings(
            embeddings[keep], labels[keep], metrics=PARTITION_SCORES, clustering=clusters[keep]
        )
        heading = clustering_heading(args.clustering, k, found, int(keep.sum()), "scored")
        print(format_metric_table(table, heading))
    return 0


def add_cluster(verbs: Verbs) -> argparse.ArgumentParser:
    cluster = verbs(
        "cluster",
        "partition saved embeddings (k-means, DSCL spectral, AAS, affinity propagation, GMM)",
        "clusterable cluster emb.npy --clustering spectral --n-clusters 10 --labels labels.npy",
        command_cluster,
    )
    cluster.add_argument("embeddings", help="(n, d) .npy file")
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
        "--save", help="also save the partition, to assign new items later (`clusterable assign`)"
    )
    return cluster


def command_plot(args: argparse.Namespace) -> int:
    from clusterable.plots import plot_retrieval_grid, plot_training_curves, plot_tsne

    out = check_writable(args.out)
    source = embeddings_of(args)
    dataset = source.dataset
    names = dataset.class_names if dataset is not None else None
    fine_names = dataset.fine_class_names if dataset is not None else None
    written = [
        plot_tsne(
            source.embeddings,
            source.labels,
            out / "tsne.png",
            subclasses=source.fine_labels,
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
        written.append(
            plot_retrieval_grid(
                images,
                source.embeddings,
                source.labels,
                out / "retrieval.png",
                seed=args.seed,
                class_names=names,
            )
        )
    for path in written:
        print(f"wrote {path}")
    return 0


def add_plot(verbs: Verbs) -> argparse.ArgumentParser:
    plot = verbs(
        "plot",
        "PNG figures: t-SNE by class and sub-class, training curves, retrieval grid for images",
        "clusterable plot runs/digits-lifted --out plots/",
        command_plot,
    )
    add_source(plot)
    plot.add_argument(
        "--out", default="plots", help="folder for the PNG files (default: %(default)s)"
    )
    return plot
