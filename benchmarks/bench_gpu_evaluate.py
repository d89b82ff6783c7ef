"""The whole evaluation table on CUDA at SOP size and at a million items, beside pml.

Run from the repository root, with the python that holds the CUDA build of torch::

    PYTHONPATH=src python3 benchmarks/bench_gpu_evaluate.py           # sop and million
    .venv/bin/python benchmarks/bench_gpu_evaluate.py --device cpu --sizes small   # smoke test

Data: ``bench_evaluate.make_data``, the seeded class-clustered l2-normalised embeddings of the CPU
benchmark, at SOP size (60,502 x 512, 11,316 classes) and 1,000,000 x 128 with 1,000 classes
(``small``: 2,000 x 64, 20 classes, for a smoke test on the CPU).

Ours: ``evaluate_embeddings(emb, labels, ks=(1, 10, 100), device=...)`` on the numpy arrays (the
copy to the card included), the ``ks`` of ``bench_evaluate.py`` so that the figures compare with
its CPU ones. Before the clock starts the child has made its data, imported everything and
evaluated a 2,000-item set on the same device (CUDA context, kernels, library handles).
pml: ``AccuracyCalculator(include=(precision_at_1, mean_average_precision_at_r, NMI),
k="max_bin_count", device=...)`` on tensors already on the device, where pytorch-metric-learning
and faiss are importable; with faiss-cpu (the wheel ``make gpu-wheels`` carries) its kNN and
k-means run on the CPU whatever the device. pml is not run at a million items.

Each size and side runs in its own subprocess under a time limit (``--timeout``, 150 s): a size
that passes it is reported as "> 150 s", not waited for. Reported: the call's wall time, the peak
GPU memory (``torch.cuda.max_memory_allocated``, reset just before the call), and the child's peak
resident memory (``ru_maxrss``: data, imports and warm-up included). At a million items ours
runs under cProfile and its 25 costliest functions are printed, also when it passes its time
limit (the child is interrupted first, then killed). Targets (issue 27): SOP size
<= 2 s, a million items <= 20 s within 16 GB of GPU memory.

``--probe-topk`` (about 20 s on a GPU, before the sizes; alone with ``--sizes`` and no size): how
the search should select each query's
``k = 1,000`` nearest of 1,000,000 x 128 references (``_torch_search.select_smallest``):
``torch.topk(sorted=True)``; ``topk(sorted=False)`` then a sort of the k; the row cut into S
segments, the k smallest of each, then the k smallest of those S k, then a sort. Each is timed on
4,096 queries and on one chunk of the search (``_CUDA_BLOCK // n`` queries), the product apart,
with whether it selects the same ids as the first; the fastest is printed as the settings of
``_torch_search.TOPK_STRATEGY`` and ``TOPK_SEGMENTS`` (``--device cpu``: a smaller shape)::

    PYTHONPATH=src python3 benchmarks/bench_gpu_evaluate.py --probe-topk --sizes
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import json
import os
import pstats
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_evaluate import KS, MILLION, SIZES, make_data

#: name: (items, dimension, classes, noise); the data of bench_evaluate.py.
GPU_SIZES = {"small": SIZES["small"], "sop": SIZES["sop"], "million": MILLION}
#: name: (seconds, GPU MB) the issue asks for; None where it sets none.
TARGETS = {"sop": (2.0, None), "million": (20.0, 16 * 1024.0)}
#: pml is not run at these sizes (its faiss-cpu kNN of a million items: many minutes).
PML_SKIPPED = {"million"}
SEED = 0
#: Ours runs under cProfile at these sizes (its overhead in the figure), and prints where the time
#: went, also when the time limit stops it (SIGINT, then the kill).
PROFILED = {"million"}
#: The line before a child's profile on its stderr.
PROFILE_MARK = "--- profile ---\n"


# ---------------------------------------------------------------- child side: one size, one side


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_child(side: str, size: str, device: str) -> dict:
    import numpy as np
    import torch

    n, dim, classes, noise = GPU_SIZES[size]
    emb, labels = make_data(n, dim, classes, noise, SEED)
    warm_emb, warm_labels = make_data(*GPU_SIZES["small"], SEED + 1)
    if side == "ours":
        from clusterable.evaluate import evaluate_embeddings

        def call(e: np.ndarray, y: np.ndarray) -> dict:
            return evaluate_embeddings(e, y, ks=KS, seed=SEED, device=device)

    else:
        from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

        calculator = AccuracyCalculator(
            include=("precision_at_1", "mean_average_precision_at_r", "NMI"),
            k="max_bin_count",
            device=torch.device(device),
        )
        emb, labels = torch.from_numpy(emb).to(device), torch.from_numpy(labels).to(device)
        warm_emb, warm_labels = (torch.from_numpy(a).to(device) for a in (warm_emb, warm_labels))

        def call(e: torch.Tensor, y: torch.Tensor) -> dict:
            return calculator.get_accuracy(e, y)

    call(warm_emb, warm_labels)
    _sync(device)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    profiler = cProfile.Profile() if side == "ours" and size in PROFILED else None
    start = time.perf_counter()
    try:
        if profiler is not None:
            profiler.enable()
        table = call(emb, labels)
        _sync(device)
    finally:  # also on the parent's SIGINT at the time limit: where the time went so far
        if profiler is not None:
            profiler.disable()
            _print_profile(profiler)
    seconds = time.perf_counter() - start
    gpu_mb = torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else None
    values = {k: float(v) for k, v in table.items() if isinstance(v, (int, float, np.floating))}
    return {
        "seconds": seconds,
        "gpu_mb": gpu_mb,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "values": values,
    }


def _print_profile(profiler: cProfile.Profile) -> None:
    """The call's 25 costliest functions by cumulative time, to stderr (the parent prints them)."""
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
    print(PROFILE_MARK + text.getvalue(), file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the topk probe

#: (queries, references, dimension, k) of the topk probe on a GPU, and on the CPU (a smoke test).
PROBE_SHAPE = {"cuda": (4_096, 1_000_000, 128, 1_000), "cpu": (512, 50_000, 128, 100)}
#: The candidates the million-item evaluation selects per query: R_max (its largest class, 1,109
#: items, less one) + the query itself + ``neighbors.TIE_PAD``. The choice is made at this k.
SEARCH_KK = 1_117
#: Segment counts tried for the segmented selection.
PROBE_SEGMENTS = (8, 16, 32, 64)
#: Timed runs per option after one warm-up run; the fastest counts.
PROBE_RUNS = 3


def probe_topk(device: str) -> tuple[list[dict], str]:
    """Each selection's time for the probe's shape and for one search chunk of it (see the
    module docstring): the rows, and a table with the settings of the fastest (printed too)."""
    import torch

    from clusterable.evaluate.neighbors import _CUDA_BLOCK, _TORCH_BLOCK

    m, n, d, k = PROBE_SHAPE["cuda" if device.startswith("cuda") else "cpu"]
    generator = torch.Generator(device).manual_seed(SEED)
    ref = torch.randn(n, d, device=device, generator=generator)  # (n, d)
    ref /= ref.norm(dim=1, keepdim=True)
    ref_sq = (ref * ref).sum(1)  # (n,)
    chunk = max(1, (_CUDA_BLOCK if device.startswith("cuda") else _TORCH_BLOCK) // n)
    options = [("sorted", 1), ("unsorted", 1)] + [("segmented", s) for s in PROBE_SEGMENTS]
    search_kk = SEARCH_KK if device.startswith("cuda") else k
    rows = []
    for queries, kk in sorted({(m, k), (min(chunk, m), k), (min(chunk, m), search_kk)}):
        q = ref[torch.randperm(n, device=device, generator=generator)[:queries]]  # (c, d)
        # (c, n) |r|^2 - 2 q.r, as TorchSearch computes it
        rows.append(
            {
                "queries": queries,
                "k": kk,
                "option": "product",
                "ms": _best_ms(device, _product, q, ref, ref_sq),
            }
        )
        partial = _product(q, ref, ref_sq)
        first = None
        for strategy, segments in options:
            values, ids = _selected(partial, kk, strategy, segments)
            values, ids = values.sort(dim=1).values, ids.sort(dim=1).values
            first = (values, ids) if first is None else first
            same = "yes" if torch.equal(ids, first[1]) else "NO"
            if same == "NO" and torch.equal(values, first[0]):
                same = "ties"  # other members of a run tied at the k-th distance
            rows.append(
                {
                    "queries": queries,
                    "k": kk,
                    "option": strategy if strategy != "segmented" else f"segmented S={segments}",
                    "strategy": strategy,
                    "segments": segments,
                    "ms": _best_ms(device, _selected, partial, kk, strategy, segments),
                    "same_ids": same,
                }
            )
        del partial
    lines = [
        f"topk probe: {n:,} x {d} references, on {device}",
        "",
        "| queries | k | option | ms | ms per 4,096 queries | same ids as sorted (ties: at k) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        same = row.get("same_ids", "-")
        per = row["ms"] * 4_096 / row["queries"]
        lines.append(
            f"| {row['queries']:,} | {row['k']:,} | {row['option']} | {row['ms']:.1f} | "
            f"{per:.1f} | {same} |"
        )
    chunked = [
        r for r in rows if (r["queries"], r["k"]) == (min(chunk, m), search_kk) and "same_ids" in r
    ]
    best = min((r for r in chunked if r["same_ids"] != "NO"), key=lambda r: r["ms"])
    lines.append(
        f"\nfastest at the search's chunk of {min(chunk, m)} queries, k = {search_kk:,}: "
        f"{best['option']}; in "
        f'src/clusterable/evaluate/_torch_search.py set TOPK_STRATEGY = "{best["strategy"]}"'
        + (f" and TOPK_SEGMENTS = {best['segments']}" if best["strategy"] == "segmented" else "")
    )
    markdown = "\n".join(lines)
    print(markdown, flush=True)
    return rows, markdown


def _product(q: Any, ref: Any, ref_sq: Any) -> Any:
    import torch

    return torch.addmm(ref_sq, q, ref.T, alpha=-2.0)


def _selected(partial: Any, k: int, strategy: str, segments: int) -> tuple[Any, Any]:
    """The ``k`` smallest values of each row and their ids, nearest first (a sort of the k where
    the selection leaves them unsorted)."""
    from clusterable.evaluate._torch_search import select_smallest

    values, ids = select_smallest(partial, k, strategy, segments)  # type: ignore[arg-type]
    if strategy == "sorted":
        return values, ids
    values, order = values.sort(dim=1)
    return values, ids.gather(1, order)


def _best_ms(device: str, call: Callable[..., Any], *args: Any) -> float:
    """The fastest of `PROBE_RUNS` runs of ``call(*args)`` after a warm-up, in milliseconds."""
    call(*args)
    best = float("inf")
    for _ in range(PROBE_RUNS):
        _sync(device)
        start = time.perf_counter()
        call(*args)
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return best * 1e3


# ---------------------------------------------------------------- parent side


def measure(side: str, size: str, device: str, timeout: float) -> dict:
    """One child under a time limit; an error or a timeout becomes a row, not a crash."""
    command = [sys.executable, __file__, "--child", side, "--sizes", size, "--device", device]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGINT first: the child prints its profile so far, then the kill.
        os.killpg(process.pid, signal.SIGINT)
        try:
            out, err = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
        return {"timeout": timeout, "profile": _profile_of(err)}
    if process.returncode != 0:
        last = (err.strip().splitlines() or ["no output"])[-1][:200]
        return {"error": f"exit status {process.returncode}: {last}", "profile": _profile_of(err)}
    return json.loads(out.strip().splitlines()[-1]) | {"profile": _profile_of(err)}


def _profile_of(err: str | None) -> str:
    """The profile a child printed to stderr ("" when it printed none)."""
    return (err or "").partition(PROFILE_MARK)[2].partition("\nTraceback")[0]


def _seconds(row: dict | None) -> str:
    if row is None:
        return "not run"
    if "timeout" in row:
        return f"> {row['timeout']:.0f} s"
    if "error" in row:
        return f"error: {row['error']}"
    if "skipped" in row:
        return row["skipped"]
    return f"{row['seconds']:.2f} s"


def _mb(row: dict | None, key: str) -> str:
    if row is None or row.get(key) is None:
        return "-"
    return f"{row[key]:,.0f} MB"


def verdict(size: str, row: dict | None) -> str:
    """ "met", "MISSED (...)" or "-" against the issue's targets."""
    if size not in TARGETS or row is None:
        return "-"
    seconds, gpu_mb = TARGETS[size]
    if "timeout" in row:
        return f"MISSED (> {row['timeout']:.0f} s)"
    if "seconds" not in row:
        return "MISSED (no time)"
    missed = []
    if row["seconds"] > seconds:
        missed.append(f"{row['seconds']:.1f} s > {seconds:g} s")
    if gpu_mb is not None and (row.get("gpu_mb") or 0) > gpu_mb:
        missed.append(f"{row['gpu_mb'] / 1024:.1f} GB > {gpu_mb / 1024:g} GB")
    return f"MISSED ({'; '.join(missed)})" if missed else "met"


def table(results: dict[str, dict[str, dict]]) -> str:
    lines = [
        "| size | n x d, classes | ours | ours GPU peak | ours peak RSS | recall@1 | NMI | pml "
        "| pml / ours | target |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, sides in results.items():
        n, dim, classes, _ = GPU_SIZES[size]
        ours, theirs = sides.get("ours"), sides.get("pml")
        values = (ours or {}).get("values", {})
        ratio = ""
        if ours and theirs and "seconds" in ours and "seconds" in theirs:
            ratio = f"{theirs['seconds'] / ours['seconds']:.2f}x"
        recall = f"{values['recall@1']:.3f}" if "recall@1" in values else "-"
        nmi = f"{values['nmi']:.4f}" if "nmi" in values else "-"
        lines.append(
            f"| {size} | {n:,} x {dim}, {classes:,} | {_seconds(ours)} | {_mb(ours, 'gpu_mb')} | "
            f"{_mb(ours, 'rss_mb')} | {recall} | {nmi} | {_seconds(theirs)} | {ratio} | "
            f"{verdict(size, ours)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--sizes", nargs="*", choices=list(GPU_SIZES), default=["sop", "million"])
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds per size and side")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for the whole run")
    parser.add_argument("--no-pml", action="store_true", help="ours only")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--probe-topk", action="store_true", help="time the search's topk options first"
    )
    parser.add_argument("--child", choices=["ours", "pml"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_child(args.child, args.sizes[0], args.device)))
        return 0

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"bench_gpu_evaluate: torch {torch.__version__} sees no CUDA GPU; use --device cpu")
        return 2
    probe_rows, probe_markdown = probe_topk(args.device) if args.probe_topk else ([], "")
    if not args.sizes:  # the probe alone
        if args.json:
            args.json.write_text(json.dumps({"topk_probe": probe_rows}, indent=1))
        return 0
    card = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "CPU"
    missing = [m for m in ("pytorch_metric_learning", "faiss") if not importlib.util.find_spec(m)]
    pml = not args.no_pml and not missing
    print(f"# bench_gpu_evaluate: {card}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    if missing and not args.no_pml:
        print(f"pml: not run ({' and '.join(missing)} not importable here): ours only")
    # Ours at every size first, then pml: what the targets need is measured first.
    plan = [("ours", size) for size in args.sizes]
    plan += [("pml", size) for size in args.sizes if pml and size not in PML_SKIPPED]
    results: dict[str, dict[str, dict]] = {size: {} for size in args.sizes}
    deadline = time.monotonic() + args.budget
    for side, size in plan:
        left = deadline - time.monotonic()
        if left < 10:
            results[size][side] = {"skipped": f"not run (budget of {args.budget:.0f} s spent)"}
            continue
        timeout = min(args.timeout, left)
        start = time.monotonic()
        results[size][side] = measure(side, size, args.device, timeout)
        row = results[size][side]
        if row.get("profile"):
            print(f"  profile of {side} {size}:\n{row['profile']}", flush=True)
        print(
            f"  {side} {size}: {_seconds(row)}, GPU peak {_mb(row, 'gpu_mb')}, peak RSS "
            f"{_mb(row, 'rss_mb')} ({time.monotonic() - start:.0f} s with data and warm-up)",
            flush=True,
        )
    for size in args.sizes:
        if pml and size in PML_SKIPPED:
            results[size]["pml"] = {"skipped": "not run at this size"}
    markdown = table(results)
    print("\n" + markdown)
    if probe_markdown:  # for gpu_check's report
        markdown += "\n\n" + probe_markdown
    if args.json:
        summary = {
            "device": card,
            "pml": pml,
            "verdicts": {size: verdict(size, sides.get("ours")) for size, sides in results.items()},
            "markdown": markdown,
            "results": results,
            "topk_probe": probe_rows,
        }
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
