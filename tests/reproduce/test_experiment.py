"""The experiment registry: run order is registration order, names are unique."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusterable.reproduce import EXPERIMENTS, experiment, write_summary
from clusterable.reproduce.experiment_report import ExperimentReport, write_report

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
