"""What exactness among near-duplicates costs: the kNN search and the table on a set holding runs
of near-identical items (re-encoded copies of one photo), against the same set without them.

Run::

    .venv/bin/python benchmarks/bench_near_duplicates.py [--n 20000] [--dim 128] [--repeats 3]

Data: ``n x dim`` float32 standard normal points, labels of 500 classes; then the first ``m`` rows
(``--duplicated``: 0, 1,000 and 5,000) are replaced by runs of 25 copies of a point, each copy
jittered by ``1e-4`` (within float32's rounding of its run, more of them than a row's candidate
list holds beyond place k), a run's copies of one class. Every row of a run is then searched again
over every item in float64 (`clusterable.evaluate.neighbors._may_miss_one`,
`clusterable.evaluate._host_search.exact_nearest`).

Timed, each setting in its own process, best of ``--repeats`` after one untimed call:
``knn_search(x, 10)`` and ``evaluate_embeddings(x, labels, ks=(1, 10))``; with the share of the
rows searched again and the peak RSS of the process.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

RUN = 25
JITTER = 1e-4


def make_data(n: int, dim: int, duplicated: int) -> tuple[np.ndarray, np.ndarray]:
    """Points and labels, the first ``duplicated`` rows in runs of `RUN` near-copies."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    labels = rng.integers(0, 500, n)
    runs = duplicated // RUN
    x[: runs * RUN] = np.repeat(x[:runs], RUN, axis=0) + JITTER * rng.standard_normal(
        (runs * RUN, dim)
    ).astype(np.float32)
    labels[: runs * RUN] = np.repeat(labels[:runs], RUN)
    return x, labels


def child(n: int, dim: int, duplicated: int, repeats: int) -> dict:
    from clusterable.evaluate import _host_search, evaluate_embeddings
    from clusterable.evaluate.neighbors import knn_search

    x, labels = make_data(n, dim, duplicated)
    searched_again: list[int] = []
    exact_nearest = _host_search.exact_nearest

    def counted(queries, *args):  # type: ignore[no-untyped-def]
        searched_again.append(len(queries))
        return exact_nearest(queries, *args)

    _host_search.exact_nearest = counted  # type: ignore[assignment]
    out: dict = {}
    for name, call in (
        ("knn k=10", lambda: knn_search(x, 10)),
        ("table", lambda: evaluate_embeddings(x, labels, ks=(1, 10))),
    ):
        call()
        searched_again.clear()
        call()
        rows = sum(searched_again)
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - start)
        out[name] = {"seconds": best, "searched_again": rows / n}
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--duplicated", type=int, nargs="+", default=[0, 1_000, 5_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.n, args.dim, args.duplicated[0], args.repeats)))
        return
    rows = []
    for duplicated in args.duplicated:
        command = [sys.executable, __file__, "--child", "--n", str(args.n), "--dim", str(args.dim)]
        command += ["--duplicated", str(duplicated), "--repeats", str(args.repeats)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        rows.append((duplicated, json.loads(done.stdout.strip().splitlines()[-1])))
    base = rows[0][1]
    print(
        f"| near-duplicate rows of {args.n:,} x {args.dim} | what | best | vs none | "
        "rows searched again | peak RSS |"
    )
    print("|---|---|---|---|---|---|")
    for duplicated, row in rows:
        for name in ("knn k=10", "table"):
            seconds = row[name]["seconds"]
            print(
                f"| {duplicated:,} | {name} | {seconds:.2f} s | "
                f"{seconds / base[name]['seconds']:.2f}x | {row[name]['searched_again']:.1%} | "
                f"{row['rss_mb']:.0f} MB |"
            )


if __name__ == "__main__":
    main()
