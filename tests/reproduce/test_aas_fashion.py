"""``aas-fashion`` (OPML Tables I-IV on Fashion-MNIST) in quick mode: a 2,000-image subset; each
claim's verdict worked out again from the report's own numbers."""

import json
import re

from PIL import Image

from clusterable.reports import ExperimentReport
from clusterable.reproduce import aas_fashion  # registers the experiment
from clusterable.reproduce.experiment import Budget, run_experiment


def clusters_found(note: str) -> float:
    """The mean number of clusters a row's note gives ("13.0 clusters; paper 13")."""
    match = re.match(r"([0-9.]+) clusters", note)
    assert match, note
    return float(match.group(1))


def beats_on_kept(first: dict[str, float], second: dict[str, float]) -> bool:
    """Higher NMI and F, each scored on the points its method keeps (how the claims say they are
    judged)."""
    return first["NMI (kept)"] > second["NMI (kept)"] and first["F (kept)"] > second["F (kept)"]


def study_verdicts(report: ExperimentReport) -> list[bool | None]:
    """The five claims, judged from the rows as their texts say; k_graph is scaled by 2,000 /
    10,000, so the paper's 50, 100, 500, 1,000 are 10, 20, 100, 200 here."""
    ours = {row.method: row.ours for row in report.rows}
    clusters = {row.method: clusters_found(row.note) for row in report.rows[1:]}
    kmeans = ours["k-means (k = 10)"]
    headline = ours["AAS, paper's MNIST setting (k_graph 100, eps 0.9, theta_min 5)"]
    table_one = [f"Table I: k_graph {k} (eps 0.5, theta_min 0)" for k in (10, 20, 100, 200)]
    precision = [ours[name]["precision"] for name in table_one]
    recall = [ours[name]["recall"] for name in table_one]

    def eps_row(eps: float, theta_min: int) -> str:
        return f"Table II: eps {eps} (k_graph 100, theta_min {theta_min})"

    return [
        beats_on_kept(headline, kmeans),
        # From the smallest k_graph to the largest: precision falls, recall rises; the paper's
        # 500 (100 here) finds the ten classes give or take 5.
        precision[0] > precision[-1]
        and recall[-1] > recall[0]
        and abs(clusters[table_one[2]] - 10) <= 5,
        # From eps 0.1 to 0.9 (no noise removal): higher NMI, more clusters.
        ours[eps_row(0.9, 0)]["NMI"] > ours[eps_row(0.1, 0)]["NMI"]
        and clusters[eps_row(0.9, 0)] > clusters[eps_row(0.1, 0)],
        beats_on_kept(ours[eps_row(0.9, 5)], ours[eps_row(0.9, 0)]),
        None,  # the timing is the paper's on 10,000 points: not judged on 2,000
    ]


def test_quick_run_writes_a_complete_report(tmp_path, fashion_mnist, assert_verdicts):
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
    assert len(report.claims) == 5
    assert_verdicts(tmp_path, study_verdicts(report))
    assert report.claims[-1].evidence.startswith("2000 points:")  # timing: 10,000 only
    assert json.loads((tmp_path / "results.json").read_text())["record"]["seeds"] == [0]
    assert "Fashion-MNIST" in (tmp_path / "results.md").read_text()
    for plot in report.plots:
        with Image.open(tmp_path / plot) as image:
            image.verify()
