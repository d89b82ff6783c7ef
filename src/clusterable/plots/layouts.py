"""Free 2-D points at several stages of a descent, coloured by sub-class (MsDNN Fig. 1)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from clusterable.plots._figure import new_figure, save_figure

#: Sub-classes 0, 1 (class 0) in oranges and 2, 3 (class 1) in blues: classes and sub-classes
#: both show.
SUBCLASS_COLOURS = np.array(["#e6550d", "#fdae6b", "#3182bd", "#9ecae1"])


def plot_layouts(
    stages: Sequence[tuple[np.ndarray, str]], subclasses: np.ndarray, path: str | Path
) -> Path:
    """Write one panel per ``(points (n, 2), title)`` of ``stages``, the same ``n`` points
    moved, coloured by their sub-class ``subclasses`` ``(n,)`` in 0-3, at equal x and y scales."""
    figure, axes = new_figure(columns=len(stages), size=3.6)
    for ax, (points, title) in zip(axes, stages, strict=True):
        ax.scatter(*points.T, s=4, c=SUBCLASS_COLOURS[subclasses])
        ax.set_title(title, fontsize=9)
        ax.set_aspect("equal", adjustable="datalim")
    return save_figure(figure, path)
