"""Retrieval grid: a few queries and their nearest neighbours, framed green (same class) or red."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from clusterable.evaluate import knn_search
from clusterable.plots._figure import as_image, new_figure, save_figure


def plot_retrieval_grid(
    images: np.ndarray,
    embeddings: np.ndarray,
    labels: np.ndarray,
    path: str | Path,
    n_queries: int = 6,
    k: int = 5,
    seed: int = 0,
    class_names: Sequence[str] | None = None,
) -> Path:
    """Write a grid: each row a random query then its ``k`` nearest neighbours (query excluded),
    each titled with its class (``class_names[c]``, or the label number) and framed green when it
    shares the query's class, red when not."""
    rng = np.random.default_rng(seed)
    queries = rng.choice(len(images), size=min(n_queries, len(images)), replace=False)
    neighbours = knn_search(embeddings, k)[1][queries]  # (q, k), each query itself excluded
    figure, axes = new_figure(columns=k + 1, rows=len(queries), size=1.3)
    for row, (query, found) in enumerate(zip(queries, neighbours, strict=True)):
        for column, index in enumerate([query, *found]):
            ax = axes[row * (k + 1) + column]
            ax.imshow(as_image(images[index]), cmap="gray")
            ax.set_xticks([])
            ax.set_yticks([])
            label = int(labels[index])
            name = (
                class_names[label]
                if class_names is not None and 0 <= label < len(class_names)
                else str(label)
            )
            if column:
                colour = "green" if labels[index] == labels[query] else "red"
                for spine in ax.spines.values():
                    spine.set(color=colour, linewidth=3)
                ax.set_title(f"{column}: {name}", fontsize=7, color=colour)
            else:
                ax.set_title(f"query: {name}", fontsize=7)
    return save_figure(figure, path)
