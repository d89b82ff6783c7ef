"""``reproduce opml-fashion --quick`` end to end on the real Fashion-MNIST files."""

from __future__ import annotations

import json

import pytest

from clusterable.reproduce import Budget, run_experiment

pytestmark = pytest.mark.slow


def test_quick_run_writes_the_table_and_checks_the_claims(tmp_path, fashion_mnist):
    report = run_experiment("opml-fashion", Budget(mode="quick", folder=tmp_path))
    methods = [row.method for row in report.rows]
    assert methods == [
        "raw pixels (no learning)",
        "OPML",
        "OPML w/o orthogonality",
        "OPML w/o weight function",
        "OPML, k-means pseudo-labels",
    ]
    for row in report.rows:
        assert set(report.metrics) <= set(row.ours)
        assert all(0.0 <= row.ours[metric] <= 1.0 for metric in report.metrics)
    assert len(report.claims) == 4
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["rows"][1]["paper"]["nmi"] == pytest.approx(0.639)
    assert "| OPML |" in (tmp_path / "results.md").read_text()
