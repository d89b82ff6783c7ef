"""The GPU check's orchestration (benchmarks/gpu_check.py) on fake steps, no GPU; and CPU smoke
runs of its evaluation and loss benchmarks."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


def loaded(name: str):
    """The benchmark script ``benchmarks/<name>.py`` as a module, registered under its name while
    the tests use it (dataclasses look their module up by name)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPT.parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gpu_check():
    yield loaded("gpu_check")
    sys.modules.pop("gpu_check", None)


def test_steps_run_in_their_order_and_unknown_letters_are_refused(gpu_check):
    assert gpu_check.parse_steps("d, a,c") == ["a", "c", "d"]
    assert gpu_check.parse_steps("E") == ["e"]
    assert gpu_check.parse_steps(gpu_check.DEFAULT_STEPS) == ["a", "b", "c", "d", "e", "g"]
    for wrong in ("a,z", "", " , "):
        with pytest.raises(ValueError, match="--steps takes letters"):
            gpu_check.parse_steps(wrong)
    assert gpu_check.parse_budgets("b=300, e=12.5") == {"b": 300.0, "e": 12.5}
    with pytest.raises(ValueError, match="step=seconds"):
        gpu_check.parse_budgets("q=3")


def test_only_the_selected_steps_run_and_a_broken_one_does_not_stop_the_rest(gpu_check):
    ran: list[str] = []

    def fake(key: str, status: str = "ok"):
        def run():
            ran.append(key)
            if status == "raise":
                raise RuntimeError("the card fell off")
            return gpu_check.StepResult(key, gpu_check.STEPS[key].title, status, 1.5, f"{key} done")

        return run

    runners = {key: fake(key) for key in gpu_check.STEPS}
    runners["a"] = fake("a", "raise")
    runners["d"] = fake("d", "FAILED")
    seen: list[str] = []
    results = gpu_check.run_steps(
        ["a", "c", "d", "e"], runners, serial=True, report=lambda r: seen.append(r.key)
    )

    assert ran == ["a", "c", "d", "e"] == [r.key for r in results] == seen
    assert [r.status for r in results] == ["FAILED", "ok", "FAILED", "ok"]
    assert "RuntimeError: the card fell off" in results[0].figures
    assert [r.failed for r in results] == [True, False, True, False]

    # Side by side, the correctness steps still each run once and come back in step order.
    ran.clear()
    results = gpu_check.run_steps(["e", "c", "b", "a"][::-1], runners)
    assert sorted(ran) == ["a", "b", "c", "e"] and ran[-1] == "e"
    assert [r.key for r in results] == ["a", "b", "c", "e"]


def test_the_summary_table_and_markdown_report(gpu_check, tmp_path):
    results = [
        gpu_check.StepResult("a", "CUDA tests", "ok", 12.34, "11 passed"),
        gpu_check.StepResult(
            "b", "suite", "FAILED", 200.0, "2 failed | 9 passed", ["- `tests/x.py::t`"]
        ),
        gpu_check.StepResult("e", "evaluation", "flagged", 61.0, "sop 2.50 s [MISSED]", ["| t |"]),
    ]
    budgets = {"a": 150.0, "b": 230.0, "e": 140.0}
    header = "# gpu_check: NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, CUDA 13.0"

    table = gpu_check.summary_table(results, budgets).splitlines()
    assert table[0] == "| step | what | status | seconds | budget | key figures |"
    assert table[2] == "| a | CUDA tests | ok | 12.3 | 150 | 11 passed |"
    # A "|" inside the figures would split the row into more cells.
    assert table[3] == "| b | suite | FAILED | 200.0 | 230 | 2 failed / 9 passed |"
    assert len(table) == 2 + len(results)

    report = gpu_check.write_report(tmp_path, header, results, budgets)
    text = report.read_text()
    assert report.name == "gpu_check.md" and text.startswith(header + "\n\n| step |")
    assert "## b. suite\n\n- `tests/x.py::t`" in text and "## e. evaluation\n\n| t |" in text
    assert "## a." not in text  # no details, no heading
    data = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [s["status"] for s in data["steps"]] == ["ok", "FAILED", "flagged"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu_check.json", "gpu_check.md"]


def test_pytest_counts_and_failing_tests_are_read_off_its_output(gpu_check):
    output = "\n".join(
        [
            "........F.s",
            "=========================== short test summary info ============================",
            "SKIPPED [1] tests/test_a.py:3: no CUDA GPU on this machine",
            "FAILED tests/evaluate/test_x.py::test_knn[cuda] - AssertionError: 0.5 != 0.6",
            "ERROR tests/reproduce/test_experiment.py",
            "FAILED tests/evaluate/test_x.py::test_knn[cuda] - AssertionError: again",
            "1 failed, 2200 passed, 20 skipped, 4 deselected, 1 error in 100.23s (0:01:40)",
        ]
    )
    counts = gpu_check.pytest_counts(output)
    assert counts == {"failed": 1, "passed": 2200, "skipped": 20, "deselected": 4, "error": 1}
    assert gpu_check.failing_tests(output) == [
        "tests/evaluate/test_x.py::test_knn[cuda]",
        "tests/reproduce/test_experiment.py",
    ]
    assert gpu_check.describe_counts(counts) == "2200 passed, 1 failed, 1 error, 20 skipped"
    # An interrupted run still ends on its counts so far; no summary at all gives none.
    assert gpu_check.pytest_counts("!!! KeyboardInterrupt !!!\n7 passed in 3.2s") == {"passed": 7}
    assert gpu_check.pytest_counts("collected 12 items / 2 deselected\nKilled") == {}
    assert gpu_check.describe_counts({}).startswith("no counts")
    assert gpu_check.describe_counts({"deselected": 19}) == "no test ran (19 deselected)"


def test_benchmark_figures_say_what_was_missed(gpu_check):
    evaluation = {
        "verdicts": {"sop": "met", "million": "MISSED (> 75 s)"},
        "results": {
            "sop": {"ours": {"seconds": 1.5, "gpu_mb": 2048.0}, "pml": {"seconds": 30.0}},
            "million": {"ours": {"timeout": 75.0}, "pml": {"skipped": "not run at this size"}},
        },
    }
    figures, flagged = gpu_check.evaluate_figures(evaluation)
    assert (
        figures
        == "sop 1.50 s, 2,048 MB GPU (pml/ours 20.0x) [met]; million > 75 s [MISSED (> 75 s)]"
    )
    assert flagged
    evaluation["verdicts"]["million"] = "met"
    assert not gpu_check.evaluate_figures(evaluation)[1]

    losses = {
        "losses": 12,
        "timed_at_largest": 12,
        "largest_n": 4096,
        "slowest_at_largest": [3.25, "opml"],
        "min_ratio": 0.8,
        "pml": True,
        "flags": ["snn n=256: pml faster"],
        "compiled_at_largest": 11,
        "rows": [{"variant": "graph", "ms": 0.1}, {"variant": "graph", "error": "capture"}],
    }
    figures, flagged = gpu_check.loss_figures(losses)
    assert figures == (
        "12/12 losses timed at n=4,096; slowest opml 3.25 ms; lowest pml/ours 0.80x; 1 flags; "
        "11/12 compiled at the largest n; 1/2 CUDA graphs ran"
    )
    assert flagged
    losses["flags"] = []
    assert not gpu_check.loss_figures(losses)[1]
    losses["timed_at_largest"] = 11  # a loss without a time at n=4096 is flagged too
    assert gpu_check.loss_figures(losses)[1]


def test_evaluation_figures_name_each_candidate_pass(gpu_check):
    evaluation = {
        "verdicts": {"million": "MISSED (13.0 s > 12 s)", "million+tf32": "met"},
        "results": {
            "million": {"ours": {"seconds": 13.0}, "ours+tf32": {"seconds": 3.5}},
        },
    }
    figures, flagged = gpu_check.evaluate_figures(evaluation)
    assert figures == "million 13.00 s [MISSED (13.0 s > 12 s)]; million tf32 3.50 s [met]"
    assert flagged


def test_evaluation_figures_give_the_pair_metrics_against_the_table(gpu_check):
    evaluation = {
        "verdicts": {"sop": "met", "sop+pairs": "MISSED (1.80x > 1.5x)"},
        "results": {"sop": {"ours": {"seconds": 1.0}, "pairs": {"seconds": 1.8}}},
    }
    figures, flagged = gpu_check.evaluate_figures(evaluation)
    assert figures == (
        "sop 1.00 s [met]; sop + pair metrics 1.80 s (1.80x the table) [MISSED (1.80x > 1.5x)]"
    )
    assert flagged


def test_the_pair_verdict_holds_the_pair_metrics_to_half_the_table_on_top():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        spec = importlib.util.spec_from_file_location(
            "bench_gpu_evaluate", SCRIPT.parent / "bench_gpu_evaluate.py"
        )
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    assert bench.pair_verdict({"ours": {"seconds": 2.0}, "pairs": {"seconds": 3.0}}) == "met"
    assert bench.pair_verdict({"ours": {"seconds": 2.0}, "pairs": {"seconds": 3.2}}) == (
        "MISSED (1.60x > 1.5x)"
    )
    assert bench.pair_verdict({"ours": {"seconds": 2.0}, "pairs": {"timeout": 60}}) == (
        "MISSED (> 60 s)"
    )
    assert bench.pair_verdict({"ours": {"seconds": 2.0}}) == "-"


@pytest.mark.slow
def test_the_evaluation_benchmark_runs_both_passes_on_the_cpu(tmp_path):
    """bench_gpu_evaluate.py at a small size on the CPU: the float32 and the bfloat16 candidate
    pass each in its own process, the same table, and the search's stages profiled."""
    script = SCRIPT.parent / "bench_gpu_evaluate.py"
    result = tmp_path / "evaluate.json"
    command = [sys.executable, str(script), "--device", "cpu", "--n", "3000", "--no-pml"]
    subprocess.run([*command, "--json", str(result)], check=True, timeout=600, cwd=SCRIPT.parent)
    data = json.loads(result.read_text())
    sides = data["results"]["custom"]
    assert sorted(sides) == ["ours", "ours+bf16", "pairs"]
    assert "| custom | 3,000 x 128, 30 | bf16 |" in data["markdown"]
    assert "| yes |" in data["markdown"]  # the table equals the float32 pass's
    for side in ("ours", "ours+bf16"):
        assert set(sides[side]["stages"]["seconds"]) == {"products", "selection", "re-score"}
    # The pair metrics' side: the default table plus roc_auc and fnmr@fmr, against it alone.
    pairs = sides["pairs"]["values"]
    assert 0.5 < pairs["roc_auc"] <= 1.0 and 0.0 <= pairs["fnmr@fmr=0.001"] <= 1.0
    assert pairs["recall@1"] == sides["ours"]["values"]["recall@1"]
    assert data["verdicts"]["custom+pairs"].startswith(("met", "MISSED"))
    assert "| custom | " in data["markdown"].split("target <= 1.5x |")[1]
    assert sides["ours+bf16"]["stages"]["seconds"]["re-score"] > 0


def test_a_clusterable_command_is_put_on_path_where_there_is_none(gpu_check, tmp_path, monkeypatch):
    """The GPU machine runs this checkout uninstalled: the documentation's shell examples find a
    ``clusterable`` that runs it (step b ran none of them before: command not found)."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    launcher = gpu_check.command_on_path(tmp_path / "bin")
    assert launcher == tmp_path / "bin" / "clusterable"
    assert os.environ["PATH"].split(os.pathsep)[0] == str(tmp_path / "bin")
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1] / "src")}
    done = subprocess.run(
        ["clusterable", "--version"], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("clusterable ")
    assert gpu_check.command_on_path(tmp_path / "again") is None  # PATH has one now
    assert not (tmp_path / "again").exists()


def test_the_evaluation_budget_counts_the_topk_probe(tmp_path):
    """--budget is the whole run's: the probe's seconds (about 20 s on a GPU) are spent from it,
    so that gpu_check's step does not pass its own budget and lose every figure."""
    result = tmp_path / "evaluate.json"
    command = [sys.executable, str(SCRIPT.parent / "bench_gpu_evaluate.py"), "--device", "cpu"]
    command += ["--probe-topk", "--sizes", "small", "--no-pml", "--budget", "11"]
    subprocess.run([*command, "--json", str(result)], check=True, timeout=300, cwd=SCRIPT.parent)
    data = json.loads(result.read_text())
    assert data["topk_probe"]  # the probe ran, then less than 10 s were left for a size
    assert data["results"]["small"]["ours"]["skipped"] == "not run (budget of 11 s spent)"


@pytest.fixture(scope="module")
def bench_gpu_losses():
    sys.path.insert(0, str(SCRIPT.parent))  # it imports bench_losses
    spec = importlib.util.spec_from_file_location(
        "bench_gpu_losses", SCRIPT.parent / "bench_gpu_losses.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(SCRIPT.parent))


def test_the_cpu_peak_is_what_the_allocator_held_above_the_start(bench_gpu_losses):
    """The profiler's running total carries over what an earlier profile allocated and freed
    after it: the peak is taken above the total before the call's first event."""
    import torch

    mib = 2**20
    kept = []
    first = bench_gpu_losses._cpu_peak_mb(
        lambda: kept.append(torch.empty(8 * mib, dtype=torch.uint8))
    )
    kept.clear()  # freed with no profile running: the profiler's total still counts it

    def two_blocks() -> None:
        block = torch.empty(3 * mib, dtype=torch.uint8)
        del block
        both = torch.empty(2 * mib, dtype=torch.uint8), torch.empty(2 * mib, dtype=torch.uint8)
        del both

    assert first == 8.0
    assert bench_gpu_losses._cpu_peak_mb(two_blocks) == 4.0


def test_the_loss_benchmark_runs_on_the_cpu(tmp_path):
    """bench_gpu_losses.py's CPU smoke: a loss and pml's equivalent, time and peak memory; a
    size it cannot take is refused in one line."""
    script = SCRIPT.parent / "bench_gpu_losses.py"
    result = tmp_path / "losses.json"
    command = [sys.executable, str(script), "--device", "cpu", "--sizes", "32", "--repeats", "3"]
    command += ["--losses", "contrastive", "--json", str(result)]
    subprocess.run(command, check=True, timeout=300, cwd=SCRIPT.parent, capture_output=True)
    data = json.loads(result.read_text())
    assert (data["losses"], data["timed_at_largest"], data["largest_n"]) == (1, 1, 32)
    rows = {row["side"]: row for row in data["rows"]}
    assert rows["ours"]["ms"] > 0 and rows["ours"]["peak_mb"] > 0
    assert rows["pml"]["loss"] == "ContrastiveLoss" and rows["pml"]["peak_mb"] > 0
    assert "| contrastive | 32 |" in data["markdown"]
    refused = subprocess.run(
        [sys.executable, str(script), "--device", "cpu", "--sizes", "4"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=SCRIPT.parent,
    )
    assert refused.returncode == 2
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .endswith("separated by commas (e.g. 256,4096); got '4'")
    )


@pytest.mark.slow
def test_the_loss_benchmark_compiles_each_size_on_the_cpu(tmp_path):
    """``--compile``: every size timed and measured under torch.compile too."""
    script = SCRIPT.parent / "bench_gpu_losses.py"
    result = tmp_path / "losses.json"
    command = [sys.executable, str(script), "--device", "cpu", "--sizes", "32,64", "--compile"]
    command += ["--losses", "triplet", "--repeats", "3", "--json", str(result)]
    subprocess.run(command, check=True, timeout=900, cwd=SCRIPT.parent, capture_output=True)
    data = json.loads(result.read_text())
    compiled = [row for row in data["rows"] if row.get("variant") == "compile"]
    assert [row["n"] for row in compiled] == [32, 64]
    assert all(row["ms"] > 0 and row["compile_s"] > 0 for row in compiled)
    assert data["compiled_at_largest"] == 1
    # Speed flags (pml faster, 10 ms) are figures of a loaded CPU, not failures; a size that did
    # not compile is one.
    assert not [flag for flag in data["flags"] if "not compiled" in flag]


def test_the_default_steps_fit_one_ten_minute_call(gpu_check):
    """a, b and c side by side, then each timing step alone: the worst case stays under 600 s."""
    default = [gpu_check.STEPS[key] for key in gpu_check.DEFAULT_STEPS.split(",")]
    together = max(step.budget_s for step in default if not step.timing)
    alone = sum(step.budget_s for step in default if step.timing)
    assert together + alone <= 600


# ------------------------------------------------------------------------------------------------
# step g: bench_train's fit cases (issue 40)
@pytest.fixture(scope="module")
def bench_train():
    yield loaded("bench_train")
    sys.modules.pop("bench_train", None)


def test_training_figures_hold_each_fit_case_to_its_target(gpu_check):
    output = "\n".join(
        [
            "| side | items/s |",
            "step / plain loop: 0.981x, the median of the repeats' ratios (0.98) (target >= 0.95)",
            "",
            "fit[6,000 1600x1200 ram] from files / step: 0.934x, the median of the repeats' "
            "ratios (0.93) (target >= 0.9)",
            "fit[20,480 400x300 disk] from files / step: 0.912x, the median of the repeats' "
            "ratios (0.91) (target >= 0.9)",
        ]
    )
    figures, missed = gpu_check.train_figures(output)
    assert figures == (
        "step / plain loop 0.981x; fit[6,000 1600x1200 ram] 0.934x; fit[20,480 400x300 disk] 0.912x"
    )
    assert not missed
    below = output.replace("0.912x", "0.874x")
    assert gpu_check.train_figures(below)[1]
    # A case the budget left out is a figure missing: flagged, and named.
    cut = (
        output + "\n\nnot run (budget spent or interrupted): fit[20,480 1600x1200 disk] (repeat 1)"
    )
    figures, missed = gpu_check.train_figures(cut)
    assert missed and figures.endswith(
        "budget spent, not run: fit[20,480 1600x1200 disk] (repeat 1)"
    )
    assert gpu_check.train_figures("no table at all") == ("no ratios", True)


def test_the_gpu_fit_cases_are_issue_40s_sizes_and_parse(gpu_check, bench_train):
    cases = [bench_train.FitCase.parse(text) for text in gpu_check.TRAIN_FIT_CASES]
    assert {(c.photos, c.cache) for c in cases} == {(6000, "ram"), (20480, "disk")}
    assert {c.size for c in cases} == {(400, 300), (1600, 1200)}
    assert list(bench_train.sides_of(cases))[:3] == ["plain", "step", "fit[6,000 1600x1200 ram]"]
    for bad in ("6000:400x300", "6000:400:ram", "six:400x300:ram", "6000:400x300:cloud"):
        with pytest.raises(SystemExit, match="--fit-case takes PHOTOS:WxH:CACHE"):
            bench_train.FitCase.parse(bad)
    with pytest.raises(SystemExit, match="must be positive"):
        bench_train.FitCase.parse("0:400x300:ram")


def test_generated_photos_link_the_drawn_ones(bench_train, tmp_path):
    """20,000 photos of 1600 x 1200 are a few drawn ones and hard links to them: every file is
    its own path to decode, with the bytes of one of the drawn."""
    from PIL import Image

    folder = bench_train.write_photos(tmp_path / "photos", 3, 5, (64, 48), distinct=4)
    files = sorted(folder.rglob("*.jpg"))
    assert len(files) == 15 and len({f.parent.name for f in files}) == 3
    assert len({f.stat().st_ino for f in files}) == 4
    assert len({f.read_bytes() for f in files}) == 4  # the drawn ones differ
    with Image.open(files[-1]) as image:
        assert image.size == (64, 48)


@pytest.mark.slow
def test_the_training_step_runs_its_fit_cases_within_its_budget_on_the_cpu(gpu_check, tmp_path):
    """gpu_check's step g on the CPU, tiny: every fit case measured, a disk cache built in the
    benchmark's own scratch folder (none left in the user's), and the figures read back."""
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "CLUSTERABLE_CACHE_DIR": str(tmp_path / "user-cache")}
    command = [sys.executable, str(SCRIPT), "--smoke", "--steps", "g"]
    subprocess.run(command, check=True, timeout=300, cwd=SCRIPT.parent.parent, env=env)
    data = json.loads((out / "gpu_check.json").read_text())
    (step,) = data["steps"]
    assert step["status"] in ("ok", "flagged")
    for case in gpu_check.SMOKE_FIT_CASES:
        photos, size, cache = case.split(":")
        assert f"fit[{int(photos):,} {size} {cache}] " in step["figures"]
    assert "step / plain loop" in step["figures"] and "not run" not in step["figures"]
    assert "images cached on disk: 48 decoded" in step["details"][0]
    assert not (tmp_path / "user-cache").exists()
