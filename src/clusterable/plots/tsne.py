"""t-SNE maps of embeddings, coloured by class and, when given, by sub-class (MsDNN Fig. 2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from clusterable.plots._figure import new_figure, save_figure
from clusterable.tsne import tsne_map


def _scatter(ax, points: np.ndarray, labels: np.ndarray, title: str) -> None:
    noise = labels < 0
    if noise.any():
        ax.scatter(*points[noise].T, s=4, c="lightgrey", label="noise / distractor")
    classes = np.unique(labels[~noise])
    cmap = "tab10" if len(classes) <= 10 else "tab20"
    ax.scatter(*points[~noise].T, s=4, c=labels[~noise], cmap=cmap)
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
) -> Path:
    """Write a t-SNE scatter coloured by ``labels`` (and a second panel by ``subclasses``)."""
    points = tsne_map(embeddings, seed=seed)
    labels = np.asarray(labels)
    show_sub = subclasses is not None and not np.array_equal(subclasses, labels)
    figure, axes = new_figure(columns=2 if show_sub else 1)
    _scatter(axes[0], points, labels, f"{title} — classes".strip(" —"))
    if show_sub:
        _scatter(axes[1], points, np.asarray(subclasses), f"{title} — sub-classes".strip(" —"))
    return save_figure(figure, path)
