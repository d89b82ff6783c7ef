"""Partitions of 2-D points side by side, each cluster a colour and noise grey (OPML Fig. 5)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes

from clusterable.plots._figure import new_figure, save_figure


def scatter_partition(ax: Axes, points: np.ndarray, clusters: np.ndarray, title: str) -> None:
    """Scatter ``points`` ``(n, 2)`` coloured by cluster (tab20, cycling beyond 20 clusters),
    noise (-1) in light grey, without a legend: AAS finds too many clusters to name."""
    noise = clusters < 0
    ax.scatter(points[noise, 0], points[noise, 1], s=3, c="lightgrey")
    kept = clusters[~noise]
    x, y = points[~noise, 0], points[~noise, 1]
    ax.scatter(x, y, s=3, c=kept % 20, cmap="tab20", vmin=0, vmax=19)
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def plot_partitions(
    points: np.ndarray,
    partitions: Sequence[tuple[np.ndarray, str]],
    path: str | Path,
    size: float = 4.0,
) -> Path:
    """Write one panel per ``(cluster ids, title)`` of ``partitions``, all of the same ``points``
    ``(n, 2)``, in a row of panels of ``size`` inches."""
    figure, axes = new_figure(columns=len(partitions), size=size)
    for ax, (clusters, title) in zip(axes, partitions, strict=True):
        scatter_partition(ax, points, clusters, title)
    return save_figure(figure, path)
