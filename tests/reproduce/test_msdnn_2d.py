"""``msdnn-2d`` (MsDNN Fig. 1) in quick mode: table shape, values in range, files written."""

import json

import numpy as np
from PIL import Image

from clusterable.data.synthetic import interleaved_subclusters
from clusterable.reproduce import msdnn_2d  # registers the experiment
from clusterable.reproduce.experiment import Budget, run_experiment


def test_quick_run_writes_a_complete_report(tmp_path):
    report = run_experiment("msdnn-2d", Budget(mode="quick", folder=tmp_path))
    # Two layouts x one scale x two sigmas in quick mode.
    assert len(report.rows) == len(msdnn_2d.LAYOUTS) * len(msdnn_2d.SIGMAS)
    for row in report.rows:
        assert set(row.ours) == set(report.metrics)
        assert all(0.0 <= value <= 1.0 for value in row.ours.values())
    assert len(report.claims) == 3
    assert json.loads((tmp_path / "results.json").read_text())["name"] == "msdnn-2d"
    assert (tmp_path / "results.md").exists()
    for plot in report.plots:
        with Image.open(tmp_path / plot) as image:
            image.verify()


def test_interleaved_layout_alternates_the_classes_along_x():
    data = interleaved_subclusters(n=400, std=0.5, seed=0)
    order = np.argsort([data.x[data.subclasses == s, 0].mean() for s in range(4)])
    assert (order // 2).tolist() == [0, 1, 0, 1]  # sub-classes 0, 1 are class 0; 2, 3 class 1
    assert np.array_equal(data.labels, data.subclasses // 2)
