"""Clusters against classes: the share of each cluster's items in each class, as a heat map."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from clusterable.plots._figure import new_figure
from clusterable.plots.maps import NOISE, group_name

#: Beyond this many classes their names would overlap: the columns go unlabelled.
MAX_NAMED_CLASSES = 40


def draw_confusion(
    clusters: np.ndarray,
    labels: np.ndarray,
    class_names: Sequence[str] | None,
    shown: np.ndarray,
) -> Figure:
    """A row per cluster of ``shown`` (ids in ``clusters``, -1 noise), a column per class of
    ``labels``: the share of the cluster's items in the class (each row sums to 1; a shown
    cluster with no item among ``clusters``, e.g. one of unlabelled items only, which the caller
    left out, is a row of zeros)."""
    classes = np.unique(labels)
    counts = np.zeros((len(shown), len(classes)))  # (clusters shown, classes)
    for row, cluster in enumerate(shown):
        found, number = np.unique(labels[clusters == cluster], return_counts=True)
        counts[row, np.searchsorted(classes, found)] = number
    totals = counts.sum(axis=1, keepdims=True)  # (clusters shown, 1)
    shares = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
    figure, (ax,) = new_figure(size=1.0)
    figure.set_size_inches(min(2 + 0.35 * len(classes), 16), min(1.5 + 0.3 * len(shown), 14))
    image = ax.imshow(shares, aspect="auto", cmap="Blues", vmin=0, vmax=1)
    figure.colorbar(image, ax=ax, label="share of the cluster", format=PercentFormatter(1.0))
    if len(classes) <= MAX_NAMED_CLASSES:
        ax.set_xticks(range(len(classes)))
        ax.set_xticklabels([group_name(int(c), class_names) for c in classes], rotation=90)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([group_name(int(c), None, NOISE) for c in shown])
    ax.set(xlabel="class", ylabel="cluster", title="clusters vs classes")
    return figure
