"""Sweeps: a score against the values tried, in %, a dashed baseline, a log scale if asked."""

from __future__ import annotations

import numpy as np

from clusterable.plots import sweeps
from clusterable.plots.sweeps import Sweep


def test_curves_in_percent_in_the_order_of_the_values(drawn, tmp_path):
    figures = drawn(sweeps)
    center = Sweep("center", {"Center": {0.1: 0.5, 0.001: 0.4, 0.01: 0.6}}, ("CCE", 0.55), True)
    corel = Sweep("COREL", {"Cosine": {1.0: 0.7, 0.5: 0.65}, "Gaussian": {0.5: 0.6}})
    sweeps.plot_sweeps([center, corel], tmp_path / "s.png", parameter="lambda", score="accuracy")
    center_ax, corel_ax = figures[0].axes
    baseline, curve = center_ax.get_lines()
    assert np.allclose(baseline.get_ydata(), 55.0) and baseline.get_linestyle() == "--"
    assert list(curve.get_xdata()) == [0.001, 0.01, 0.1]
    assert np.allclose(curve.get_ydata(), [40.0, 60.0, 50.0])
    assert [t.get_text() for t in center_ax.get_legend().get_texts()] == ["CCE", "Center"]
    assert center_ax.get_xscale() == "log" and corel_ax.get_xscale() == "linear"
    assert [t.get_text() for t in center_ax.get_xticklabels()] == ["0.001", "0.01", "0.1"]
    assert [t.get_text() for t in corel_ax.get_legend().get_texts()] == ["Cosine", "Gaussian"]
    assert (corel_ax.get_xlabel(), corel_ax.get_ylabel()) == ("lambda", "accuracy (%)")


def test_many_values_keep_the_log_axis_own_ticks(drawn, tmp_path):
    figures = drawn(sweeps)
    values = {10.0**p: 0.5 for p in range(-6, 2)}
    sweeps.plot_sweeps([Sweep("wide", {"a": values}, log_scale=True)], tmp_path / "s.png", "x", "y")
    labels = [t.get_text() for t in figures[0].axes[0].get_xticklabels()]
    assert labels != [f"{v:g}" for v in sorted(values)]


def test_spare_panels_are_hidden(drawn, tmp_path):
    figures = drawn(sweeps)
    sweep = Sweep("one", {"a": {1.0: 0.5}})
    sweeps.plot_sweeps([sweep] * 3, tmp_path / "s.png", "x", "y", columns=2)
    assert [ax.get_visible() for ax in figures[0].axes] == [True, True, True, False]
