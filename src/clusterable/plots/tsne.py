"""t-SNE maps of embeddings, coloured by class and, when given, by sub-class (MsDNN Fig. 2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from clusterable.plots._figure import save_figure
from clusterable.plots.maps import Colouring, draw_maps
from clusterable.tsne import tsne_map

#: What the class maps call an item without a class: in the papers' runs, an OPML distractor.
DISTRACTOR = "unlabelled / distractor"


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
    colourings = [Colouring(labels, class_names, f"{title} — classes".strip(" —"), DISTRACTOR)]
    if subclasses is not None and not np.array_equal(subclasses, labels):
        sub_title = f"{title} — sub-classes".strip(" —")
        colourings.append(Colouring(np.asarray(subclasses), subclass_names, sub_title, DISTRACTOR))
    return save_figure(draw_maps(points, colourings), path)


def plot_tsne_maps(
    embeddings: Mapping[str, np.ndarray],
    labels: np.ndarray,
    folder: Path,
    items: int,
    subclasses: np.ndarray | None = None,
    title_suffix: str = "",
) -> list[str]:
    """One t-SNE file per embedding of the same items, ``folder/tsne_<name>.png``, titled by its
    key: the same ``items`` drawn (seeded) from each, by class and, with ``subclasses``, by
    sub-class (MsDNN Fig. 2). Returns the file names, in the order of ``embeddings``."""
    sample = np.random.default_rng(0).choice(len(labels), min(items, len(labels)), replace=False)
    written = []
    for title, embedding in embeddings.items():
        slug = title.lower().replace(" ", "_").replace("(", "").replace(")", "").replace("=", "")
        name = f"tsne_{slug}.png"
        plot_tsne(
            embedding[sample],
            labels[sample],
            folder / name,
            subclasses=None if subclasses is None else subclasses[sample],
            title=f"{title}{title_suffix}",
        )
        written.append(name)
    return written
