"""Search index and cluster assignment throughput: clusterable vs pytorch-metric-learning / faiss.

Run (about 15 minutes on 2 cores; ``--quick`` about a minute)::

    .venv/bin/python benchmarks/bench_index.py [--quick] [--seed 0]

Data: clustered synthetic embeddings (class centres N(0, I), items centre + N(0, 0.5^2 I)), seeded.
Every case runs in its own subprocess on the same saved arrays; memory is the peak resident set
size of that subprocess (``ru_maxrss`` from ``os.wait4``) and the RSS once data and imports were
loaded, so the index's own share is the difference.

Cases:
- exact, 60,000 x 512 gallery, 10,000 queries, k = 10: ``EmbeddingIndex.build`` + ``search``
  (exact kind: faiss ``IndexFlatL2`` with index-ordered ties) against pytorch-metric-learning's
  ``FaissKNN`` (faiss ``IndexFlatL2``) on the same arrays; the neighbours must agree.
- approximate, 1,000,000 x 128 gallery (1,000 classes), kinds ``ivf`` and ``hnsw``: build time
  (tuning to recall@10 >= 0.95 included), queries per second, the recall@10 the index reports,
  and recall@10 measured here against faiss's exact search on 1,000 new queries.
- assign: ``Partition.predict`` throughput on 100,000 new points for each clustering method, the
  partition fitted on 10,000 points of 20 classes (16-d; affinity propagation on 2,000, AAS with
  k_graph 250 choosing its own count).
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

#: Points affinity propagation is fitted on (the others: 10,000).
AFFINITY_PROPAGATION_POINTS = 2_000


def make_data(n: int, classes: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    centres = rng.standard_normal((classes, dim), dtype=np.float32)
    return centres[labels] + 0.5 * rng.standard_normal((n, dim), dtype=np.float32), labels


def recall_at_10(found: np.ndarray, truth: np.ndarray) -> float:
    return float(
        np.mean([len(set(f) & set(t)) / t.size for f, t in zip(found, truth, strict=True)])
    )


def case_exact_ours(gallery: np.ndarray, queries: np.ndarray) -> dict:
    from clusterable.index import EmbeddingIndex

    start = time.perf_counter()
    index = EmbeddingIndex.build(gallery)
    built = time.perf_counter()
    _, rows, _ = index.search(queries, 10)
    done = time.perf_counter()
    return {"build_s": built - start, "query_s": done - built, "rows": rows.tolist()}


def case_exact_pml(gallery: np.ndarray, queries: np.ndarray) -> dict:
    import torch
    from pytorch_metric_learning.utils.inference import FaissKNN

    knn = FaissKNN()
    start = time.perf_counter()
    _, rows = knn(torch.from_numpy(queries), 10, torch.from_numpy(gallery))
    done = time.perf_counter()
    return {"build_s": 0.0, "query_s": done - start, "rows": rows.numpy().tolist()}


def case_approximate(kind: str, gallery: np.ndarray, queries: np.ndarray) -> dict:
    import faiss

    from clusterable.index import EmbeddingIndex

    start = time.perf_counter()
    index = EmbeddingIndex.build(gallery, kind=kind)
    built = time.perf_counter()
    _, rows, _ = index.search(queries, 10)
    done = time.perf_counter()
    exact = faiss.IndexFlatL2(gallery.shape[1])
    exact.add(gallery)
    truth = exact.search(queries[:1000], 10)[1]
    return {
        "build_s": built - start,
        "query_s": done - built,
        "breadth": index.search_breadth,
        "reported_recall": index.recall_at_10,
        "measured_recall": recall_at_10(rows[:1000], truth),
    }


def case_assign(method: str, fit_points: np.ndarray, new_points: np.ndarray) -> dict:
    from clusterable.cluster import clusterer_info, fit

    if method == "affinity_propagation":  # three dense n x n matrices, 40 bisection runs
        fit_points = fit_points[:AFFINITY_PROPAGATION_POINTS]
    options: dict = {"k_graph": 250} if method == "aas" else {"seed": 0}
    if clusterer_info(method).takes_n_clusters:
        options["n_clusters"] = 20
    start = time.perf_counter()
    partition = fit(fit_points, method, **options)
    fitted = time.perf_counter()
    partition.predict(new_points)
    done = time.perf_counter()
    return {"fit_s": fitted - start, "assign_s": done - fitted}


def child(case: str, data: str) -> None:
    arrays = np.load(data)
    gallery, queries = arrays["gallery"], arrays["queries"]
    # Imports before the RSS baseline, so the difference is the case's own memory.
    import faiss  # noqa: F401
    import torch  # noqa: F401

    import clusterable.cluster
    import clusterable.index  # noqa: F401

    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if case == "exact-ours":
        result = case_exact_ours(gallery, queries)
    elif case == "exact-pml":
        result = case_exact_pml(gallery, queries)
    elif case.startswith("approximate-"):
        result = case_approximate(case.split("-", 1)[1], gallery, queries)
    else:
        result = case_assign(case.split("-", 1)[1], gallery, queries)
    print(json.dumps({**result, "base_kb": base_kb}))


def measure(case: str, data: Path) -> dict:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", case, "--data", str(data)],
        stdout=subprocess.PIPE,
        text=True,
    )
    out = proc.stdout.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{case} failed")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_mb"] = usage.ru_maxrss / 1024
    result["base_mb"] = result.pop("base_kb") / 1024
    return result


def save(folder: Path, name: str, gallery: np.ndarray, queries: np.ndarray) -> Path:
    path = folder / f"{name}.npz"
    np.savez(path, gallery=gallery, queries=queries)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10x smaller galleries")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.data)
        return
    scale = 10 if args.quick else 1
    print(
        f"# bench_index: seed {args.seed}, {os.cpu_count()} cpus" + (", quick" if scale > 1 else "")
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        n = 60_000 // scale
        points, _ = make_data(n + 10_000 // scale, 100, 512, args.seed)
        data = save(folder, "exact", points[:n], points[n:])
        print(f"\n## exact: {n:,} x 512 gallery, {10_000 // scale:,} queries, k = 10")
        print(
            f"{'side':<12}{'build s':>9}{'query s':>9}{'queries/s':>11}{'peak MB':>9}{'own MB':>8}"
        )
        results = {side: measure(f"exact-{side}", data) for side in ("ours", "pml")}
        for side, r in results.items():
            rate = (10_000 // scale) / r["query_s"]
            own = r["peak_mb"] - r["base_mb"]
            print(
                f"{side:<12}{r['build_s']:>9.2f}{r['query_s']:>9.2f}{rate:>11.0f}"
                f"{r['peak_mb']:>9.0f}{own:>8.0f}"
            )
        ours, pml = results["ours"], results["pml"]
        same = np.mean(np.array(ours["rows"]) == np.array(pml["rows"]))
        total = (ours["build_s"] + ours["query_s"]) / pml["query_s"]
        print(f"time ours / pml: {total:.2f}; neighbours equal to pml's: {100 * same:.3f} %")

        n = 1_000_000 // scale
        points, _ = make_data(n + 10_000, 1_000 // scale, 128, args.seed)
        data = save(folder, "approximate", points[:n], points[n:])
        print(f"\n## approximate: {n:,} x 128 gallery, 10,000 queries, k = 10")
        print(
            f"{'kind':<6}{'build s':>9}{'queries/s':>11}{'breadth':>9}{'recall reported':>17}"
            f"{'recall measured':>17}{'peak MB':>9}"
        )
        for kind in ("ivf", "hnsw"):
            r = measure(f"approximate-{kind}", data)
            print(
                f"{kind:<6}{r['build_s']:>9.1f}{10_000 / r['query_s']:>11.0f}{r['breadth']:>9}"
                f"{r['reported_recall']:>17.4f}{r['measured_recall']:>17.4f}{r['peak_mb']:>9.0f}"
            )

        points, _ = make_data(110_000, 20, 16, args.seed)
        data = save(folder, "assign", points[:10_000], points[10_000:])
        print("\n## assign: Partition.predict on 100,000 new points (fit on 10,000, 20 clusters)")
        print(f"{'method':<22}{'fit s':>8}{'assign s':>10}{'points/s':>12}{'peak MB':>9}")
        from clusterable.cluster import available_clusterings

        for method in available_clusterings():
            r = measure(f"assign-{method}", data)
            print(
                f"{method:<22}{r['fit_s']:>8.2f}{r['assign_s']:>10.3f}"
                f"{100_000 / r['assign_s']:>12.0f}{r['peak_mb']:>9.0f}"
            )


if __name__ == "__main__":
    main()
