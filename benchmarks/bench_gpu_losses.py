"""Time and peak memory of every loss's forward + backward, eager and compiled, beside PML.

Run from the repository root, with the python that holds the CUDA build of torch::

    PYTHONPATH=src python3 benchmarks/bench_gpu_losses.py             # n = 256, 1024, 4096
    PYTHONPATH=src python3 benchmarks/bench_gpu_losses.py --compile   # + torch.compile at each n
    .venv/bin/python benchmarks/bench_gpu_losses.py --device cpu --sizes 256   # CPU smoke test

What is measured:

- every loss of ``clusterable.losses.available_losses()`` at n = 256, 1024 and 4096 (``--sizes``:
  a preset or batch sizes such as ``256,4096``), d = 512, classes of 8 items, float32 embeddings
  drawn N(0, 1) that require grad; the losses with class weights get ``num_classes`` and
  ``embedding_dim``, ``opml`` its ``embedding_dim``;
- pytorch-metric-learning's nearest equivalent where there is one, the pairs of
  ``bench_losses.py`` case 4: contrastive -> ``ContrastiveLoss``, triplet ->
  ``TripletMarginLoss`` + ``TripletMarginMiner("semihard")``, snn -> ``NCALoss``, lifted ->
  ``LiftedStructureLoss`` (not run where its ``|P| x |N|`` pair mask passes 8 GiB: n >= 1024;
  the triplet miner's lists of every triplet take 5.2 GiB at n = 4096).
  The definitions differ in details: the ratio compares cost, not values;
- time: one ``loss(x, labels).backward()`` between two ``torch.cuda.Event`` records (the host
  clock on the CPU), the stream synchronised after each call, so each call starts on an idle card
  and a launch-bound loss pays its launches; median of up to ``--repeats`` calls (at least 3; a
  case stops after 1 s once it has them), after warm-up calls;
- peak: the most memory torch's allocator held during one call, minus what it held before it
  (the inputs and the loss's own parameters are not counted; x's gradient is). On CUDA
  ``torch.cuda.max_memory_allocated``, reset just before the call; on the CPU, which keeps no
  such statistic, the running total of the allocator's events under
  ``torch.profiler.profile(profile_memory=True)`` (every tensor allocation and free, exact to
  the byte; a library's own workspace outside torch's allocator is not seen), in a call of its
  own since the profiler slows the call down;
- with ``--compile``: the loss under ``torch.compile(loss, dynamic=True)`` (inductor), one
  compilation serving every n, timed and measured as eager; its first call at each n, compile
  included, is reported as ``compile s``;
- at the smallest n, on CUDA, the whole forward + backward captured in one CUDA graph
  (``torch.cuda.graph``) and replayed: a way to cut the launch overhead of small batches. A loss
  whose call synchronises with the host (a data-dependent shape, a check read back on the CPU)
  cannot be captured: the row says so and why.

Each loss runs in its own subprocess: ours at every size, then pml's equivalent at every size,
then the CUDA graph (a failed capture can leave the stream unusable, so it comes last); with
``--compile``, once every loss has its eager rows, a second subprocess per loss compiles it. A
process per case would start torch and CUDA 64 times, seconds each. Each process prints one JSON
line per result as it goes, so a crash or a timeout loses only what was left. On the CPU each
process uses one torch thread.

Rows flagged ``!``: at the largest n, ours above 10 ms or 1 GB; at any n, pml faster than ours
(ratio < 1.0), or a compilation that failed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
from bench_losses import PML_EQUIVALENT, pml_lifted_mask_gib

#: ``--sizes`` presets: (batch sizes, embedding width). ``launch``: the small batch alone.
SIZES = {"full": ((256, 1024, 4096), 512), "launch": ((256,), 512), "small": ((32, 64), 32)}
#: Embedding width for batch sizes given as numbers (``--sizes 256,4096``).
DEFAULT_DIM = 512
ITEMS_PER_CLASS = 8
#: Flags at the largest n (the issue's bounds).
SLOW_MS, LARGE_MB = 10.0, 1024.0
#: pml's lifted and triplet losses are not run where what they build per pair x pair or per
#: triplet would pass this (:func:`pml_index_gib`).
PML_MAX_GIB = 8.0
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


def pml_index_gib(name: str, n: int) -> tuple[float, str]:
    """GiB of what pml's equivalent builds in proportion to pairs x pairs or to triplets at n,
    and what it is: the lifted loss's float ``|P| x |N|`` mask; the semi-hard miner's three int64
    lists of every triplet (``n (c - 1) (n - c)`` with classes of ``c``), built then joined."""
    if name == "LiftedStructureLoss":
        # No "|" in the words: they end up in a markdown table's cell.
        return pml_lifted_mask_gib(n, 0, n // ITEMS_PER_CLASS), "positive x negative pair mask"
    if name == "TripletMarginLoss+semihard":
        triplets = n * (ITEMS_PER_CLASS - 1) * (n - ITEMS_PER_CLASS)
        return 2 * 3 * 8 * triplets / 2**30, "list of every triplet"
    return 0.0, ""


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


def _cpu_peak_mb(step: Step) -> float:
    """MiB above the start that torch's CPU allocator held at most during ``step``: the running
    total of the profiler's memory events. The total carries over allocations made under earlier
    profiles, so the baseline is the total just before the first event."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    with tempfile.TemporaryDirectory(prefix="bench_gpu_losses-") as folder:
        trace = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text())["traceEvents"]
    memory = [event["args"] for event in events if event.get("name") == "[memory]"]
    if not memory:
        return 0.0
    baseline = memory[0]["Total Allocated"] - memory[0]["Bytes"]
    return max(0, max(m["Total Allocated"] for m in memory) - baseline) / 2**20


def _peak_mb(step: Step, device: torch.device) -> float:
    if device.type != "cuda":
        return _cpu_peak_mb(step)
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


def measure_compiled(
    compiled: torch.nn.Module, n: int, dim: int, device: torch.device, repeats: int
) -> dict:
    """A compiled loss at n, as :func:`measure_eager`, and the seconds of its first call (the
    compile time)."""
    x, labels = _batch(n, dim, device)

    def step() -> None:
        _zero_grads(compiled, x)
        compiled(x, labels).backward()

    start = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    compile_s = time.perf_counter() - start
    _warm_up(step, device)
    peak = _peak_mb(step, device)
    return {"ms": _median_ms(step, device, repeats), "peak_mb": peak, "compile_s": compile_s}


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
        gib, what = pml_index_gib(name, n) if side == "pml" else (0.0, "")
        if gib > PML_MAX_GIB:
            _emit(side, name, "eager", n, {"skipped": f"not run: its {what} is {gib:,.0f} GiB"})
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


def _compiled_rows(name: str, spec: dict, device: torch.device) -> None:
    """Ours under ``torch.compile(dynamic=True)`` at every size, ascending, built for each n as
    eager is (the class count follows n): the graphs of the later sizes are the first's, with
    symbolic shapes, so inductor's cache serves them."""
    dim = spec["dim"]
    for n in sorted(spec["sizes"]):
        try:
            loss = _build("ours", name, n // ITEMS_PER_CLASS, dim, device)
            compiled = torch.compile(loss, dynamic=True)
            result = measure_compiled(compiled, n, dim, device, spec["repeats"])
        except Exception as error:  # a graph that does not compile: the row says why
            _emit("ours", name, "compile", n, {"error": _why(error)})
            return
        _emit("ours", name, "compile", n, result)


def run_child(spec: dict) -> None:
    """One loss of ours at every size, its pml equivalent (``spec["pml"]``) at every size, then
    the CUDA graph at the smallest; or (``spec["compile"]``) ours compiled at every size. One
    JSON line per result, printed as it comes."""
    device = torch.device(spec["device"])
    if device.type == "cpu":
        torch.set_num_threads(1)  # the CPU smoke test shares its cores
    torch.manual_seed(0)
    name, dim = spec["loss"], spec["dim"]
    if spec.get("compile"):
        _compiled_rows(name, spec, device)
        return
    _eager_rows("ours", name, spec, device)
    if spec.get("pml"):
        _eager_rows("pml", spec["pml"], spec, device)
    if not spec.get("graph"):
        return
    n = min(spec["sizes"])
    if device.type != "cuda":
        _emit("ours", name, "graph", n, {"skipped": "CUDA graphs need a CUDA device"})
        return
    try:
        loss = _build("ours", name, n // ITEMS_PER_CLASS, dim, device)
        _emit("ours", name, "graph", n, measure_graphed(loss, n, dim, device, spec["repeats"]))
    except Exception as error:  # e.g. a host sync during capture
        _emit("ours", name, "graph", n, {"error": _why(error)})


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


def _row_flags(
    ours: dict | None, compiled: dict | None, theirs: dict | None, largest: bool, compiling: bool
) -> list[str]:
    """What one (loss, n) row misses: the issue's bounds at the largest n, pml faster, a time or
    a compilation missing."""
    flag = []
    if ours and theirs and "ms" in ours and "ms" in theirs and theirs["ms"] < ours["ms"]:
        flag.append("pml faster")
    if ours and "ms" in ours and largest:
        if ours["ms"] > SLOW_MS:
            flag.append(f"> {SLOW_MS:.0f} ms")
        if (ours.get("peak_mb") or 0) > LARGE_MB:
            flag.append("> 1 GB")
    if ours is None or "ms" not in ours:
        flag.append("no time")
    if compiling and (compiled is None or "ms" not in compiled):
        flag.append("not compiled")
    return flag


def _ratio(slow: dict | None, fast: dict | None) -> str:
    if slow and fast and "ms" in slow and "ms" in fast:
        return f"{slow['ms'] / fast['ms']:.2f}x"
    return ""


def table(
    rows: list[dict], losses: list[str], sizes: tuple[int, ...], pml: bool, compiling: bool
) -> tuple[str, list[str]]:
    """The markdown table (eager, compiled when ``compiling``, pml) and the flags raised."""
    header = ["loss", "n", "ours ms", "ours peak MB"]
    if compiling:
        header += ["compiled ms", "eager / compiled", "compiled peak MB", "compile s"]
    header += ["pml", "pml ms", "pml / ours", "pml peak MB", "flag"]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    flags: list[str] = []
    for name in losses:
        pml_name = PML_EQUIVALENT.get(name) if pml else None
        for n in sizes:
            ours = _find(rows, "ours", name, "eager", n)
            compiled = _find(rows, "ours", name, "compile", n) if compiling else None
            theirs = _find(rows, "pml", pml_name, "eager", n) if pml_name else None
            flag = _row_flags(ours, compiled, theirs, n == max(sizes), compiling)
            if flag:
                flags.append(f"{name} n={n}: {', '.join(flag)}")
            cells = [name, f"{n:,}", _cell_ms(ours), _cell_mb(ours)]
            if compiling:
                seconds = f"{compiled['compile_s']:.1f}" if compiled and "ms" in compiled else ""
                cells += [_cell_ms(compiled), _ratio(ours, compiled), _cell_mb(compiled), seconds]
            cells += [pml_name or ""]
            cells += (
                [_cell_ms(theirs), _ratio(theirs, ours), _cell_mb(theirs)] if pml_name else [""] * 3
            )
            cells.append("! " + "; ".join(flag) if flag else "")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), flags


def graph_table(rows: list[dict], losses: list[str], n: int) -> str:
    """Eager against the CUDA graph at the smallest n."""
    lines = [f"| loss | eager ms (n={n}) | graph ms | graph speed-up |", "|---|---|---|---|"]
    for name in losses:
        eager, graph = _find(rows, "ours", name, "eager", n), _find(rows, "ours", name, "graph", n)
        lines.append(f"| {name} | {_cell_ms(eager)} | {_cell_ms(graph)} | {_ratio(eager, graph)} |")
    return "\n".join(lines)


def parse_sizes(text: str) -> tuple[tuple[int, ...], int]:
    """``--sizes``: a preset of :data:`SIZES`, or batch sizes separated by commas (d = 512)."""
    if text in SIZES:
        return SIZES[text]
    try:
        sizes = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        sizes = ()
    if not sizes or sizes[0] < 2 * ITEMS_PER_CLASS:
        raise ValueError(
            f"--sizes takes {', '.join(SIZES)} or batch sizes of at least "
            f"{2 * ITEMS_PER_CLASS} separated by commas (e.g. 256,4096); got {text!r}"
        )
    return sizes, DEFAULT_DIM


def summary(
    rows: list[dict], losses: list[str], sizes: tuple[int, ...], compiling: bool
) -> dict[str, object]:
    """The key figures of ``--json``: timed losses and the slowest at the largest n, the lowest
    pml / ours ratio, and how many compiled."""
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
    compiled = [_find(rows, "ours", name, "compile", max(sizes)) for name in losses]
    return {
        "losses": len(losses),
        "timed_at_largest": len(timed),
        "largest_n": max(sizes),
        "slowest_at_largest": max(timed) if timed else None,
        "min_ratio": min(ratios) if ratios else None,
        "compiled_at_largest": sum(bool(r and "ms" in r) for r in compiled) if compiling else None,
    }


def run_cases(cases: list[dict], budget: float, timeouts: dict[bool, float]) -> list[dict]:
    """Every case in its own process, each under its timeout (``timeouts[compile]``), none
    started once ``budget`` seconds are spent; the rows, printed as they come."""
    deadline = time.monotonic() + budget
    rows: list[dict] = []
    for case in cases:
        left = deadline - time.monotonic()
        if left < 5:
            rows.append({"loss": case["loss"], "stopped": f"budget of {budget:.0f} s spent"})
            print(f"  {case['loss']}: not run ({rows[-1]['stopped']})")
            continue
        start = time.monotonic()
        found = run_case(case, min(timeouts[bool(case.get("compile"))], left))
        rows += found
        for row in found:
            if "variant" in row:
                print(
                    f"  {row['side']:<4} {row['loss']:<28} {row['variant']:<7} n={row['n']:<5} "
                    f"{_cell_ms(row)} ms, peak {_cell_mb(row)} MB",
                    flush=True,
                )
        print(f"  ({case['loss']}: {time.monotonic() - start:.1f} s)", flush=True)
    return rows


def _pml_available() -> tuple[bool, str]:
    """Whether pytorch-metric-learning imports here, and the note that says it does not."""
    try:
        import pytorch_metric_learning  # noqa: F401
    except ImportError:
        note = "pytorch-metric-learning is not importable here: ours only."
        print(note)
        return False, note
    return True, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument(
        "--sizes",
        default="full",
        help="full (default: 256,1024,4096), launch (256), small (32,64 at d=32: smoke), or "
        "batch sizes such as 256,4096 (d=512)",
    )
    parser.add_argument("--losses", help="comma-separated loss names (default: every loss)")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per case")
    parser.add_argument("--compile", action="store_true", help="also torch.compile at each n")
    parser.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph variant")
    parser.add_argument("--no-pml", action="store_true", help="ours only")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for the whole run")
    parser.add_argument("--case-timeout", type=float, default=90.0, help="seconds per process")
    parser.add_argument(
        "--compile-timeout", type=float, default=240.0, help="seconds per compiling process"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(json.loads(args.child))
        return 0

    from clusterable.losses import available_losses

    try:
        sizes, dim = parse_sizes(args.sizes)
    except ValueError as error:
        parser.error(str(error))
    losses = args.losses.split(",") if args.losses else available_losses()
    unknown = sorted(set(losses) - set(available_losses()))
    if unknown:
        parser.error(
            f"--losses: unknown {', '.join(unknown)}; choose from {', '.join(available_losses())}"
        )
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"bench_gpu_losses: torch {torch.__version__} sees no CUDA GPU; use --device cpu")
        return 2
    graph = not args.no_graph and device.type == "cuda"
    pml, note = (False, "") if args.no_pml else _pml_available()
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"# bench_gpu_losses: {card}, torch {torch.__version__}, CUDA {torch.version.cuda}; "
        f"d={dim}, classes of {ITEMS_PER_CLASS}; tf32 matmul "
        f"{torch.backends.cuda.matmul.allow_tf32}",
        flush=True,
    )
    common = {"device": str(device), "dim": dim, "repeats": args.repeats, "sizes": list(sizes)}
    # Every loss's eager rows first, so that compiling, the slowest part, cannot crowd them out.
    cases = [
        {"loss": name, "pml": PML_EQUIVALENT.get(name) if pml else None, "graph": graph, **common}
        for name in losses
    ]
    cases += [{"loss": name, "compile": True, **common} for name in losses if args.compile]
    rows = run_cases(cases, args.budget, {False: args.case_timeout, True: args.compile_timeout})

    markdown, flags = table(rows, losses, sizes, pml, args.compile)
    if note:
        markdown += "\n\n" + note
    stopped = [f"- {row['loss']}: {row['stopped']}" for row in rows if "stopped" in row]
    if stopped:
        markdown += "\n\nNot measured in full:\n" + "\n".join(stopped)
    if graph:
        markdown += f"\n\nLaunch overhead at n={min(sizes)}, eager against a CUDA graph:\n\n"
        markdown += graph_table(rows, losses, min(sizes))
    print("\n" + markdown)
    print("\nflags: " + ("; ".join(flags) if flags else "none"))
    if args.json:
        figures = summary(rows, losses, sizes, args.compile)
        data = {"device": card, **figures, "pml": pml, "flags": flags, "markdown": markdown}
        args.json.write_text(json.dumps({**data, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
