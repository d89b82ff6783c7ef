"""``aas-fashion`` (OPML Tables I-IV on Fashion-MNIST) in quick mode: a 2,000-image subset."""

import json

from PIL import Image

from clusterable.reproduce import aas_fashion  # registers the experiment
from clusterable.reproduce.experiment import Budget, run_experiment


def test_quick_run_writes_a_complete_report(tmp_path, fashion_mnist):
    report = run_experiment("aas-fashion", Budget(mode="quick", folder=tmp_path))
    # k-means, two headline AAS settings, 4 k_graph values, 7 eps values with and without noise
    # removal.
    assert len(report.rows) == 1 + 2 + len(aas_fashion.PAPER_K_GRAPH) + 2 * len(
        aas_fashion.PAPER_EPS
    )
    for row in report.rows:
        assert set(report.metrics) <= set(row.ours)
        assert all(0.0 <= value <= 1.0 for value in row.ours.values())
        assert all(0.0 <= value <= 1.0 for value in row.paper.values())
    assert "Table I: k_graph 100 (eps 0.5, theta_min 0)" in {row.method for row in report.rows}
    assert len(report.claims) == 5 and report.claims[-1].holds is None  # timing: 10,000 only
    assert json.loads((tmp_path / "results.json").read_text())["record"]["seeds"] == [0]
    assert "Fashion-MNIST" in (tmp_path / "results.md").read_text()
    for plot in report.plots:
        with Image.open(tmp_path / plot) as image:
            image.verify()
