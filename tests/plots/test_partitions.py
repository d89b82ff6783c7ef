"""Partitions side by side: a panel per partition of the same points, noise grey."""

from __future__ import annotations

import numpy as np
from matplotlib.colors import to_rgba
from PIL import Image

from clusterable.plots import partitions

POINTS = np.random.default_rng(0).normal(size=(30, 2))
TRUTH = np.arange(30) % 3
FOUND = np.where(np.arange(30) < 5, -1, TRUTH)


def test_a_panel_per_partition_noise_grey(drawn, tmp_path):
    figures = drawn(partitions)
    partitions.plot_partitions(POINTS, [(TRUTH, "truth"), (FOUND, "AAS")], tmp_path / "p.png")
    truth_ax, found_ax = figures[0].axes
    assert (truth_ax.get_title(), found_ax.get_title()) == ("truth", "AAS")
    noise, kept = found_ax.collections
    assert np.allclose(noise.get_offsets(), POINTS[:5])
    assert tuple(noise.get_facecolor()[0]) == to_rgba("lightgrey")
    assert np.array_equal(kept.get_array(), FOUND[5:])
    assert len(truth_ax.collections[0].get_offsets()) == 0  # no noise in the truth


def test_the_file_is_a_row_of_panels(tmp_path):
    path = partitions.plot_partitions(
        POINTS, [(TRUTH, "a"), (FOUND, "b"), (TRUTH, "c")], tmp_path / "p.png", size=2.0
    )
    with Image.open(path) as image:
        width, height = image.size
    assert width > 2.5 * height
