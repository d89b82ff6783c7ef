"""Evaluation at Stanford-Online-Products scale: clusterable vs pytorch-metric-learning.

Run (about 12 minutes on 2 cores; ``--quick`` takes under a minute)::

    .venv/bin/python benchmarks/bench_evaluate.py [--quick] [--seed 0]

Data: synthetic clustered embeddings of SOP's test-set shape (60,502 x 512, 11,316 classes, 2 + a
multinomial share per class, about 5.3 items per class), class centres N(0, I), items centre +
N(0, 2^2 I), seeded (Recall@1 near 80 %, like trained SOP embeddings).

Each side runs in its own subprocess on the same saved arrays:
- ours: ``clusterable.evaluate.evaluate_embeddings`` (the full table: Recall@1/10/100, precision@1,
  MAP@R, R-precision, NMI, pairwise P/R/F1, Hungarian accuracy, ARI, V-measure, silhouette of
  1,652 seeded items, each against all), with ``clusterable.cluster.kmeans`` set to the work
  pytorch-metric-learning does (one restart, faiss random init, 20 Lloyd iterations);
- pml: ``AccuracyCalculator(include=(precision_at_1, mean_average_precision_at_r, NMI),
  k="max_bin_count")``: faiss ``IndexFlatL2`` kNN and ``faiss.Kmeans(niter=20)`` (random init,
  one run, faiss's fixed default seed). Its default ``k=None`` would ask for all n neighbours (a
  60,502^2 result, ~44 GB), so the documented ``max_bin_count`` is used.

Memory: peak resident set size of each subprocess (``ru_maxrss`` from ``os.wait4``), and the RSS
after imports and data loading, so the metric's own share is the difference.
NMI differs between the two because the k-means runs differ (seeds, k-means init); precision@1 and
MAP@R use the same definitions and must agree.

A last section times ``clusterable.cluster.aas`` on 10,000 2-D points (goal: under 3 s).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def make_data(n: int, classes: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """SOP-shaped clustered embeddings: every class has at least 2 items."""
    rng = np.random.default_rng(seed)
    sizes = 2 + rng.multinomial(n - 2 * classes, np.full(classes, 1.0 / classes))
    labels = np.repeat(np.arange(classes), sizes)
    centres = rng.standard_normal((classes, dim), dtype=np.float32)
    emb = centres[labels] + 2.0 * rng.standard_normal((n, dim), dtype=np.float32)
    perm = rng.permutation(n)
    return np.ascontiguousarray(emb[perm]), labels[perm]


def run_ours(emb: np.ndarray, labels: np.ndarray, seed: int) -> dict[str, float]:
    from clusterable.evaluate import evaluate_embeddings

    # The defaults: at this size kmeans takes one random-seeded restart of 20 iterations.
    table = evaluate_embeddings(emb, labels, clustering="kmeans", ks=(1, 10, 100), seed=seed)
    return {k: float(v) for k, v in table.items()}


def run_pml(emb: np.ndarray, labels: np.ndarray, seed: int) -> dict[str, float]:
    import torch
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    calc = AccuracyCalculator(
        include=("precision_at_1", "mean_average_precision_at_r", "NMI"),
        k="max_bin_count",
        device=torch.device("cpu"),
    )
    return calc.get_accuracy(torch.from_numpy(emb), torch.from_numpy(labels))


def child(side: str, data: str, seed: int) -> None:
    """Run one side and print JSON: values, seconds, RSS before the metric (KB)."""
    arrays = np.load(data)
    emb, labels = arrays["emb"], arrays["labels"]
    run = run_ours if side == "ours" else run_pml
    # Import everything the side needs before the clock starts and the RSS baseline is read.
    if side == "ours":
        import clusterable.cluster
        import clusterable.evaluate  # noqa: F401
    else:
        import pytorch_metric_learning.utils.accuracy_calculator  # noqa: F401
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    values = run(emb, labels, seed)
    seconds = time.perf_counter() - start
    print(json.dumps({"values": values, "seconds": seconds, "base_kb": base_kb}))


def measure(side: str, data: Path, seed: int) -> dict:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", side, "--data", str(data), "--seed", str(seed)],
        stdout=subprocess.PIPE,
        text=True,
    )
    out = proc.stdout.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{side} failed with exit code {proc.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_kb"] = usage.ru_maxrss  # Linux: kilobytes
    return result


def bench_aas(seed: int) -> None:
    print("\n## clusterable.cluster.aas on 10,000 2-D points (goal < 3 s)")
    try:
        from clusterable.cluster import aas
    except ImportError:
        print("clusterable.cluster.aas is not yet available: not timed.")
        return
    from clusterable.evaluate import nmi

    rng = np.random.default_rng(seed)
    centres = rng.uniform(-20, 20, (10, 2))
    truth = rng.integers(0, 10, 10_000)
    points = centres[truth] + rng.standard_normal((10_000, 2))
    aas(points[:500])  # warm-up: imports, faiss threads
    start = time.perf_counter()
    clusters = aas(points)
    seconds = time.perf_counter() - start
    found = len(set(clusters.tolist()) - {-1})
    print(
        f"aas: {seconds:.2f} s, {found} clusters, {(clusters == -1).sum()} noise, "
        f"NMI vs the 10 generating Gaussians {100 * nmi(truth, clusters):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="6,000 x 128, 1,130 classes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", choices=["ours", "pml"], help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.data, args.seed)
        return

    n, classes, dim = (6_000, 1_130, 128) if args.quick else (60_502, 11_316, 512)
    emb, labels = make_data(n, classes, dim, args.seed)
    sizes = np.bincount(labels)
    print(
        f"# bench_evaluate: {n} x {dim}, {classes} classes ({sizes.mean():.2f} per class, "
        f"{sizes.min()}..{sizes.max()}), seed {args.seed}, {os.cpu_count()} cpus"
    )
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.npz"
        np.savez(data, emb=emb, labels=labels)
        ours = measure("ours", data, args.seed)
        pml = measure("pml", data, args.seed)

    o, p = ours["values"], pml["values"]
    print("\n## values (%)")
    print(f"{'metric':<14}{'clusterable':>14}{'pml':>14}")
    rows = [
        ("recall@1", "recall@1", "precision_at_1"),
        ("recall@10", "recall@10", None),
        ("recall@100", "recall@100", None),
        ("precision@1", "precision@1", "precision_at_1"),
        ("map@r", "map@r", "mean_average_precision_at_r"),
        ("r_precision", "r_precision", None),
        ("nmi", "nmi", "NMI"),
        ("precision", "precision", None),
        ("recall", "recall", None),
        ("f1", "f1", None),
        ("accuracy", "accuracy", None),
        ("ari", "ari", None),
        ("v_measure", "v_measure", None),
        ("silhouette", "silhouette", None),
    ]
    for name, ours_key, pml_key in rows:
        theirs = f"{100 * p[pml_key]:.4f}" if pml_key else "-"
        print(f"{name:<14}{100 * o[ours_key]:>14.4f}{theirs:>14}")
    print(
        f"precision@1 equal: {abs(o['precision@1'] - p['precision_at_1']) < 1e-12}; "
        f"MAP@R equal: {abs(o['map@r'] - p['mean_average_precision_at_r']) < 1e-12}; "
        "NMI differs by k-means run (seed and init), not by definition."
    )

    print("\n## time and memory (each side in its own subprocess)")
    print(f"{'side':<14}{'seconds':>10}{'peak RSS MB':>14}{'RSS before MB':>15}{'metric MB':>11}")
    for name, r in (("clusterable", ours), ("pml", pml)):
        peak, base = r["peak_kb"] / 1024, r["base_kb"] / 1024
        print(f"{name:<14}{r['seconds']:>10.1f}{peak:>14.0f}{base:>15.0f}{peak - base:>11.0f}")
    print(
        f"time ratio pml / clusterable: {pml['seconds'] / ours['seconds']:.2f} "
        "(clusterable also computes Recall@10/100, R-precision, F1, Hungarian accuracy, ARI, "
        "V-measure and silhouette)"
    )
    bench_aas(args.seed)


if __name__ == "__main__":
    main()
