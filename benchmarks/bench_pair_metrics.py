"""Pair metrics: `select_threshold` at a million pairs, and ROC AUC + FNMR@FMR over all pairs.

Run::

    .venv/bin/python benchmarks/bench_pair_metrics.py [--parts threshold brute table]
        [--brute-sizes 4000 8000] [--table-size sop] [--repeats 3]

Each side runs in its own subprocess (its time the median of ``--repeats`` runs after a warm-up,
with its CPU time, every thread's, which says more than the wall clock on a loaded machine; its
peak resident set size from ``ru_maxrss``), on the same seeded data:

- ``threshold``: ``select_threshold(d, same, "f1")`` against a brute force built on scikit-learn's
  ``roc_curve`` (the F1 of every threshold from its true/false positive rates), on 10^6 pairs
  (1 % positive, distances rounded to 1e-4 so that ties are many);
- ``brute``: `pair_scores` (ROC AUC and FNMR at FMR = 1e-3) against the brute force, all the
  pairs' float32 distances in one array then ``roc_auc_score`` and ``fnmr_at_fmr``, at sizes
  the brute force can hold (``--brute-sizes``; class-clustered 512-d data as
  ``bench_evaluate.py``'s, about 5.3 items a class as SOP);
- ``table``: `evaluate_embeddings` at ``bench_evaluate.py``'s size ``--table-size`` (``sop``:
  60,502 x 512, 11,316 classes), the default table alone and with ``roc_auc`` and
  ``fnmr@fmr=1e-3`` added: the goal is at most 50 % on top.
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

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))

from bench_evaluate import KS, SIZES, make_data  # noqa: E402

PAIRS = 1_000_000
RATE = 1e-3


def threshold_data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    same = rng.random(PAIRS) < 0.01
    d = np.where(same, rng.normal(0.8, 0.2, PAIRS), rng.normal(1.3, 0.15, PAIRS))
    return np.round(d, 4), same


def threshold_ours(d: np.ndarray, same: np.ndarray) -> float:
    from clusterable.evaluate import select_threshold

    return select_threshold(d, same, "f1").f1


def threshold_sklearn(d: np.ndarray, same: np.ndarray) -> float:
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(same, -d, drop_intermediate=False)
    positives, negatives = same.sum(), (~same).sum()
    tp, fp = tpr * positives, fpr * negatives
    return float(np.max(2 * tp / (2 * tp + fp + (positives - tp))))


def class_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    return make_data(n, 512, max(2, round(n / 5.35)), 2.5, seed)


def pairs_ours(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from clusterable.evaluate.pair_metrics import pair_scores

    scores = pair_scores(x, y, fmr=(RATE,))
    return {"roc_auc": scores.roc_auc, "fnmr": scores.fnmr[RATE], "passes": scores.passes}


def pairs_brute(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import roc_auc_score

    from clusterable._distances import squared_distances
    from clusterable.evaluate import fnmr_at_fmr

    i, j = np.triu_indices(len(x), k=1)
    d = np.sqrt(squared_distances(x, x))[i, j]  # (n (n - 1) / 2,) float32
    same = y[i] == y[j]
    del i, j
    return {
        "roc_auc": float(roc_auc_score(same, -d)),
        "fnmr": float(fnmr_at_fmr(d[same], d[~same], RATE)[0]),
    }


def table(x: np.ndarray, y: np.ndarray, with_pairs: bool) -> dict[str, float]:
    from clusterable.evaluate import evaluate_embeddings
    from clusterable.evaluate.registry import select_metrics

    metrics = None
    if with_pairs:
        metrics = [*select_metrics(None), "roc_auc", f"fnmr@fmr={RATE}"]
    return {k: float(v) for k, v in evaluate_embeddings(x, y, metrics=metrics, ks=KS).items()}


def child(side: str, n: int, seed: int, repeats: int) -> None:
    if side.startswith("threshold"):
        d, same = threshold_data(seed)
        score = {"threshold-ours": threshold_ours, "threshold-sklearn": threshold_sklearn}[side]
        run = lambda: score(d, same)  # noqa: E731
        score(d[:1000], same[:1000])  # imports
    else:
        sop_like = next((size for size in SIZES.values() if size[0] == n), None)
        x, y = make_data(*sop_like, seed) if side.startswith("table") else class_data(n, seed)
        runs = {
            "pairs-ours": lambda: pairs_ours(x, y),
            "pairs-brute": lambda: pairs_brute(x, y),
            "table": lambda: table(x, y, False),
            "table-pairs": lambda: table(x, y, True),
        }
        run = runs[side]
        small_x, small_y = class_data(600, seed)
        table(small_x, small_y, side != "table")  # imports, the search's first call
    seconds, cpu, values = [], [], None
    for _ in range(repeats):
        start, used = time.perf_counter(), time.process_time()
        values = run()
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - used)
    print(
        json.dumps(
            {"s": statistics.median(seconds), "cpu": statistics.median(cpu), "values": values}
        )
    )


def measure(side: str, n: int, args: argparse.Namespace) -> dict:
    command = [sys.executable, str(HERE), "--child", side, "--n", str(n)]
    command += ["--seed", str(args.seed), "--repeats", str(args.repeats)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read()  # type: ignore[union-attr]
    if status:
        raise RuntimeError(f"{side} child failed at n = {n}")
    return {**json.loads(out.strip().splitlines()[-1]), "mb": usage.ru_maxrss / 1024}


def report(title: str, rows: list[tuple[str, dict]]) -> None:
    first = rows[0][1]["s"]
    for name, row in rows:
        print(
            f"| {title} | {name} | {row['s']:.3f} s | {row['s'] / first:.2f}x | "
            f"{row['cpu']:.1f} s | {row['mb']:,.0f} MB | {json.dumps(row['values'])} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", nargs="+", default=["threshold", "brute", "table"])
    parser.add_argument("--brute-sizes", nargs="+", type=int, default=[4000, 8000])
    parser.add_argument("--table-size", default="sop", choices=sorted(SIZES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.n, args.seed, args.repeats)
        return
    print("| what | side | median | / first | CPU time | peak RSS | values |")
    print("|---|---|---|---|---|---|---|", flush=True)
    if "threshold" in args.parts:
        sides = ("threshold-ours", "threshold-sklearn")
        report(f"{PAIRS:,} pairs", [(s, measure(s, 0, args)) for s in sides])
    if "brute" in args.parts:
        for n in args.brute_sizes:
            sides = ("pairs-ours", "pairs-brute")
            report(f"{n:,} x 512, all pairs", [(s, measure(s, n, args)) for s in sides])
    if "table" in args.parts:
        n = SIZES[args.table_size][0]
        sides = ("table", "table-pairs")
        report(f"table at {n:,} x 512", [(s, measure(s, n, args)) for s in sides])


if __name__ == "__main__":
    main()
