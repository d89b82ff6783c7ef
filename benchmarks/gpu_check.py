"""One run on a machine with a CUDA GPU: the CUDA tests, the whole suite, the demo and the GPU
benchmarks, each timed under its own time budget, then one summary table.

Run from the repository root with the machine's own python3 (the one that holds the CUDA build of
torch; ``make gpu-check`` installs the carried wheels of ``make gpu-wheels`` first)::

    PYTHONPATH=src:/tmp/site python3 benchmarks/gpu_check.py               # a to e, and g
    PYTHONPATH=src:/tmp/site python3 benchmarks/gpu_check.py --steps b,d   # a rerun of some steps
    PYTHONPATH=src:/tmp/site python3 benchmarks/gpu_check.py --steps f     # torch.compile
    .venv/bin/python benchmarks/gpu_check.py --smoke --steps c,d,e         # CPU, tiny sizes

Steps (a letter each, for ``--steps``):

a. the CUDA tests: ``pytest -m cuda -n 4``; passed, failed and skipped counts;
b. the whole suite but the slow tests, ``pytest -m "not slow" -n 12`` (no ruff): torch sees the
   GPU, so the device rule's ``auto`` puts every path on CUDA; counts and the failing tests;
c. ``clusterable demo --quick --device cuda``: whether it ran, and its seconds;
d. ``bench_gpu_losses.py --compile``: every loss's forward + backward at n = 256, 1024, 4096,
   eager and under ``torch.compile``, time and peak memory, beside pml, and a CUDA graph of each
   at n = 256 (issue 40's figures);
e. ``bench_gpu_evaluate.py --probe-topk``: the search's top-k options, then the whole evaluation
   table at a million items and SOP size, with the float32 candidate pass and with TF32
   candidates re-scored in float32 (`clusterable.evaluate._low_precision`), and a profile of
   the search's stages at a million;
f. (only when named) ``bench_gpu_losses.py --compile`` at n = 256 alone, without pml;
g. ``bench_train.py`` on the device: ResNet-50 (torchvision, random weights) at 224 px, batch
   128, lifted loss, bf16: our training step against the best plain loop (bf16, channels_last;
   target 0.95x, issue 28), and ``fit`` from generated JPEGs against our step (target 0.9x,
   issue 40), its training view (crop, resize, flip) made on the GPU (``augment_on: device``),
   for each of :data:`TRAIN_FIT_CASES`: CUB's size (6,000 photos) decoded into memory and 20,480
   photos through the disk cache, from 1600 x 1200 and from 400 x 300 JPEGs; the second epoch
   is timed, each case's decoding (once per case) is reported beside it.

a, b and c check correctness and run side by side (``--serial``: one after the other); d, e and
f time things and run afterwards, one at a time, on an idle card. A step that fails or passes its
budget is reported and the next one runs: a pytest step over budget is interrupted (SIGINT, so
that pytest prints the counts so far), anything else is killed. Exit status: 0 when every step
ran (a benchmark bound missed is a figure, not a failure), 1 when one failed or timed out, 2 when
torch sees no CUDA GPU (without ``--smoke``).

With ``OUT`` set, ``$OUT/gpu_check.md`` receives the summary and the benchmarks' tables,
``$OUT/gpu_check.json`` the results and ``$OUT/gpu_check_<step>.log`` each step's whole output:
8 files at most.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent


@dataclass(frozen=True)
class Step:
    """One step of the check: its letter, what it is, its time budget and when it runs."""

    key: str
    title: str
    budget_s: float
    #: Correctness steps run side by side; timing steps alone, after them.
    timing: bool
    #: Run when ``--steps`` is not given.
    default: bool = True


STEPS = {
    step.key: step
    for step in (
        Step("a", "CUDA tests (pytest -m cuda)", 150, timing=False),
        Step("b", 'whole suite on CUDA (pytest -m "not slow")', 150, timing=False),
        Step("c", "clusterable demo --quick on the device", 150, timing=False),
        Step("d", "loss benchmark, eager and compiled (bench_gpu_losses)", 140, timing=True),
        Step("e", "evaluation benchmark (bench_gpu_evaluate)", 150, timing=True),
        Step("f", "losses under torch.compile, n=256", 400, timing=True, default=False),
        Step("g", "training throughput (bench_train)", 140, timing=True),
    )
}
#: With the default steps, a, b and c side by side, then d, e and g: at most 150 + 140 + 150 +
#: 140 = 580 s, so that one 10-minute call holds them all (issue 40; run 1 on an H200: b took
#: 102 s with 2,404 tests on 8 workers, e without the probe 119 s, d without compiling 84 s).
#: d, e and g stop starting cases when their budget is nearly spent, and report what they
#: measured; ``--steps d`` or ``--budgets d=400`` gives one step a call of its own.
DEFAULT_STEPS = ",".join(key for key, step in STEPS.items() if step.default)


@dataclass
class StepResult:
    """What one step did: ``status`` is ok, flagged (ran; a bound or target missed), FAILED,
    TIMEOUT or "not run"."""

    key: str
    title: str
    status: str
    seconds: float
    figures: str = ""
    #: Longer findings for the report below the table (failing tests, benchmark tables).
    details: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.status in ("FAILED", "TIMEOUT")


def parse_steps(text: str) -> list[str]:
    """The step letters of ``--steps`` ("a,c,d"), in the order they run; unknown letters refused."""
    keys = [key.strip().lower() for key in text.split(",") if key.strip()]
    unknown = sorted(set(keys) - set(STEPS))
    if unknown or not keys:
        raise ValueError(
            f"--steps takes letters from {', '.join(STEPS)} separated by commas (e.g. a,c,d); "
            f"got {text!r}"
        )
    return [key for key in STEPS if key in keys]


def parse_budgets(text: str | None) -> dict[str, float]:
    """``--budgets b=300,e=200`` as ``{"b": 300.0, "e": 200.0}``."""
    budgets: dict[str, float] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, _, seconds = item.partition("=")
        if key.strip() not in STEPS or not seconds.strip():
            raise ValueError(f"--budgets takes step=seconds pairs such as b=300, got {item!r}")
        budgets[key.strip()] = float(seconds)
    return budgets


# ---------------------------------------------------------------- pytest's output


_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)\b")
_DURATION = re.compile(r" in \d+(\.\d+)?s\b")


def pytest_counts(output: str) -> dict[str, int]:
    """The counts of pytest's last summary line ("3 failed, 200 passed, 5 skipped in 9.1s")."""
    for line in reversed(output.splitlines()):
        found = _COUNT.findall(line)
        if found and _DURATION.search(line):
            return {"error" if word.startswith("error") else word: int(n) for n, word in found}
    return {}


def failing_tests(output: str) -> list[str]:
    """The ids of pytest's ``FAILED`` and ``ERROR`` lines (short summary, ``-ra``)."""
    ids = []
    for line in output.splitlines():
        for prefix in ("FAILED ", "ERROR "):
            if line.startswith(prefix):
                ids.append(line[len(prefix) :].split(" - ")[0].strip())
    return list(dict.fromkeys(ids))


def describe_counts(counts: Mapping[str, int]) -> str:
    order = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
    parts = [f"{counts[word]} {word}" for word in order if counts.get(word)]
    if parts:
        return ", ".join(parts)
    if counts:
        return f"no test ran ({counts.get('deselected', 0)} deselected)"
    return "no counts (pytest printed no summary)"


# ---------------------------------------------------------------- the summary


def summary_table(results: list[StepResult], budgets: Mapping[str, float]) -> str:
    """One row per step: status, seconds, budget and key figures."""
    lines = [
        "| step | what | status | seconds | budget | key figures |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        figures = r.figures.replace("|", "/").replace("\n", " ")
        budget = budgets.get(r.key)
        lines.append(
            f"| {r.key} | {r.title} | {r.status} | {r.seconds:.1f} | "
            f"{'' if budget is None else f'{budget:.0f}'} | {figures} |"
        )
    return "\n".join(lines)


def details_markdown(results: list[StepResult]) -> str:
    """Each step's longer findings under a heading of its own ("" when none has any)."""
    parts = ["\n".join([f"## {r.key}. {r.title}", "", *r.details]) for r in results if r.details]
    return "\n\n".join(parts)


def summary_markdown(header: str, results: list[StepResult], budgets: Mapping[str, float]) -> str:
    """The report: the header line, the summary table, then each step's details."""
    details = details_markdown(results)
    body = [header, "", summary_table(results, budgets)] + (["", details] if details else [])
    return "\n".join(body) + "\n"


def write_report(
    out: Path, header: str, results: list[StepResult], budgets: Mapping[str, float]
) -> Path:
    """``gpu_check.md`` (the summary) and ``gpu_check.json`` (the results) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    report = out / "gpu_check.md"
    report.write_text(summary_markdown(header, results, budgets))
    data = {"header": header, "steps": [asdict(r) for r in results], "budgets": dict(budgets)}
    (out / "gpu_check.json").write_text(json.dumps(data, indent=1))
    return report


def run_steps(
    keys: list[str],
    runners: Mapping[str, Callable[[], StepResult]],
    serial: bool = False,
    report: Callable[[StepResult], None] = lambda result: None,
) -> list[StepResult]:
    """Run the steps ``keys``: the correctness ones side by side (one after the other with
    ``serial``), then the timing ones one at a time. A step that raises becomes a FAILED row and
    the others still run. Results come back in the order of ``keys``."""

    def guarded(key: str) -> StepResult:
        start = time.monotonic()
        try:
            result = runners[key]()
        except Exception as error:  # the check goes on after a broken step
            result = StepResult(
                key,
                STEPS[key].title,
                "FAILED",
                time.monotonic() - start,
                f"{type(error).__name__}: {error}"[:300],
            )
        report(result)
        return result

    together = [key for key in keys if not STEPS[key].timing]
    alone = [key for key in keys if STEPS[key].timing]
    results: dict[str, StepResult] = {}
    if serial or len(together) < 2:
        results.update((key, guarded(key)) for key in together)
    else:
        with ThreadPoolExecutor(max_workers=len(together)) as pool:
            results.update(zip(together, pool.map(guarded, together), strict=True))
    results.update((key, guarded(key)) for key in alone)
    return [results[key] for key in keys]


# ---------------------------------------------------------------- running the steps


def run_command(
    command: list[str], budget_s: float, log: Path, interrupt_first: bool = False
) -> tuple[int | None, float, str]:
    """Run ``command`` from the repository root with its output in ``log``; past ``budget_s``
    interrupt it (pytest then prints its counts so far) or kill it. Returns the exit status (None
    on a timeout), the seconds and the output."""
    # Children start in the repository root: a relative PYTHONPATH (src) is made absolute first.
    paths = [str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"} | (
        {"PYTHONPATH": ":".join(paths)} if paths else {}
    )
    start = time.monotonic()
    with log.open("w") as sink:
        sink.write("$ " + " ".join(command) + "\n")
        sink.flush()
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            status: int | None = process.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            status = None
            if interrupt_first:
                os.killpg(process.pid, signal.SIGINT)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pass
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    seconds = time.monotonic() - start
    return status, seconds, log.read_text(errors="replace")


@dataclass
class Context:
    """What every step needs: the device, the folders, the budgets, the mode."""

    device: str
    smoke: bool
    logs: Path
    scratch: Path
    budgets: dict[str, float]

    def log(self, key: str) -> Path:
        return self.logs / f"gpu_check_{key}.log"


def pytest_step(key: str, ctx: Context, args: list[str]) -> StepResult:
    step, budget = STEPS[key], ctx.budgets[key]
    command = [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider"]
    command.append("--continue-on-collection-errors")  # one broken module must not hide the rest
    status, seconds, output = run_command(command, budget, ctx.log(key), interrupt_first=True)
    counts = pytest_counts(output)
    failing = failing_tests(output)
    figures = describe_counts(counts)
    if status is None:
        verdict = "TIMEOUT"
        figures = f"interrupted after {budget:.0f} s: {figures}"
    elif status == 0 and key == "a" and not counts.get("passed"):
        verdict, figures = "FAILED", f"no CUDA test ran ({figures})"
    else:
        verdict = "ok" if status == 0 else "FAILED"
    if failing:
        shown = ", ".join(failing[:5])
        figures += f"; failing: {shown}" + (
            f" (+{len(failing) - 5} more)" if len(failing) > 5 else ""
        )
    details = [f"- `{test}`" for test in failing]
    return StepResult(key, step.title, verdict, seconds, figures, details)


def demo_step(ctx: Context) -> StepResult:
    out = ctx.scratch / "demo"
    command = [sys.executable, "-m", "clusterable", "demo", "--quick", "--device", ctx.device]
    status, seconds, output = run_command(
        command + ["--out", str(out)], ctx.budgets["c"], ctx.log("c")
    )
    written = sorted(p.name for p in out.glob("*")) if out.is_dir() else []
    if status is None:
        return StepResult(
            "c", STEPS["c"].title, "TIMEOUT", seconds, f"killed after {ctx.budgets['c']:.0f} s"
        )
    if status != 0:
        last = (output.strip().splitlines() or ["no output"])[-1][:200]
        return StepResult("c", STEPS["c"].title, "FAILED", seconds, f"exit status {status}: {last}")
    has_table = "results.md" in written
    figures = f"ran in {seconds:.0f} s; {len(written)} files written" + (
        "" if has_table else "; no results.md"
    )
    return StepResult("c", STEPS["c"].title, "ok" if has_table else "FAILED", seconds, figures)


def benchmark_step(key: str, ctx: Context, script: str, args: list[str]) -> StepResult:
    """Run a benchmark that writes ``--json``; its figures come from that file."""
    step, budget = STEPS[key], ctx.budgets[key]
    result_file = ctx.scratch / f"{key}.json"
    command = [sys.executable, str(BENCHMARKS / script), "--device", ctx.device]
    command += [*args, "--json", str(result_file)]
    # The script stops starting cases a little before the budget; the kill is the last resort.
    command += ["--budget", f"{max(budget - 15, 10):.0f}"]
    status, seconds, output = run_command(command, budget, ctx.log(key))
    if not result_file.exists():
        last = (output.strip().splitlines() or ["no output"])[-1][:200]
        why = f"killed after {budget:.0f} s" if status is None else f"exit status {status}: {last}"
        return StepResult(key, step.title, "TIMEOUT" if status is None else "FAILED", seconds, why)
    data = json.loads(result_file.read_text())
    figures, flagged = (
        loss_figures(data) if script == "bench_gpu_losses.py" else evaluate_figures(data)
    )
    status_word = "FAILED" if status != 0 else "flagged" if flagged else "ok"
    return StepResult(key, step.title, status_word, seconds, figures, [data["markdown"]])


def loss_figures(data: Mapping) -> tuple[str, bool]:
    """Key figures of ``bench_gpu_losses.py --json``, and whether a bound was passed."""
    parts = [f"{data['timed_at_largest']}/{data['losses']} losses timed at n={data['largest_n']:,}"]
    if data["slowest_at_largest"]:
        ms, name = data["slowest_at_largest"]
        parts.append(f"slowest {name} {ms:.2f} ms")
    if data["min_ratio"] is not None:
        parts.append(f"lowest pml/ours {data['min_ratio']:.2f}x")
    elif not data["pml"]:
        parts.append("pml not run")
    parts.append(f"{len(data['flags'])} flags" if data["flags"] else "no flags")
    if data.get("compiled_at_largest") is not None:
        parts.append(f"{data['compiled_at_largest']}/{data['losses']} compiled at the largest n")
    graphs = [r for r in data["rows"] if r.get("variant") == "graph"]
    if graphs:
        parts.append(f"{sum('ms' in r for r in graphs)}/{len(graphs)} CUDA graphs ran")
    incomplete = data["timed_at_largest"] < data["losses"]
    return "; ".join(parts), bool(data["flags"]) or incomplete


def evaluate_figures(data: Mapping) -> tuple[str, bool]:
    """Key figures of ``bench_gpu_evaluate.py --json``, and whether a target was missed."""
    parts = []
    for size, sides in data["results"].items():
        ours, theirs = sides.get("ours", {}), sides.get("pml", {})
        if "seconds" in ours:
            gpu = f", {ours['gpu_mb']:,.0f} MB GPU" if ours.get("gpu_mb") is not None else ""
            text = f"{size} {ours['seconds']:.2f} s{gpu}"
        elif "timeout" in ours:
            text = f"{size} > {ours['timeout']:.0f} s"
        else:
            text = f"{size} {ours.get('error') or ours.get('skipped') or 'not run'}"[:120]
        if "seconds" in ours and "seconds" in theirs:
            text += f" (pml/ours {theirs['seconds'] / ours['seconds']:.1f}x)"
        verdict = data["verdicts"].get(size, "-")
        parts.append(text + ("" if verdict == "-" else f" [{verdict}]"))
        if "pairs" in sides:  # issue 38: the table with the pair metrics, against it alone
            row, verdict = sides["pairs"], data["verdicts"].get(size + "+pairs", "-")
            ratio = (
                f" ({row['seconds'] / ours['seconds']:.2f}x the table)"
                if "seconds" in row and "seconds" in ours
                else ""
            )
            seconds = f"{row['seconds']:.2f} s" if "seconds" in row else "not timed"
            parts.append(
                f"{size} + pair metrics {seconds}{ratio}"
                + ("" if verdict == "-" else f" [{verdict}]")
            )
        for side in [side for side in sides if side.startswith("ours+")]:  # low-precision passes
            row, verdict = sides[side], data["verdicts"].get(size + side[4:], "-")
            seconds = f"{row['seconds']:.2f} s" if "seconds" in row else "not timed"
            parts.append(
                f"{size} {side[5:]} {seconds}" + ("" if verdict == "-" else f" [{verdict}]")
            )
    flagged = any(v.startswith("MISSED") for v in data["verdicts"].values())
    return "; ".join(parts), flagged


#: bench_train's ratio lines: "step / plain loop: 1.012x, the median of the repeats' ratios
#: (1.01) (target >= 0.95)"; the targets are bench_train's.
_RATIO = re.compile(
    r"^(step / plain loop|fit(?:\[[^\]\n]*\])? from files / step): ([\d.]+)x"
    r".*\(target >= ([\d.]+)\)$",
    re.MULTILINE,
)
#: Step g's fit sides (issue 40): CUB's size (6,000 photos) decoded into memory and 20,480 photos
#: through the disk cache, each from 1600 x 1200 and from 400 x 300 JPEGs; the heavier decoding
#: first, so that a spent budget leaves out the lighter.
TRAIN_FIT_CASES = (
    "6000:1600x1200:ram",
    "20480:1600x1200:disk",
    "6000:400x300:ram",
    "20480:400x300:disk",
)
#: The CPU smoke's: tiny, the default model.
SMOKE_FIT_CASES = ("32:80x60:ram", "48:160x120:disk")


def train_figures(output: str) -> tuple[str, bool]:
    """bench_train's ratios as one line, and whether one missed its target or a side was not
    run."""
    ratios = _RATIO.findall(output)
    figures = "; ".join(
        f"{name.removesuffix(' from files / step')} {value}x" for name, value, _ in ratios
    )
    not_run = re.search(r"^not run \(budget spent or interrupted\): (.*)$", output, re.MULTILINE)
    if not_run:
        figures += f"; budget spent, not run: {not_run.group(1)}"
    missed = not ratios or bool(not_run) or any(float(v) < float(t) for _, v, t in ratios)
    return figures or "no ratios", missed


def train_step(ctx: Context) -> StepResult:
    """bench_train.py's comparison on the device: our step against the plain loop, and ``fit``
    from files against our step for each of :data:`TRAIN_FIT_CASES`."""
    step, budget = STEPS["g"], ctx.budgets["g"]
    command = [sys.executable, str(BENCHMARKS / "bench_train.py"), "--device", ctx.device]
    if ctx.smoke:  # the CPU's default model, tiny
        command += ["--batch-size", "16", "--per-class", "8", "--image-size", "32"]
        cases, distinct = SMOKE_FIT_CASES, 4
    else:
        command += ["--model", "torchvision:resnet50", "--image-size", "224"]
        command += ["--batch-size", "128", "--per-class", "40"]
        command += ["--augment-on", "device"]  # the training view on the GPU (issue 40)
        cases, distinct = TRAIN_FIT_CASES, 128
    for case in cases:
        command += ["--fit-case", case]
    command += ["--distinct-photos", str(distinct), "--repeats", "1", "--epochs", "2"]
    command += ["--steps", "20", "--warmup", "5"]
    # The script stops starting sides a little before the budget; the kill is the last resort.
    command += ["--budget", f"{max(budget - 40, 10):.0f}"]
    status, seconds, output = run_command(command, budget, ctx.log("g"), interrupt_first=True)
    if status not in (0, None):
        last = (output.strip().splitlines() or ["no output"])[-1][:200]
        return StepResult("g", step.title, "FAILED", seconds, f"exit status {status}: {last}")
    figures, missed = train_figures(output)  # an interrupted run prints what it measured
    notes = [line for line in output.splitlines() if line.startswith(("wrote ", "repeat "))]
    table = output[output.find("\n| side |") :].strip() if "| side |" in output else ""
    details = ["\n".join(f"- {line}" for line in notes)] + ([table] if table else [])
    verdict = "TIMEOUT" if status is None else "flagged" if missed else "ok"
    if status is None:
        figures = f"interrupted after {budget:.0f} s: {figures}"
    return StepResult("g", step.title, verdict, seconds, figures, details)


def runners(ctx: Context) -> dict[str, Callable[[], StepResult]]:
    small = ["--sizes", "small"] if ctx.smoke else []
    return {
        "a": lambda: pytest_step("a", ctx, ["-m", "cuda", "-n", "4"]),
        # 12 workers of one torch thread each (tests/conftest.py) beside a's 4 and c: the suite
        # has grown to 4,100 tests since run 1.
        "b": lambda: pytest_step("b", ctx, ["-m", "not slow", "-n", "12"]),
        "c": lambda: demo_step(ctx),
        "d": lambda: benchmark_step(
            "d",
            ctx,
            "bench_gpu_losses.py",
            # The CPU smoke leaves compiling to f's (minutes a loss on a few cores).
            [*small, "--case-timeout", "45"]
            + ([] if ctx.smoke else ["--compile", "--compile-timeout", "120"]),
        ),
        "e": lambda: benchmark_step(
            "e",
            ctx,
            "bench_gpu_evaluate.py",
            ["--probe-topk"] + (["--sizes", "small"] if ctx.smoke else ["--timeout", "60"]),
        ),
        "f": lambda: benchmark_step(
            "f",
            ctx,
            "bench_gpu_losses.py",
            # The smoke run compiles two losses only: a pair loss and spectral.
            (small + ["--losses", "spectral,triplet"] if ctx.smoke else ["--sizes", "launch"])
            + ["--compile", "--no-graph", "--no-pml", "--case-timeout", "90"],
        ),
        "g": lambda: train_step(ctx),
    }


def header_line(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        card = torch.cuda.get_device_name(torch.device(device))
        where = f"{card}, torch {torch.__version__}, CUDA {torch.version.cuda}"
    else:
        where = f"CPU smoke run (no GPU), torch {torch.__version__}"
    return f"# gpu_check: {where}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M')}"


def command_on_path(folder: Path) -> Path | None:
    """Where there is no ``clusterable`` command (a GPU machine's python3 runs this checkout from
    ``PYTHONPATH``, uninstalled), one in ``folder`` that runs ``python3 -m clusterable`` with this
    interpreter, put first on every step's PATH: the documentation's shell examples
    (tests/test_docs_examples.py) call it. Returns it, or None where PATH has one."""
    if shutil.which("clusterable"):
        return None
    folder.mkdir(parents=True, exist_ok=True)
    launcher = folder / "clusterable"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m clusterable "$@"\n')
    launcher.chmod(0o755)
    os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
    return launcher


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="The GPU check: tests, demo and GPU benchmarks, each under a time budget, "
        "then one summary table (see the module docstring)."
    )
    parser.add_argument("--steps", default=DEFAULT_STEPS, help="step letters, e.g. a,c,d")
    parser.add_argument("--budgets", help="seconds per step, e.g. b=300,e=200")
    parser.add_argument("--serial", action="store_true", help="run a, b and c one at a time")
    parser.add_argument(
        "--smoke", action="store_true", help="on the CPU at tiny sizes: checks this script"
    )
    args = parser.parse_args(argv)
    try:
        keys = parse_steps(args.steps)
        budgets = {key: step.budget_s for key, step in STEPS.items()} | parse_budgets(args.budgets)
    except ValueError as error:
        parser.error(str(error))

    import torch

    if not args.smoke and not torch.cuda.is_available():
        print(
            f"gpu_check: torch {torch.__version__} sees no CUDA GPU here; run it on a machine "
            "with one (or --smoke for a CPU smoke run of this script)"
        )
        return 2
    device = "cpu" if args.smoke else "cuda"
    header = header_line(device)
    print(header, flush=True)
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    logs = out or Path(tempfile.mkdtemp(prefix="gpu_check-"))
    logs.mkdir(parents=True, exist_ok=True)
    total = sum(budgets[k] for k in keys if STEPS[k].timing) + max(
        [budgets[k] for k in keys if not STEPS[k].timing] or [0]
    )
    print(f"steps {','.join(keys)}; at most {total:.0f} s; logs in {logs}", flush=True)

    def progress(result: StepResult) -> None:
        print(
            f"[{result.key}] {result.status} in {result.seconds:.0f} s: {result.figures}",
            flush=True,
        )

    with tempfile.TemporaryDirectory(prefix="gpu_check-") as scratch:
        launcher = command_on_path(Path(scratch) / "bin")
        if launcher:
            print(f"no clusterable command on PATH here: {launcher} runs this checkout's")
        ctx = Context(device, args.smoke, logs, Path(scratch), budgets)
        results = run_steps(keys, runners(ctx), serial=args.serial, report=progress)
    details = details_markdown(results)
    if details:
        print("\n" + details)
    print(f"\n{header}\n\n{summary_table(results, budgets)}")  # last: the end of the output
    if out is not None:
        print(f"\nwrote {write_report(out, header, results, budgets)}")
    return 1 if any(r.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
