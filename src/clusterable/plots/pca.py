"""Embeddings seen through their first two principal components, coloured by class."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from clusterable.plots._figure import new_figure, save_figure


def principal_plane(embeddings: np.ndarray) -> np.ndarray:
    """``embeddings`` ``(n, d)`` centred and projected on their first two principal
    components, ``(n, 2)``."""
    centred = embeddings - embeddings.mean(axis=0)
    _, _, directions = np.linalg.svd(centred, full_matrices=False)
    return centred @ directions[:2].T  # (n, 2)


def plot_pca_maps(
    embeddings: Mapping[str, np.ndarray],
    labels: np.ndarray,
    path: str | Path,
    columns: int,
    items: int = 2_000,
) -> Path:
    """Write one panel per embedding of the same items, titled by its key, in rows of
    ``columns``: the principal plane of ``items`` items drawn (seeded) from each, coloured by
    class (tab10: ten classes at most tell apart)."""
    rows = -(-len(embeddings) // columns)
    figure, axes = new_figure(columns=columns, rows=rows, size=3.5)
    for axis in axes[len(embeddings) :]:
        axis.set_visible(False)
    shown = np.random.default_rng(0).permutation(len(labels))[:items]
    for axis, (title, embedding) in zip(axes, embeddings.items(), strict=False):
        projected = principal_plane(embedding[shown])
        axis.scatter(*projected.T, c=labels[shown], cmap="tab10", s=3, vmin=0, vmax=9)
        axis.set(title=title, xticks=[], yticks=[])
    return save_figure(figure, path)
