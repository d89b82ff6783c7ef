"""The verification figure: the histograms, the threshold line and the DET curve drawn are
`select_threshold`'s."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from clusterable.evaluate import select_threshold
from clusterable.plots import draw_verification
from clusterable.plots.verification import BINS, rate_floors


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def some_pairs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Integer distances (many ties), positives nearer than negatives on the whole."""
    rng = np.random.default_rng(seed)
    same = rng.random(600) < 0.2
    distances = np.where(same, rng.integers(0, 12, 600), rng.integers(6, 20, 600)).astype(float)
    return distances, same


def test_the_det_curve_is_the_curve_select_threshold_returned():
    distances, same = some_pairs()
    choice = select_threshold(distances, same)
    figure = draw_verification(distances, same, choice)
    det = figure.axes[1]
    curve_line, point = det.lines
    fmr_floor, fnmr_floor = rate_floors(choice.curve)
    assert (fmr_floor, fnmr_floor) == (0.5 / (~same).sum(), 0.5 / same.sum())
    # Every candidate threshold's rates, a rate of 0 on the axis floor.
    np.testing.assert_array_equal(curve_line.get_xdata(), np.maximum(choice.curve.fmr, fmr_floor))
    np.testing.assert_array_equal(curve_line.get_ydata(), np.maximum(choice.curve.fnmr, fnmr_floor))
    assert len(curve_line.get_xdata()) == len(np.unique(distances)) + 1
    drawn = (max(choice.fmr, fmr_floor), max(choice.fnmr, fnmr_floor))
    assert (point.get_xdata()[0], point.get_ydata()[0]) == drawn
    assert det.get_xscale() == det.get_yscale() == "log"
    assert det.get_xlim() == pytest.approx((fmr_floor, 1))


def test_the_threshold_line_sits_at_the_chosen_threshold():
    distances, same = some_pairs(1)
    choice = select_threshold(distances, same)
    hist = draw_verification(distances, same, choice).axes[0]
    (line,) = hist.lines
    assert list(line.get_xdata()) == [choice.threshold, choice.threshold]
    assert f"threshold {choice.threshold:.4g}" in [t.get_text() for t in hist.get_legend().texts]


def test_the_histograms_are_densities_over_shared_bins():
    distances, same = some_pairs(2)
    choice = select_threshold(distances, same)
    hist = draw_verification(distances, same, choice).axes[0]
    positive, negative = hist.containers
    edges = np.histogram_bin_edges(distances, bins=BINS)
    for bars, flags in ((positive, same), (negative, ~same)):
        lefts = [patch.get_x() for patch in bars.patches]
        np.testing.assert_allclose(lefts, edges[:-1])
        heights = np.array([patch.get_height() for patch in bars.patches])
        expected, _ = np.histogram(distances[flags], bins=edges, density=True)
        np.testing.assert_allclose(heights, expected)
        assert heights @ np.diff(edges) == pytest.approx(1.0)


def test_a_threshold_below_every_distance_draws_no_line():
    distances, same = some_pairs(3)
    choice = select_threshold(distances, np.zeros_like(same))  # no positive: match nothing
    assert choice.threshold == -np.inf
    figure = draw_verification(distances, np.zeros_like(same), choice)
    hist, det = figure.axes
    assert all(len(line.get_xdata()) == 0 for line in hist.lines)  # a legend entry only
    assert "nothing matches" in " ".join(t.get_text() for t in hist.get_legend().texts)
    assert len(det.lines) == 0 and "no same-class pair" in det.texts[0].get_text()
