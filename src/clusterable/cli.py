"""The ``clusterable`` command line.

Examples
--------
    clusterable demo --out reports/demo
    clusterable evaluate emb.npy labels.npy --clustering spectral --json table.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

CLUSTERINGS = ("kmeans", "spectral", "aas", "ap", "gmm")


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


def command_demo(args: argparse.Namespace) -> int:
    from clusterable.demo import run_demo

    run_demo(Path(args.out), quick=args.quick, seed=args.seed)
    return 0


def command_evaluate(args: argparse.Namespace) -> int:
    from clusterable.evaluate import evaluate_embeddings

    embeddings = _load_array(Path(args.embeddings), "embeddings")
    labels = _load_array(Path(args.labels), "labels")
    ks = tuple(int(k) for k in args.ks.split(","))
    table = evaluate_embeddings(
        embeddings,
        labels,
        clustering=args.clustering,
        n_clusters=args.n_clusters,
        ks=ks,
        seed=args.seed,
    )
    width = max(len(name) for name in table)
    for name, value in table.items():
        print(f"{name:<{width}}  {100 * value:6.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clusterable",
        description="Clustering-oriented deep metric learning.",
        epilog="Run `clusterable VERB --help` for a verb's options and examples.",
    )
    verbs = parser.add_subparsers(dest="command", required=True, metavar="VERB")

    demo = verbs.add_parser(
        "demo",
        help="train every loss on the bundled digits and compare them",
        description="Train a small MLP on scikit-learn's digits with every loss, evaluate each on "
        "held-out digits, print one table and write it as Markdown and JSON.",
        epilog="example: clusterable demo --quick --out /tmp/demo",
    )
    demo.add_argument("--out", default="reports/demo", help="report folder (default: %(default)s)")
    demo.add_argument("--quick", action="store_true", help="a few epochs only (seconds)")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(run=command_demo)

    evaluate = verbs.add_parser(
        "evaluate",
        help="score saved embeddings: retrieval and clustering metrics",
        description="Score embeddings saved with numpy.save against their labels: Recall@K, "
        "MAP@R, R-precision, then a partition scored by NMI, pairwise F1, Hungarian accuracy, "
        "ARI, V-measure and silhouette. Printed in %%.",
        epilog="example: clusterable evaluate emb.npy labels.npy --clustering spectral",
    )
    evaluate.add_argument("embeddings", help="(n, d) array, .npy")
    evaluate.add_argument("labels", help="(n,) integer array, .npy")
    evaluate.add_argument("--clustering", choices=CLUSTERINGS, default="kmeans")
    evaluate.add_argument(
        "--n-clusters", type=int, default=None, help="default: number of classes in labels"
    )
    evaluate.add_argument("--ks", default="1,2,4,8", help="Recall@K list (default: %(default)s)")
    evaluate.add_argument("--json", help="also write the table to this JSON file")
    evaluate.add_argument("--out", default=".", help="folder for outputs (default: %(default)s)")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.set_defaults(run=command_evaluate)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except ValueError as error:
        parser.exit(2, f"clusterable {args.command}: error: {error}\n")


if __name__ == "__main__":
    sys.exit(main())
