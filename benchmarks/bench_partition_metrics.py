"""The partition scores of the evaluation table, from one contingency table, against scikit-learn.

Run::

    .venv/bin/python benchmarks/bench_partition_metrics.py [--src OTHER/src ...] [--repeats 5]

Data: seeded class labels (every class at least 2 items) and clusters that keep each item's class
with probability 0.7 and pick a random one of the same number of clusters otherwise, at several
sizes up to 100,000 items and 1,000 classes.

- ours, two timings, once per source tree given with ``--src`` (e.g. a checkout of an older
  commit: the before/after of a change), each tree in its own subprocess:

  - "table": what `evaluate_embeddings` does after the clustering, from the class and cluster
    codes it has validated: the one table (``contingency_from_codes``; before it existed,
    ``contingency_table``, which validated the codes again) and the default table's partition
    scores read from it (``DEFAULT``: NMI, pairwise precision/recall/F1, Hungarian accuracy, ARI,
    and V-measure where the default table had it);
  - "public": ``contingency_table(labels, clusters)`` from the raw labels and every score,
    V-measure included;
- sklearn: ``normalized_mutual_info_score``, ``adjusted_rand_score`` and ``v_measure_score`` on
  the labels (each builds its own contingency table), in its own subprocess.

Each side runs ``--repeats`` times in its child; the median is printed, with the child's peak
resident set size (``ru_maxrss``) and the ratio to the first ``--src``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

#: (items, classes).
SIZES = ((10_000, 100), (30_000, 300), (100_000, 1_000))
HERE = Path(__file__).resolve()


def make_data(n: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = np.concatenate(
        [np.repeat(np.arange(classes), 2), rng.integers(0, classes, n - 2 * classes)]
    )
    rng.shuffle(labels)
    clusters = np.where(rng.random(n) < 0.7, labels, rng.integers(0, classes, n))
    return labels, np.unique(clusters, return_inverse=True)[1]  # compact codes, as validated


def scores(table: object, with_v_measure: bool) -> dict[str, float]:
    from clusterable.evaluate import partition_metrics as pm

    precision, recall, f1 = pm.pairwise_f1_from_table(table)
    out = {
        "nmi": pm.nmi_from_table(table),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": pm.cluster_accuracy_from_table(table),
        "ari": pm.ari_from_table(table),
    }
    if with_v_measure:
        out["v_measure"] = pm.v_measure_from_table(table)
    return out


def ours_public(labels: np.ndarray, clusters: np.ndarray) -> dict[str, float]:
    from clusterable.evaluate import partition_metrics as pm

    return scores(pm.contingency_table(labels, clusters), True)


def ours_table(codes: np.ndarray, cluster_codes: np.ndarray) -> dict[str, float]:
    from clusterable.evaluate import partition_metrics as pm

    try:
        from clusterable.evaluate.registry import select_metrics
    except ImportError:  # before the registry, the default table had V-measure
        with_v_measure = True
    else:
        with_v_measure = "v_measure" in select_metrics(None)
    build = getattr(pm, "contingency_from_codes", pm.contingency_table)
    return scores(build(codes, cluster_codes), with_v_measure)


def sklearn_side(labels: np.ndarray, clusters: np.ndarray) -> dict[str, float]:
    from sklearn import metrics

    return {
        "nmi": metrics.normalized_mutual_info_score(labels, clusters),
        "ari": metrics.adjusted_rand_score(labels, clusters),
        "v_measure": metrics.v_measure_score(labels, clusters),
    }


def child(side: str, n: int, classes: int, seed: int, repeats: int) -> None:
    labels, clusters = make_data(n, classes, seed)
    score = {"table": ours_table, "public": ours_public, "sklearn": sklearn_side}[side]
    score(labels[:1000], clusters[:1000])  # imports
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        values = score(labels, clusters)
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"s": statistics.median(seconds), "values": values}))


def run_child(side: str, src: str | None, n: int, classes: int, args: argparse.Namespace) -> dict:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(Path(src).resolve())
    command = [sys.executable, str(HERE), "--child", side, "--n", str(n), "--classes", str(classes)]
    command += ["--seed", str(args.seed), "--repeats", str(args.repeats)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read()  # type: ignore[union-attr]
    if status:
        raise RuntimeError(f"{side} child failed")
    return {**json.loads(out.strip().splitlines()[-1]), "mb": usage.ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", nargs="*", default=[str(HERE.parents[1] / "src")])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", choices=["table", "public", "sklearn"], help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--classes", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.n, args.classes, args.seed, args.repeats)
        return
    print("| items, classes | side | median | / first | peak RSS | NMI | ARI |")
    print("|---|---|---|---|---|---|---|")
    for n, classes in SIZES:
        for side in ("table", "public"):
            rows = [(f"{side} ({src})", run_child(side, src, n, classes, args)) for src in args.src]
            if side == "public":
                rows.append(("sklearn", run_child("sklearn", args.src[0], n, classes, args)))
            print_rows(n, classes, rows)


def print_rows(n: int, classes: int, rows: list[tuple[str, dict]]) -> None:
    first = rows[0][1]["s"]
    for name, row in rows:
        print(
            f"| {n:,}, {classes:,} | {name} | {1000 * row['s']:.1f} ms | "
            f"{row['s'] / first:.2f}x | {row['mb']:.0f} MB | {row['values']['nmi']:.12f} | "
            f"{row['values']['ari']:.12f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
