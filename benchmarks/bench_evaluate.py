"""Evaluation at every scale: clusterable's whole table against pytorch-metric-learning.

Run (each size alone with ``--sizes``; the whole sweep takes tens of minutes on 2 shared cores)::

    .venv/bin/python benchmarks/bench_evaluate.py [--sizes small medium cub cars inshop 20k sop]
        [--million] [--like-for-like]

Data: seeded synthetic class-clustered embeddings, l2-normalised: class centres N(0, I), items
centre + N(0, s^2 I), every class at least 2 items, the rest spread multinomially. The noise ``s``
is set per size so that Recall@1 lands where trained models land on the real set (60-90 %); it
is part of the data, not of either method.

Each size and each side runs in its own subprocess on the same saved arrays, ours first, then
pml, then ours and pml again (``--repeats``), so that both sides see the same load; the ratio of
the medians is what counts on a shared machine, not the seconds. Each side imports its entry
module before the clock (pml's ``accuracy_calculator``, which imports torch, faiss and
scikit-learn; our ``clusterable.evaluate``; their seconds are printed apart) and, unless
``--cold``, evaluates its first 300 items once before it too (warm: a training run's second
evaluation on); ``--cold`` times the process's first evaluation, with what it imports besides
its entry module (our k-means' ``clusterable.cluster``, faiss) inside the clock, as a training
run's first evaluation pays it. ``--cold`` also prints the ratio of imports plus first evaluation.

- ours: ``evaluate_embeddings(emb, labels, ks=(1, 10, 100))``: Recall@1/10/100, precision@1,
  MAP@R, R-precision, NMI, pairwise P/R/F1, Hungarian accuracy, ARI, silhouette;
- pml: ``AccuracyCalculator(include=(precision_at_1, mean_average_precision_at_r, NMI),
  k="max_bin_count")``: faiss ``IndexFlatL2`` kNN and ``faiss.Kmeans(niter=20)``.

Memory: peak resident set size of the whole child process (``ru_maxrss`` from ``os.wait4``).
Load: each run also reports the share of the machine's cores other processes used while it ran
(from ``/proc/stat`` less the child's own CPU time), so that pairs timed beside other work are
marked; both sides slow down beside it, pml's several thread pools far more than ours.
Stages: a third child runs each of our stages alone (kNN + retrieval, k-means seeding and
iterations, contingency, Hungarian, silhouette) and prints their seconds.

``--like-for-like``: a third side, ours restricted to pml's three metrics
(``metrics=("precision@1", "map@r", "nmi")``, so no Recall@100, silhouette or other partition
scores), to tell the cost of the extra metrics from that of the shared ones.

``--query-gallery``: In-Shop's protocol (``inshop-qg``): 14,218 of 26,830 items x 512 query the
other 12,612 (3,985 classes); ours ``evaluate_embeddings(..., ks=(1, 10, 20, 30, 40, 50),
queries=is_query)`` (the partition over every item) against pml's ``get_accuracy(query,
query_labels, reference, reference_labels, ref_includes_query=False)`` with precision@1 and MAP@R
(pml's NMI would cluster the queries alone); ``--like-for-like`` adds ours with those two alone.
Warm-up as above (leave-one-out, the same libraries' paths).

``--million``: 1,000,000 x 128 with 1,000 classes, ours only (the kNN alone is ``n^2 d`` = 1.3e14
multiply-adds: about an hour on 2 cores), time and peak RSS.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

#: name: (items, dimension, classes, noise). ``small`` and ``medium`` stand for a user's own
#: validation set evaluated after each epoch; the others for the retrieval benchmarks' test sets.
SIZES = {
    "small": (2_000, 64, 20, 1.5),
    "medium": (4_000, 128, 100, 2.0),
    "cub": (5_924, 512, 100, 3.5),
    "cars": (8_131, 512, 98, 3.5),
    "inshop": (14_218, 512, 3_985, 2.5),
    "20k": (20_000, 128, 2_000, 1.5),
    "sop": (60_502, 512, 11_316, 2.5),
}
MILLION = (1_000_000, 128, 1_000, 1.5)
KS = (1, 10, 100)
#: ``--query-gallery``: In-Shop's test protocol, 14,218 queries ranking 12,612 gallery items of
#: 3,985 classes (every class with at least one of each), at its Recall@1/10/20/30/40/50.
QUERY_GALLERY = (26_830, 512, 3_985, 2.5)
QUERIES = 14_218
QG_KS = (1, 10, 20, 30, 40, 50)


def query_flags(labels: np.ndarray, queries: int, seed: int) -> np.ndarray:
    """``(n,)`` bool: ``queries`` items flagged, at least one item of each class on each side."""
    rng = np.random.default_rng(seed + 1)
    order = np.lexsort((rng.random(labels.size), labels))  # each class's items, shuffled
    first = np.r_[True, labels[order][1:] != labels[order][:-1]]  # (n,) a class's first item
    second = np.r_[False, first[:-1]]
    flags = np.zeros(labels.size, dtype=bool)
    flags[order[first]] = True  # one query per class; its second item stays in the gallery
    free = order[~first & ~second]
    flags[rng.choice(free, queries - int(first.sum()), replace=False)] = True
    return flags


def make_data(
    n: int, dim: int, classes: int, noise: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Class-clustered, l2-normalised float32 embeddings, every class at least 2 items."""
    rng = np.random.default_rng(seed)
    sizes = 2 + rng.multinomial(n - 2 * classes, np.full(classes, 1.0 / classes))
    labels = rng.permutation(np.repeat(np.arange(classes), sizes))
    emb = np.empty((n, dim), dtype=np.float32)
    centres = rng.standard_normal((classes, dim), dtype=np.float32)
    step = 65_536
    for start in range(0, n, step):
        part = labels[start : start + step]
        block = centres[part] + noise * rng.standard_normal((part.size, dim), dtype=np.float32)
        emb[start : start + step] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return emb, labels


def run_ours(
    emb: np.ndarray, labels: np.ndarray, seed: int, metrics: tuple[str, ...] | None = None
) -> dict[str, float]:
    """Our whole table, or only ``metrics`` (``--like-for-like``: pml's three, without Recall@K
    and so without its ``ks``, whose depth the search would otherwise reach)."""
    from clusterable.evaluate import evaluate_embeddings

    if metrics is None:
        table = evaluate_embeddings(emb, labels, ks=KS, seed=seed)
    else:
        table = evaluate_embeddings(emb, labels, metrics=metrics, seed=seed)
    return {k: float(v) for k, v in table.items()}


#: pml's three metrics under our names, for the ``ours-three`` side.
PML_METRICS = ("precision@1", "map@r", "nmi")


def run_pml(emb: np.ndarray, labels: np.ndarray, seed: int) -> dict[str, float]:
    import torch
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    calc = AccuracyCalculator(
        include=("precision_at_1", "mean_average_precision_at_r", "NMI"),
        k="max_bin_count",
        device=torch.device("cpu"),
    )
    return calc.get_accuracy(torch.from_numpy(emb), torch.from_numpy(labels))


def run_ours_query_gallery(
    emb: np.ndarray, labels: np.ndarray, is_query: np.ndarray, seed: int, whole: bool
) -> dict[str, float]:
    """Queries ranking the gallery: our whole table (``whole``; the partition over every item),
    or pml's two retrieval metrics alone."""
    from clusterable.evaluate import evaluate_embeddings

    metrics = None if whole else PML_METRICS[:2]
    table = evaluate_embeddings(emb, labels, metrics=metrics, ks=QG_KS, queries=is_query, seed=seed)
    return {k: float(v) for k, v in table.items()}


def run_pml_query_gallery(
    emb: np.ndarray, labels: np.ndarray, is_query: np.ndarray, seed: int
) -> dict[str, float]:
    import torch
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    calc = AccuracyCalculator(
        include=("precision_at_1", "mean_average_precision_at_r"),
        k="max_bin_count",
        device=torch.device("cpu"),
    )
    query, gallery = torch.from_numpy(emb[is_query]), torch.from_numpy(emb[~is_query])
    return calc.get_accuracy(
        query,
        torch.from_numpy(labels[is_query]),
        gallery,
        torch.from_numpy(labels[~is_query]),
        ref_includes_query=False,
    )


def run_stages(emb: np.ndarray, labels: np.ndarray, seed: int) -> dict[str, float]:
    """Seconds of each of our stages, run alone in the order evaluate_embeddings runs them."""
    import torch

    from clusterable.cluster._kmeans_frame import KMeansFrame
    from clusterable.cluster._kmeans_seeding import initial_centroids
    from clusterable.cluster._lloyd import lloyd
    from clusterable.evaluate import kmeans_rule
    from clusterable.evaluate._inputs import as_labels
    from clusterable.evaluate.partition_metrics import contingency_table, hungarian_matching
    from clusterable.evaluate.retrieval import retrieval_per_query
    from clusterable.evaluate.silhouette import silhouette
    from clusterable.evaluate.table import NEIGHBOURS_KEPT

    out: dict[str, float] = {}
    codes, classes = as_labels(labels, emb.shape[0])
    clock = time.perf_counter()
    neighbours = np.empty((emb.shape[0], NEIGHBOURS_KEPT), dtype=np.int32)
    retrieval_per_query(emb, codes, KS, neighbours=neighbours)
    out["knn + retrieval"] = time.perf_counter() - clock
    clock = time.perf_counter()
    frame = KMeansFrame(emb)
    rule = kmeans_rule(classes.size)  # the evaluation's own: its seeding and restarts
    rng = np.random.default_rng(seed)
    starts = [
        initial_centroids(frame, classes.size, rule["init"], rng) for _ in range(rule["n_init"])
    ]
    out["k-means seeding"] = time.perf_counter() - clock
    clock = time.perf_counter()
    for seeds, rows in starts:  # every restart timed; the contingency below takes the last
        clusters, _ = lloyd(
            frame, seeds, rule["max_iter"], torch.device("cpu"), start=(rows, neighbours)
        )
    out["k-means iterations"] = time.perf_counter() - clock
    clock = time.perf_counter()
    table = contingency_table(codes, clusters)
    out["contingency"] = time.perf_counter() - clock
    clock = time.perf_counter()
    hungarian_matching(table)
    out["hungarian"] = time.perf_counter() - clock
    clock = time.perf_counter()
    silhouette(emb, clusters, seed=seed)
    out["silhouette"] = time.perf_counter() - clock
    return out


#: Items of the warm-up evaluation each side makes before the clock starts, unless ``--cold``.
WARM_UP_ITEMS = 300


def child(side: str, data: str, seed: int, cold: bool = False) -> None:
    """Run one side and print JSON: values, seconds, and the seconds its imports took.

    Warm (the default): one evaluation of the first `WARM_UP_ITEMS` items first, as a training
    run's evaluations after the first; ``cold``: the process's first evaluation (thread pools
    started, index and k-means code first run, and the modules it imports besides the side's
    entry module, inside the clock), the entry module's import outside.
    """
    arrays = np.load(data)
    emb, labels = arrays["emb"], arrays["labels"]
    flags = arrays["is_query"] if "is_query" in arrays else None  # --query-gallery
    if side.startswith("inertia-"):  # its own process: the timed ones' peak RSS stays theirs
        mine = side.removeprefix("inertia-")
        print(json.dumps({"values": inertia(emb, partition_of(mine, emb, labels, seed))}))
        return
    runs = {
        "ours": run_ours,
        "ours-three": functools.partial(run_ours, metrics=PML_METRICS),
        "pml": run_pml,
        "stages": run_stages,
    }
    run = runs[side]
    # Import the side's entry module before the clock starts (the stages: everything they run).
    imported, imported_cpu = time.perf_counter(), time.process_time()
    if side == "pml":
        import pytorch_metric_learning.utils.accuracy_calculator  # noqa: F401
    elif side == "stages":
        import clusterable.cluster
        import clusterable.evaluate

        if clusterable.evaluate.faiss_available():
            import faiss  # noqa: F401
    else:
        import clusterable.evaluate
    import_seconds = time.perf_counter() - imported
    import_cpu = time.process_time() - imported_cpu
    if not cold and side != "stages":
        few = np.arange(min(WARM_UP_ITEMS, len(labels)))
        run(emb[few], np.unique(labels[few], return_inverse=True)[1], seed)
    if flags is not None:  # the warm-up above is leave-one-out: the same libraries' paths
        run = {
            "ours": functools.partial(run_ours_query_gallery, whole=True),
            "ours-three": functools.partial(run_ours_query_gallery, whole=False),
            "pml": run_pml_query_gallery,
        }[side]
        run = functools.partial(run, is_query=flags)
    start, start_cpu = time.perf_counter(), time.process_time()
    values = run(emb, labels, seed=seed)
    seconds = time.perf_counter() - start
    timed = {"seconds": seconds, "cpu_seconds": time.process_time() - start_cpu}
    imports = {"import_seconds": import_seconds, "cpu_import_seconds": import_cpu}
    print(json.dumps({"values": values, **timed, **imports}))


def partition_of(side: str, emb: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
    """The k-means partition the side's evaluation scores NMI on (recomputed, same seeds)."""
    classes = np.unique(labels).size
    if side == "pml":
        import torch
        from pytorch_metric_learning.utils.inference import FaissKMeans

        return np.asarray(FaissKMeans(niter=20)(torch.from_numpy(emb), classes)).reshape(-1)
    from clusterable.evaluate.table import partition

    found = partition(emb, "kmeans", classes, seed)
    return np.asarray(getattr(found, "labels_", found))  # a fitted partition, or its labels


def inertia(emb: np.ndarray, clusters: np.ndarray) -> float:
    """Sum of squared distances of the points to their cluster means (the k-means objective)."""
    codes = np.unique(clusters, return_inverse=True)[1]
    sums = np.zeros((codes.max() + 1, emb.shape[1]))
    np.add.at(sums, codes, emb)
    means = sums / np.bincount(codes)[:, None]
    return float(((emb - means[codes]) ** 2).sum())


def busy_seconds() -> float | None:
    """CPU seconds every process of the machine has used so far (Linux), None elsewhere."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def measure(side: str, data: Path, seed: int, cold: bool = False) -> dict:
    """One side in its own process: its JSON, its peak RSS, and ``others``, the share of the
    machine's cores other processes used meanwhile (a benchmark beside other work is marked)."""
    command = [sys.executable, __file__, "--child", side, "--data", str(data), "--seed", str(seed)]
    busy, wall = busy_seconds(), time.perf_counter()
    proc = subprocess.Popen(
        command + (["--cold"] if cold else []),
        stdout=subprocess.PIPE,
        text=True,
    )
    out = proc.stdout.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{side} failed with exit status {status}")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_mb"] = usage.ru_maxrss / 1024  # Linux: kilobytes
    wall = time.perf_counter() - wall
    if busy is not None:
        theirs = busy_seconds() - busy - usage.ru_utime - usage.ru_stime  # type: ignore[operator]
        result["others"] = max(0.0, theirs) / (wall * (os.cpu_count() or 1))
    return result


def bench_size(
    name: str,
    shape: tuple,
    seed: int,
    repeats: int,
    pml: bool,
    three: bool = False,
    cold: bool = False,
) -> dict:
    n, dim, classes, noise = shape
    emb, labels = make_data(n, dim, classes, noise, seed)
    extra = {}
    if name == "inshop-qg":
        extra["is_query"] = query_flags(labels, QUERIES, seed)
    print(f"\n## {name}: {n:,} x {dim}, {classes:,} classes, noise {noise}", flush=True)
    sides = ("ours", "pml", *(["ours-three"] if three else [])) if pml else ("ours",)
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.npz"
        np.savez(data, emb=emb, labels=labels, **extra)
        del emb
        for _ in range(repeats):
            for side in sides:
                runs[side].append(measure(side, data, seed, cold))
                r = runs[side][-1]
                others = f", others {r['others']:.0%} of the cores" if "others" in r else ""
                print(
                    f"  {side}: {r['seconds']:.3f} s, CPU {r['cpu_seconds']:.3f} s (imports "
                    f"{r['import_seconds']:.2f} s, CPU {r['cpu_import_seconds']:.2f} s), "
                    f"peak RSS {r['peak_mb']:.0f} MB{others}",
                    flush=True,
                )
        stages = measure("stages", data, seed)["values"] if pml and not extra else {}
        inertias = (
            {side: measure(f"inertia-{side}", data, seed)["values"] for side in ("ours", "pml")}
            if pml and not extra
            else {}
        )
    ours = runs["ours"][0]["values"]
    row = {
        "name": name,
        "shape": shape,
        "ours_s": statistics.median(r["seconds"] for r in runs["ours"]),
        "ours_mb": max(r["peak_mb"] for r in runs["ours"]),
        "ours": ours,
        "stages": stages,
    }
    if pml:
        theirs = runs["pml"][0]["values"]
        row.update(
            pml_s=statistics.median(r["seconds"] for r in runs["pml"]),
            pml_mb=max(r["peak_mb"] for r in runs["pml"]),
            pml=theirs,
            p1_diff=abs(ours["precision@1"] - theirs["precision_at_1"]),
            map_diff=abs(ours["map@r"] - theirs["mean_average_precision_at_r"]),
        )
        nan = float("nan")  # --query-gallery: pml scores no partition here, and no inertia
        row.update(ours_inertia=inertias.get("ours", nan), pml_inertia=inertias.get("pml", nan))
        pairs = [
            p["seconds"] / o["seconds"] for o, p in zip(runs["ours"], runs["pml"], strict=True)
        ]
        loads = [r["others"] for side in sides for r in runs[side] if "others" in r]
        row["others"] = statistics.median(loads) if loads else None
        print(
            "  pairs pml / ours: "
            + ", ".join(f"{v:.2f}x" for v in pairs)
            + (f"; others' median share of the cores {row['others']:.0%}" if loads else ""),
            flush=True,
        )
        print(
            f"  ratio pml / ours {row['pml_s'] / row['ours_s']:.2f}x; NMI ours "
            f"{ours['nmi']:.4f} pml {theirs.get('NMI', nan):.4f}; k-means inertia ours "
            f"{row['ours_inertia']:.1f} pml {row['pml_inertia']:.1f}; |precision@1 diff| "
            f"{row['p1_diff']:.1e},"
            f" |MAP@R diff| {row['map_diff']:.1e}; recall@1 {ours['recall@1']:.3f}",
            flush=True,
        )
        if cold:  # what a fresh process pays: its entry module's import, then the evaluation
            for key, label in (("", "seconds"), ("cpu_", "CPU seconds")):

                def median(side: str, field: str, key: str = key) -> float:
                    return statistics.median(r[f"{key}{field}"] for r in runs[side])

                first = {side: median(side, "seconds") for side in ("ours", "pml")}
                total = {
                    side: first[side] + median(side, "import_seconds") for side in ("ours", "pml")
                }
                row[f"{key}first"], row[f"{key}with_imports"] = first, total
                print(
                    f"  {label}: first evaluation ours {first['ours']:.3f}, pml "
                    f"{first['pml']:.3f}, pml / ours {first['pml'] / first['ours']:.2f}x; "
                    f"with the entry module's import ours {total['ours']:.2f}, pml "
                    f"{total['pml']:.2f}, pml / ours {total['pml'] / total['ours']:.2f}x",
                    flush=True,
                )
        if three:
            row["three_s"] = statistics.median(r["seconds"] for r in runs["ours-three"])
            print(
                f"  pml's three metrics alone: ours {row['three_s']:.2f} s, ratio pml / ours "
                f"{row['pml_s'] / row['three_s']:.2f}x"
            )
        print("  stages (s): " + ", ".join(f"{k} {v:.2f}" for k, v in stages.items()))
    return row


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
    parser.add_argument("--sizes", nargs="*", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--million", action="store_true", help="also 1,000,000 x 128 (ours)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--aas", action="store_true", help="also time cluster.aas on 10,000 points")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--like-for-like",
        action="store_true",
        help="also time ours restricted to pml's three metrics (precision@1, MAP@R, NMI)",
    )
    parser.add_argument(
        "--child",
        choices=["ours", "ours-three", "pml", "stages", "inertia-ours", "inertia-pml"],
        help=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="time each process's first evaluation (no warm-up evaluation before the clock)",
    )
    parser.add_argument(
        "--query-gallery",
        action="store_true",
        help="also In-Shop's protocol: 14,218 queries ranking a gallery of 12,612 (inshop-qg)",
    )
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.data, args.seed, args.cold)
        return
    mode = "cold (first evaluation of each process)" if args.cold else "warm"
    print(
        f"# bench_evaluate: seed {args.seed}, {os.cpu_count()} cpus, {args.repeats} repeats, {mode}"
    )
    rows = [
        bench_size(s, SIZES[s], args.seed, args.repeats, True, args.like_for_like, args.cold)
        for s in args.sizes
    ]
    if args.query_gallery:
        rows.append(
            bench_size(
                "inshop-qg",
                QUERY_GALLERY,
                args.seed,
                args.repeats,
                True,
                args.like_for_like,
                args.cold,
            )
        )
    if args.million:
        rows.append(bench_size("million", MILLION, args.seed, 1, False))
    print(
        "\n| set | n x d, classes | ours | pml | pml / ours | ours peak RSS | pml peak RSS "
        "| NMI ours | NMI pml | inertia ours / pml | precision@1, MAP@R equal | others |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    nan = float("nan")
    for r in rows:
        n, dim, classes, _ = r["shape"]
        if "pml_s" in r:
            equal = "yes" if max(r["p1_diff"], r["map_diff"]) <= 1e-6 else "NO"
            print(
                f"| {r['name']} | {n:,} x {dim}, {classes:,} | {r['ours_s']:.3f} s | "
                f"{r['pml_s']:.3f} s | **{r['pml_s'] / r['ours_s']:.2f}x** | {r['ours_mb']:.0f} MB"
                f" | {r['pml_mb']:.0f} MB | {r['ours']['nmi']:.4f} | "
                f"{r['pml'].get('NMI', nan):.4f} | "
                f"{r['ours_inertia'] / r['pml_inertia']:.4f} | {equal} | "
                + ("-" if r.get("others") is None else f"{r['others']:.0%}")
                + " |"
            )
        else:
            print(
                f"| {r['name']} | {n:,} x {dim}, {classes:,} | {r['ours_s']:.1f} s | - | - | "
                f"{r['ours_mb']:.0f} MB | - | {r['ours']['nmi']:.4f} | - | - | - | - |"
            )
    if args.aas:
        bench_aas(args.seed)
    stage_rows = [r for r in rows if r["stages"]]
    if stage_rows:
        names = list(stage_rows[0]["stages"])
        print("\n| set | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for r in stage_rows:
            print(f"| {r['name']} | " + " | ".join(f"{r['stages'][k]:.2f} s" for k in names) + " |")


if __name__ == "__main__":
    main()
