"""Budget gaps: each claim's gap per budget, mean ± std over seeds and each seed, in points."""

from __future__ import annotations

import numpy as np
from matplotlib.collections import PathCollection

from clusterable.plots import budget_gaps

BUDGETS = ["1 epoch, 500 items", "4 epochs, 2,000 items"]


def gaps(first: list[float], second: list[float]) -> list[list[dict[str, float]]]:
    return [[{"nmi": g} for g in first], [{"nmi": g} for g in second]]


def test_each_budget_shows_the_mean_spread_and_seeds(drawn, tmp_path):
    figures = drawn(budget_gaps)
    claims = {"lifted >= triplet": gaps([-0.02, -0.04], [0.01, 0.03])}
    budget_gaps.plot_budget_gaps(claims, BUDGETS, tmp_path / "g.png")
    (ax,) = figures[0].axes
    mean_line = ax.get_lines()[0]
    assert np.allclose(mean_line.get_ydata(), [-3.0, 2.0])
    dots = [c for c in ax.collections if isinstance(c, PathCollection)]
    seeds = np.concatenate([c.get_offsets()[:, 1] for c in dots])
    assert np.allclose(np.sort(seeds), [-4.0, -2.0, 1.0, 3.0])
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "1 epoch\n500 items",
        "4 epochs\n2,000 items",
    ]
    assert ax.get_title() == "lifted >= triplet" and ax.get_ylabel() == "gap A - B (points)"
    zero = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(zero) == 1 and list(zero[0].get_ydata()) == [0.0, 0.0]


def test_three_panels_a_row_spare_ones_hidden(drawn, tmp_path):
    figures = drawn(budget_gaps)
    claims = {f"claim {i}": gaps([0.0], [0.0]) for i in range(4)}
    budget_gaps.plot_budget_gaps(claims, BUDGETS, tmp_path / "g.png")
    axes = figures[0].axes
    assert [ax.get_visible() for ax in axes] == [True] * 4 + [False] * 2
    assert [bool(ax.get_ylabel()) for ax in axes] == [True, False, False, True, False, False]
