"""Points at several stages of a descent: a panel per stage, a colour per sub-class."""

from __future__ import annotations

import numpy as np
from matplotlib.colors import to_rgba

from clusterable.plots import layouts


def test_a_panel_per_stage_coloured_by_sub_class(drawn, tmp_path):
    figures = drawn(layouts)
    start = np.random.default_rng(0).normal(size=(8, 2))
    subclasses = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    stages = [(start, "before"), (2 * start, "after, sigma 1"), (start / 2, "after, sigma 25")]
    layouts.plot_layouts(stages, subclasses, tmp_path / "l.png")
    axes = figures[0].axes
    assert [ax.get_title() for ax in axes] == ["before", "after, sigma 1", "after, sigma 25"]
    assert np.allclose(axes[1].collections[0].get_offsets(), 2 * start)
    colours = axes[0].collections[0].get_facecolor()
    expected = [to_rgba(layouts.SUBCLASS_COLOURS[s]) for s in subclasses]
    assert np.allclose(colours, expected)
    assert all(ax.get_aspect() == 1.0 for ax in axes)
