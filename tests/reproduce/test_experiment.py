"""The experiment registry: run order is registration order, names are unique; budgets; the
summary page is rebuilt from the experiments' JSON files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusterable.reports import ExperimentReport, Row, write_report
from clusterable.reproduce import EXPERIMENTS, Budget, experiment, write_summary

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results.md"


def test_the_summary_follows_the_registration_order(tmp_path):
    for name in reversed(list(EXPERIMENTS)[:3]):  # written in another order than registered
        report = ExperimentReport(name, f"title of {name}", "paper", "setup", metrics=[])
        write_report(report, tmp_path / "results" / name)
    reports = write_summary(tmp_path / "results")
    assert [r.name for r in reports] == list(EXPERIMENTS)[:3]
    page = (tmp_path / "results.md").read_text()
    assert f"Not run yet: {', '.join(list(EXPERIMENTS)[3:])}." in page


def test_the_docs_page_lists_every_experiment_in_that_order():
    names = re.findall(r"^## .*\(`([a-z0-9-]+)`\)$", RESULTS.read_text(), re.M)
    assert names == list(EXPERIMENTS)


def test_a_name_registered_twice_is_refused():
    with pytest.raises(RuntimeError, match="registered twice"):
        experiment("aas-synthetic")(lambda budget: None)


def test_the_summary_lists_what_was_run_and_what_was_not(tmp_path):
    out = tmp_path / "results"
    for name in ("msdnn-2d", "aas-synthetic"):
        report = ExperimentReport(name, f"title of {name}", "paper", "setup", metrics=["nmi"])
        report.rows = [Row("ours", {"nmi": 0.5})]
        write_report(report, out / name)
    reports = write_summary(out)
    assert [r.name for r in reports] == ["aas-synthetic", "msdnn-2d"]
    page = (tmp_path / "results.md").read_text()
    assert page.index("`aas-synthetic`") < page.index("`msdnn-2d`")
    assert "| ours | 50.00 |" in page
    assert "Not run yet: aas-fashion, msdnn-subclass" in page


def test_budget_seeds_start_at_the_first_seed():
    assert Budget(mode="quick").seed_list(1, 3) == [0]
    assert Budget(first_seed=5).seed_list(1, 3) == [5, 6, 7]
    assert Budget(mode="full", seeds=2, first_seed=1).seed_list(1, 3, 10) == [1, 2]


def test_experiments_use_the_one_registry_contract():
    from clusterable.reproduce import available_experiments
    from clusterable.reproduce.experiment import run_experiment

    assert available_experiments() == list(EXPERIMENTS) and "aas-synthetic" in EXPERIMENTS
    with EXPERIMENTS.scratch():
        experiment("a-test-experiment", label="a test")(lambda budget: None)
        assert available_experiments()[-1] == "a-test-experiment"
        assert EXPERIMENTS.label("a-test-experiment") == "a test"
    assert "a-test-experiment" not in EXPERIMENTS
    with pytest.raises(ValueError, match="unknown experiment 'nope'; choose one of: aas-synthetic"):
        run_experiment("nope", Budget(mode="quick"))
