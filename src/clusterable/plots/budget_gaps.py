"""Whether a claim "A >= B" closes its gap as the training budget grows: the gap A - B per
budget, mean ± std over seeds and each seed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.ticker import MaxNLocator

from clusterable.plots._figure import new_figure, save_figure

#: A claim's gaps: per budget, per seed, ``{metric: A - B}`` (fractions).
Gaps = Sequence[Sequence[Mapping[str, float]]]


def plot_budget_gaps(gaps: Mapping[str, Gaps], budgets: Sequence[str], path: str | Path) -> Path:
    """Write one panel per claim of ``gaps``: each metric's gap (in points) against the budgets
    named ``budgets`` (", " starts a new line of a tick label), mean ± std over seeds as error
    bars and each seed as a dot; the dashed line at 0 is where the claim starts to hold."""
    columns = min(3, len(gaps))
    figure, axes = new_figure(columns=columns, rows=-(-len(gaps) // columns), size=4.2)
    for axis in axes[len(gaps) :]:
        axis.set_visible(False)
    positions = np.arange(len(budgets))
    for axis, (claim, per_budget) in zip(axes, gaps.items(), strict=False):  # spare axes hidden
        metrics = list(per_budget[0][0])
        for index, metric in enumerate(metrics):
            shift = 0.08 * (index - (len(metrics) - 1) / 2)  # metrics side by side, not on top
            by_seed = [100 * np.array([run[metric] for run in runs]) for runs in per_budget]
            means = np.array([seeds.mean() for seeds in by_seed])
            stds = np.array([seeds.std() for seeds in by_seed])
            line = axis.errorbar(
                positions + shift, means, yerr=stds, marker="o", capsize=4, label=metric
            )
            for position, seeds in zip(positions, by_seed, strict=True):
                axis.scatter(
                    np.full(len(seeds), position + shift),
                    seeds,
                    s=10,
                    alpha=0.5,
                    color=line.lines[0].get_color(),
                )
        axis.axhline(0.0, color="grey", linestyle="--", linewidth=1)
        axis.set_xticks(positions, [budget.replace(", ", "\n") for budget in budgets])
        axis.yaxis.set_major_locator(MaxNLocator(nbins=8))
        axis.set_title(claim)
        axis.legend(fontsize="small")
    for axis in axes[::columns]:
        axis.set_ylabel("gap A - B (points)")
    figure.tight_layout()
    return save_figure(figure, path)
