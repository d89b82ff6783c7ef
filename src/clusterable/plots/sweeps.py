"""Hyper-parameter sweeps: a validation score against the values tried, a curve per method."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clusterable.plots._figure import new_figure, save_figure

#: On a log-scale axis, up to this many values tried are each labelled (more would overlap).
MAX_LABELLED_VALUES = 6


@dataclass(frozen=True)
class Sweep:
    """One panel: each method's score (a fraction, drawn in %) at each value it was tried with.

    Attributes
    ----------
    title : str
        The panel's title.
    curves : mapping
        Method name -> ``{value: score}``.
    baseline : (str, float), optional
        A method without the parameter, and its score: a dashed horizontal line.
    log_scale : bool
        Values on a log scale (each labelled when there are at most
        :data:`MAX_LABELLED_VALUES`).
    """

    title: str
    curves: Mapping[str, Mapping[float, float]]
    baseline: tuple[str, float] | None = None
    log_scale: bool = False


def plot_sweeps(
    sweeps: Sequence[Sweep], path: str | Path, parameter: str, score: str, columns: int = 2
) -> Path:
    """Write one panel per sweep, in rows of ``columns``; x is ``parameter``, y ``score`` in %."""
    figure, axes = new_figure(columns=columns, rows=-(-len(sweeps) // columns))
    for axis in axes[len(sweeps) :]:
        axis.set_visible(False)
    for axis, sweep in zip(axes, sweeps, strict=False):  # spare axes hidden
        if sweep.baseline is not None:
            name, value = sweep.baseline
            axis.axhline(100 * value, color="grey", linestyle="--", label=name)
        for name, curve in sweep.curves.items():
            values, scores = zip(*sorted(curve.items()), strict=True)
            axis.plot(values, 100 * np.array(scores), marker="o", label=name)
        if sweep.log_scale:
            axis.set_xscale("log")
            tried = sorted({value for curve in sweep.curves.values() for value in curve})
            if len(tried) <= MAX_LABELLED_VALUES:
                axis.set_xticks(tried, [f"{value:g}" for value in tried])
                axis.minorticks_off()
        axis.set(title=sweep.title, xlabel=parameter, ylabel=f"{score} (%)")
        axis.legend()
    return save_figure(figure, path)
