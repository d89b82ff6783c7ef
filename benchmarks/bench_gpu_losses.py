"""Forward + backward time and peak GPU memory of every registered loss on CUDA, beside PML.

Run from the repository root, with the python that holds the CUDA build of torch::

    PYTHONPATH=src python3 benchmarks/bench_gpu_losses.py             # n = 256, 1024, 4096
    PYTHONPATH=src python3 benchmarks/bench_gpu_losses.py --compile   # + torch.compile at n=256
    .venv/bin/python benchmarks/bench_gpu_losses.py --device cpu --sizes small   # smoke test

What is measured:

- every loss of ``clusterable.losses.available_losses()`` at n = 256, 1024 and 4096, d = 512,
  classes of 8 items, float32 embeddings drawn N(0, 1) that require grad; the losses with class
  weights get ``num_classes`` and ``embedding_dim``, ``opml`` its ``embedding_dim``;
- pytorch-metric-learning's nearest equivalent where there is one, the pairs of
  ``bench_losses.py`` case 4: contrastive -> ``ContrastiveLoss``, triplet ->
  ``TripletMarginLoss`` + ``TripletMarginMiner("semihard")``, snn -> ``NCALoss``, lifted ->
  ``LiftedStructureLoss`` (not run where its ``|P| x |N|`` pair mask passes 8 GiB: n >= 1024).
  The definitions differ in details: the ratio compares cost, not values;
- time: one ``loss(x, labels).backward()`` between two ``torch.cuda.Event`` records, the stream
  synchronised after each call, so each call starts on an idle card and a launch-bound loss pays
  its launches; median of up to ``--repeats`` calls (at least 3; a case stops after 1 s once it
  has them), after warm-up calls;
- peak: ``torch.cuda.max_memory_allocated`` during one call, reset just before it, minus what
  was allocated before it (the inputs and the loss's own parameters are not counted);
- at the smallest n, ways to cut the launch overhead of small batches: the whole forward +
  backward captured in one CUDA graph (``torch.cuda.graph``) and replayed, and with
  ``--compile`` the loss under ``torch.compile`` (compile seconds reported). A loss whose call
  synchronises with the host (a data-dependent shape, a check read back on the CPU) cannot be
  captured: the row says so and why.

Each loss runs in its own subprocess: ours at every size, then pml's equivalent at every size,
then ours in the variants (a failed capture can leave the stream unusable, so they come last). A
process per case would start torch and CUDA 64 times, seconds each. Each process prints one JSON
line per result as it goes, so a crash or a timeout loses only what was left.

Rows flagged ``!``: at the largest n, ours above 10 ms or 1 GB; at any n, pml faster than ours
(ratio < 1.0).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
from bench_losses import PML_EQUIVALENT, pml_lifted_mask_gib

#: ``--sizes`` presets: (batch sizes, embedding width). ``launch``: the small batch alone, for
#: ``--compile`` without the larger sizes again.
SIZES = {"full": ((256, 1024, 4096), 512), "launch": ((256,), 512), "small": ((32, 64), 32)}
ITEMS_PER_CLASS = 8
#: Flags at the largest n (the issue's bounds).
SLOW_MS, LARGE_MB = 10.0, 1024.0
#: pml's lifted loss is not run where its pair x pair mask would pass this.
PML_LIFTED_MAX_GIB = 8.0
#: A case stops repeating once this much time is spent (after at least 3 repeats).
CASE_BUDGET_S = 1.0
WARMUP = 3

Step = Callable[[], None]


# ---------------------------------------------------------------- child side: one loss per process


def _build(side: str, name: str, classes: int, dim: int, device: torch.device) -> torch.nn.Module:
    if side == "pml":
        from bench_losses import _pml_loss

        loss = _pml_loss(name)
        return loss.to(device) if isinstance(loss, torch.nn.Module) else loss
    from clusterable.losses import build_loss

    return build_loss(name, num_classes=classes, embedding_dim=dim).to(device)


def _batch(n: int, dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(n)
    x = torch.randn(n, dim, generator=generator).to(device).requires_grad_(True)  # (n, d)
    labels = (torch.arange(n) % (n // ITEMS_PER_CLASS)).to(device)  # (n,)
    return x, labels


def _zero_grads(loss: object, x: torch.Tensor) -> None:
    x.grad = None
    if isinstance(loss, torch.nn.Module):
        loss.zero_grad(set_to_none=True)


def _timed_ms(step: Step, device: torch.device) -> float:
    """Milliseconds of one call: device events on CUDA, the host clock elsewhere."""
    if device.type != "cuda":
        start = time.perf_counter()
        step()
        return 1000 * (time.perf_counter() - start)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    step()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end)


def _peak_mb(step: Step, device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def _median_ms(step: Step, device: torch.device, repeats: int) -> float:
    times: list[float] = []
    while len(times) < repeats and (len(times) < 3 or sum(times) < 1000 * CASE_BUDGET_S):
        times.append(_timed_ms(step, device))
    return statistics.median(times)


def _warm_up(step: Step, device: torch.device) -> None:
    """Load kernels and fill the allocator's cache; one call only when a call is slow."""
    for _ in range(WARMUP):
        if _timed_ms(step, device) > 1000 * CASE_BUDGET_S / 2:
            return


def measure_eager(loss: object, n: int, dim: int, device: torch.device, repeats: int) -> dict:
    x, labels = _batch(n, dim, device)

    def step() -> None:
        _zero_grads(loss, x)
        loss(x, labels).backward()  # type: ignore[operator]

    _warm_up(step, device)
    peak = _peak_mb(step, device)
    return {"ms": _median_ms(step, device, repeats), "peak_mb": peak}


def measure_compiled(loss: object, n: int, dim: int, device: torch.device, repeats: int) -> dict:
    """The loss under ``torch.compile``; the first call's seconds are the compile time."""
    compiled = torch.compile(loss)
    x, labels = _batch(n, dim, device)

    def step() -> None:
        _zero_grads(loss, x)
        compiled(x, labels).backward()

    start = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    compile_s = time.perf_counter() - start
    _warm_up(step, device)
    return {"ms": _median_ms(step, device, repeats), "compile_s": compile_s}


def measure_graphed(loss: object, n: int, dim: int, device: torch.device, repeats: int) -> dict:
    """Forward + backward captured once in a CUDA graph and replayed on the same inputs."""
    x, labels = _batch(n, dim, device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as capture asks
        for _ in range(WARMUP):
            _zero_grads(loss, x)
            loss(x, labels).backward()  # type: ignore[operator]
    torch.cuda.current_stream().wait_stream(side)
    _zero_grads(loss, x)  # the captured backward then writes the gradients, not adds to them
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss(x, labels).backward()  # type: ignore[operator]
    _warm_up(graph.replay, device)
    return {"ms": _median_ms(graph.replay, device, repeats)}


def _why(error: BaseException) -> str:
    """The first error's first lines and the last line of our package it went through (a failed
    capture raises again when the capture ends: the first error says why)."""
    while error.__context__ is not None:
        error = error.__context__
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = " / ".join(lines[:2])
    ours = [
        f"{Path(frame.filename).name}:{frame.lineno}"
        for frame in traceback.extract_tb(error.__traceback__)
        if f"{os.sep}clusterable{os.sep}" in frame.filename
    ]
    where = f" (at {ours[-1]})" if ours else ""
    return f"{type(error).__name__}: {text}"[: 240 - len(where)] + where


def _emit(side: str, name: str, variant: str, n: int, result: dict) -> None:
    print(json.dumps({"side": side, "loss": name, "variant": variant, "n": n, **result}))
    sys.stdout.flush()


def _eager_rows(side: str, name: str, spec: dict, device: torch.device) -> None:
    dim = spec["dim"]
    for n in spec["sizes"]:
        if side == "pml" and name == "LiftedStructureLoss":
            gib = pml_lifted_mask_gib(n, 0, n // ITEMS_PER_CLASS)
            if gib > PML_LIFTED_MAX_GIB:
                reason = f"not run: its |P| x |N| mask is {gib:,.0f} GiB"
                _emit(side, name, "eager", n, {"skipped": reason})
                continue
        loss = None
        try:
            loss = _build(side, name, n // ITEMS_PER_CLASS, dim, device)
            _emit(side, name, "eager", n, measure_eager(loss, n, dim, device, spec["repeats"]))
        except Exception as error:  # an error becomes a row, not a crash
            _emit(side, name, "eager", n, {"error": _why(error)})
        del loss  # its memory goes back before the next size
        if device.type == "cuda":
            torch.cuda.empty_cache()


def run_child(spec: dict) -> None:
    """One loss of ours at every size, its pml equivalent (``spec["pml"]``) at every size, then
    ours in the variants; one JSON line per result, printed as it comes."""
    device = torch.device(spec["device"])
    if device.type == "cpu":
        torch.set_num_threads(1)  # the CPU smoke test shares its cores
    torch.manual_seed(0)
    name, dim = spec["loss"], spec["dim"]
    _eager_rows("ours", name, spec, device)
    if spec.get("pml"):
        _eager_rows("pml", spec["pml"], spec, device)
    n = min(spec["sizes"])
    for variant in spec["variants"]:
        if variant == "graph" and device.type != "cuda":
            _emit("ours", name, variant, n, {"skipped": "CUDA graphs need a CUDA device"})
            continue
        measure = measure_compiled if variant == "compile" else measure_graphed
        try:
            loss = _build("ours", name, n // ITEMS_PER_CLASS, dim, device)
            _emit("ours", name, variant, n, measure(loss, n, dim, device, spec["repeats"]))
        except Exception as error:  # e.g. a host sync during capture
            _emit("ours", name, variant, n, {"error": _why(error)})
            return  # a failed capture can leave the stream unusable: nothing more here


# ---------------------------------------------------------------- parent side: cases and table


def run_case(spec: dict, timeout: float) -> list[dict]:
    """One child process; its results so far, plus a row saying why it stopped, if it did."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--child", json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
        stopped = None if process.returncode == 0 else f"exit status {process.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        stopped = f"timed out after {timeout:.0f} s"
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if stopped:
        last = (err.strip().splitlines() or ["no output"])[-1][:160]
        rows.append({**spec, "stopped": f"{stopped}: {last}"})
        print(f"  {spec['loss']}: {stopped}: {last}", file=sys.stderr)
    return rows


def _find(rows: list[dict], side: str, loss: str, variant: str, n: int) -> dict | None:
    for row in rows:
        if (row.get("side"), row.get("loss"), row.get("variant"), row.get("n")) == (
            side,
            loss,
            variant,
            n,
        ):
            return row
    return None


def _cell_ms(row: dict | None) -> str:
    if row is None:
        return "not run"
    if "ms" in row:
        return f"{row['ms']:.3f}"
    return row.get("skipped") or f"error: {row.get('error', '?')}"


def _cell_mb(row: dict | None) -> str:
    if row is None or row.get("peak_mb") is None:
        return "-" if row is None or "ms" not in row else "n/a"
    return f"{row['peak_mb']:.1f}"


def table(
    rows: list[dict], losses: list[str], sizes: tuple[int, ...], pml: bool
) -> tuple[str, list[str]]:
    """The markdown table of the eager rows and the list of flags raised."""
    lines = [
        "| loss | n | ours ms | pml | pml ms | pml / ours | ours peak MB | pml peak MB | flag |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    flags: list[str] = []
    for name in losses:
        pml_name = PML_EQUIVALENT.get(name) if pml else None
        for n in sizes:
            ours = _find(rows, "ours", name, "eager", n)
            theirs = _find(rows, "pml", pml_name, "eager", n) if pml_name else None
            ratio, flag = "", []
            if ours and theirs and "ms" in ours and "ms" in theirs:
                ratio = f"{theirs['ms'] / ours['ms']:.2f}x"
                if theirs["ms"] < ours["ms"]:
                    flag.append("pml faster")
            if ours and "ms" in ours and n == max(sizes):
                if ours["ms"] > SLOW_MS:
                    flag.append(f"> {SLOW_MS:.0f} ms")
                if (ours.get("peak_mb") or 0) > LARGE_MB:
                    flag.append("> 1 GB")
            if ours is None or "ms" not in ours:
                flag.append("no time")
            if flag:
                flags.append(f"{name} n={n}: {', '.join(flag)}")
            lines.append(
                f"| {name} | {n:,} | {_cell_ms(ours)} | {pml_name or ''} | "
                f"{_cell_ms(theirs) if pml_name else ''} | {ratio} | {_cell_mb(ours)} | "
                f"{_cell_mb(theirs) if pml_name else ''} | {'! ' + '; '.join(flag) if flag else ''}"
                " |"
            )
    return "\n".join(lines), flags


def variants_table(rows: list[dict], losses: list[str], n: int, variants: list[str]) -> str:
    header = ["loss", f"eager ms (n={n})"]
    for variant in variants:
        header += [f"{variant} ms", f"{variant} speed-up"]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for name in losses:
        eager = _find(rows, "ours", name, "eager", n)
        cells = [name, _cell_ms(eager)]
        for variant in variants:
            row = _find(rows, "ours", name, variant, n)
            cell = _cell_ms(row)
            if row and "compile_s" in row:
                cell += f" (compile {row['compile_s']:.1f} s)"
            speedup = ""
            if row and eager and "ms" in row and "ms" in eager:
                speedup = f"{eager['ms'] / row['ms']:.2f}x"
            cells += [cell, speedup]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument(
        "--sizes",
        choices=list(SIZES),
        default="full",
        help="full (default), launch (n=256 only) or small (CPU smoke)",
    )
    parser.add_argument("--losses", help="comma-separated loss names (default: every loss)")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per case")
    parser.add_argument(
        "--compile", action="store_true", help="also torch.compile at the smallest n"
    )
    parser.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph variant")
    parser.add_argument("--no-pml", action="store_true", help="ours only")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for the whole run")
    parser.add_argument("--case-timeout", type=float, default=90.0, help="seconds per process")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(json.loads(args.child))
        return 0

    from clusterable.losses import available_losses

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"bench_gpu_losses: torch {torch.__version__} sees no CUDA GPU; use --device cpu")
        return 2
    sizes, dim = SIZES[args.sizes]
    losses = args.losses.split(",") if args.losses else available_losses()
    variants = ([] if args.no_graph or device.type != "cuda" else ["graph"]) + (
        ["compile"] if args.compile else []
    )
    pml, note = not args.no_pml, ""
    if pml:
        try:
            import pytorch_metric_learning  # noqa: F401
        except ImportError:
            pml, note = False, "pytorch-metric-learning is not importable here: ours only."
            print(note)
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"# bench_gpu_losses: {card}, torch {torch.__version__}, CUDA {torch.version.cuda}; "
        f"d={dim}, classes of {ITEMS_PER_CLASS}; tf32 matmul "
        f"{torch.backends.cuda.matmul.allow_tf32}",
        flush=True,
    )
    common = {"device": str(device), "dim": dim, "repeats": args.repeats}
    cases = [
        {
            "loss": name,
            "pml": PML_EQUIVALENT.get(name) if pml else None,
            "sizes": list(sizes),
            "variants": variants,
            **common,
        }
        for name in losses
    ]
    deadline = time.monotonic() + args.budget
    rows: list[dict] = []
    for case in cases:
        left = deadline - time.monotonic()
        if left < 5:
            rows.append({"loss": case["loss"], "stopped": f"budget of {args.budget:.0f} s spent"})
            print(f"  {case['loss']}: not run ({rows[-1]['stopped']})")
            continue
        start = time.monotonic()
        found = run_case(case, min(args.case_timeout, left))
        rows += found
        for row in found:
            if "variant" in row:
                print(
                    f"  {row['side']:<4} {row['loss']:<28} {row['variant']:<7} n={row['n']:<5} "
                    f"{_cell_ms(row)} ms, peak {_cell_mb(row)} MB",
                    flush=True,
                )
        print(f"  ({case['loss']}: {time.monotonic() - start:.1f} s)", flush=True)

    markdown, flags = table(rows, losses, sizes, pml)
    if note:
        markdown += "\n\n" + note
    stopped = [f"- {row['loss']}: {row['stopped']}" for row in rows if "stopped" in row]
    if stopped:
        markdown += "\n\nNot measured in full:\n" + "\n".join(stopped)
    print("\n" + markdown)
    extra = ""
    if variants:
        extra = variants_table(rows, losses, min(sizes), variants)
        print(f"\nLaunch overhead at n={min(sizes)}: eager against {', '.join(variants)}\n{extra}")
    print("\nflags: " + ("; ".join(flags) if flags else "none"))
    if args.json:
        largest = [_find(rows, "ours", name, "eager", max(sizes)) for name in losses]
        timed = [(r["ms"], r["loss"]) for r in largest if r and "ms" in r]
        ratios = [
            theirs["ms"] / ours["ms"]
            for name in losses
            if name in PML_EQUIVALENT
            for n in sizes
            if (ours := _find(rows, "ours", name, "eager", n))
            and (theirs := _find(rows, "pml", PML_EQUIVALENT[name], "eager", n))
            and "ms" in ours
            and "ms" in theirs
        ]
        summary = {
            "device": card,
            "losses": len(losses),
            "timed_at_largest": len(timed),
            "largest_n": max(sizes),
            "slowest_at_largest": max(timed) if timed else None,
            "min_ratio": min(ratios) if ratios else None,
            "pml": pml,
            "flags": flags,
            "markdown": markdown + ("\n\n" + extra if extra else ""),
            "rows": rows,
        }
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
