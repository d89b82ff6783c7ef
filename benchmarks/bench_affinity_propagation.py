"""Affinity propagation's stopping rule: runs stopped after 15 steady iterations (scikit-learn's
default) against 100 (Frey and Dueck's ``apcluster`` with damping 0.9, the package's since
2026-11-28), with the package's damping of 0.9 and bisection on the preference.

Run::

    .venv/bin/python benchmarks/bench_affinity_propagation.py [--steady 15 100]

Each stopping rule runs in its own subprocess on the same seeded data and prints:

- how many of the counts asked of 40 small random sets (4 to 11 points of mixed spread, every
  k from 2 to n - 1) the bisection reached exactly;
- the time of ``affinity_propagation(x, k)`` on blobs of 500 x 16 at k = 10 and 2,000 x 16 at
  k = 50, with the clusters found and the NMI against the blobs, and the peak resident set size.
"""

from __future__ import annotations

import argparse
import importlib
import json
import resource
import subprocess
import sys
import time
import warnings

import numpy as np


def measure(steady: int) -> dict[str, object]:
    """The figures of one stopping rule: ``steady`` iterations of unchanged exemplars."""
    from sklearn.datasets import make_blobs
    from sklearn.metrics import normalized_mutual_info_score

    module = importlib.import_module("clusterable.cluster.affinity_propagation")
    module.CONVERGENCE_ITERATIONS = steady
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    asked = reached = 0
    for _ in range(40):
        n = int(rng.integers(4, 12))
        x = rng.normal(size=(n, 2)) * rng.uniform(0.5, 5, size=(n, 1))  # (n, 2), mixed spread
        for k in range(2, n):
            asked += 1
            reached += len(np.unique(module.affinity_propagation(x, k))) == k
    blobs = []
    for n, k in ((500, 10), (2000, 50)):
        x, y = make_blobs(n, 16, centers=k, cluster_std=2.0, random_state=1)
        start = time.perf_counter()
        labels = module.affinity_propagation(x, k)
        seconds = time.perf_counter() - start
        nmi = normalized_mutual_info_score(y, labels)
        blobs.append({"n": n, "k": k, "found": len(np.unique(labels)), "nmi": nmi, "s": seconds})
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"steady": steady, "asked": asked, "reached": reached, "blobs": blobs, "mb": peak_mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steady", type=int, nargs="+", default=[15, 100])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child)))
        return
    rows = []
    for steady in args.steady:
        argv = [sys.executable, __file__, "--child", str(steady)]
        rows.append(json.loads(subprocess.run(argv, check=True, capture_output=True).stdout))
    first = rows[0]["blobs"]
    print("| steady iterations | counts reached | blobs n x 16, k | found | NMI | time | / first "
          "| peak RSS |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        for case, base in zip(row["blobs"], first, strict=True):
            print(
                f"| {row['steady']} | {row['reached']} of {row['asked']} | {case['n']:,}, "
                f"{case['k']} | {case['found']} | {case['nmi']:.4f} | {case['s']:.2f} s | "
                f"{case['s'] / base['s']:.2f}x | {row['mb']:.0f} MB |"
            )


if __name__ == "__main__":
    main()
