"""t-SNE maps of embeddings, coloured by class and, when given, by sub-class (MsDNN Fig. 2)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib
import numpy as np

from clusterable.plots._figure import new_figure, save_figure
from clusterable.tsne import tsne_map

#: Beyond this many classes a legend would hide the map: the colours alone are shown.
MAX_LEGEND_CLASSES = 20


def _scatter(
    ax, points: np.ndarray, labels: np.ndarray, title: str, names: Sequence[str] | None
) -> None:
    noise = labels < 0
    if noise.any():
        ax.scatter(*points[noise].T, s=4, c="lightgrey", label="noise / distractor")
    classes = np.unique(labels[~noise])
    colours = matplotlib.colormaps["tab10" if len(classes) <= 10 else "tab20"]
    for i, label in enumerate(classes):
        name = names[label] if names is not None and label < len(names) else str(label)
        members = labels == label
        ax.scatter(*points[members].T, s=4, color=colours(i % colours.N), label=name)
    if len(classes) <= MAX_LEGEND_CLASSES:
        ax.legend(markerscale=3, fontsize=7, loc="best", frameon=False)
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])


def plot_tsne(
    embeddings: np.ndarray,
    labels: np.ndarray,
    path: str | Path,
    subclasses: np.ndarray | None = None,
    title: str = "",
    seed: int = 0,
    class_names: Sequence[str] | None = None,
    subclass_names: Sequence[str] | None = None,
) -> Path:
    """Write a t-SNE scatter coloured by ``labels`` (and a second panel by ``subclasses``), with a
    legend naming each class (``class_names[c]`` for label ``c``; the numbers without names)."""
    points = tsne_map(embeddings, seed=seed)
    labels = np.asarray(labels)
    show_sub = subclasses is not None and not np.array_equal(subclasses, labels)
    figure, axes = new_figure(columns=2 if show_sub else 1)
    _scatter(axes[0], points, labels, f"{title} — classes".strip(" —"), class_names)
    if show_sub:
        sub_title = f"{title} — sub-classes".strip(" —")
        _scatter(axes[1], points, np.asarray(subclasses), sub_title, subclass_names)
    return save_figure(figure, path)
