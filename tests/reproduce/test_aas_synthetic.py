"""``aas-synthetic`` (OPML Fig. 5) in quick mode: table shape, values in range, files written."""

import json

import numpy as np
from PIL import Image

from clusterable.reproduce import aas_synthetic  # registers the experiment
from clusterable.reproduce.experiment import Budget, run_experiment


def test_quick_run_writes_a_complete_report(tmp_path):
    report = run_experiment("aas-synthetic", Budget(mode="quick", folder=tmp_path))
    assert [row.method for row in report.rows] == [
        aas_synthetic.KMEANS,
        *aas_synthetic.AAS_SETTINGS,
    ]
    for row in report.rows:
        assert set(report.metrics) <= set(row.ours)
        assert all(0.0 <= value <= 1.0 for value in row.ours.values())
    assert report.rows[0].paper == {"NMI": 0.500, "F": 0.427}
    assert len(report.claims) == 3 and report.record["seeds"] == [0, 1]
    assert json.loads((tmp_path / "results.json").read_text())["name"] == "aas-synthetic"
    assert "| k-means (k = 6) |" in (tmp_path / "results.md").read_text()
    for plot in report.plots:
        with Image.open(tmp_path / plot) as image:
            image.verify()


def test_scores_put_noise_in_one_cluster_and_score_kept_points_apart():
    labels = np.array([0, 0, 1, 1, -1, -1])
    perfect = aas_synthetic.partition_scores(labels, np.array([0, 0, 1, 1, -1, -1]))
    assert perfect["NMI"] == 1.0 and perfect["F"] == 1.0 and perfect["kept"] == 4 / 6
    # Dropping true points as noise costs on all points, not on the points kept.
    dropped = aas_synthetic.partition_scores(labels, np.array([0, -1, 1, -1, -1, -1]))
    assert dropped["NMI"] < 1.0 and dropped["NMI (kept)"] == 1.0
