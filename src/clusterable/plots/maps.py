"""2-D maps of items coloured by group (class, sub-class or cluster), with a legend of names.

The one scatter behind the t-SNE files (:func:`clusterable.plots.plot_tsne`) and the reports'
map panel. Negative groups are light grey: an unlabelled item (label -1, an OPML distractor)
among classes, noise (cluster -1, AAS and HDBSCAN) among clusters; each is named as what it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from clusterable.plots._figure import new_figure

#: Beyond this many groups a legend would be taller than the map: the colours alone are shown.
MAX_LEGEND_GROUPS = 20

#: The colour of negative groups (unlabelled items, noise).
NOISE_GREY = (0.75, 0.75, 0.75, 1.0)

#: What a negative class is called: an item without a class (label -1).
UNLABELLED = "unlabelled"

#: What a negative cluster is called: an item no cluster took (cluster -1).
NOISE = "noise"


class Colouring(NamedTuple):
    """One way of colouring a map."""

    groups: np.ndarray  # (n,) each item's group
    names: Sequence[str] | None  # the groups' names; None: their numbers
    title: str  # the panel's title
    negative: str = UNLABELLED  # what a negative group is called: NOISE for clusters


def group_name(group: int, names: Sequence[str] | None, negative: str = UNLABELLED) -> str:
    """What a legend or a table calls ``group``: ``negative`` when negative (a class's default:
    :data:`UNLABELLED`; clusters pass :data:`NOISE`), else ``names[group]``, or the number where
    there are no names or too few."""
    if group < 0:
        return negative
    if names is not None and group < len(names):
        return str(names[group])
    return str(group)


def group_colours(count: int) -> list[tuple[float, float, float, float]]:
    """``count`` distinct colours: tab10 up to 10, tab20 up to 20, evenly along turbo beyond."""
    cmap = colormaps["tab10" if count <= 10 else "tab20" if count <= 20 else "turbo"]
    if count <= 20:
        return [cmap(i) for i in range(count)]
    return [cmap(i / max(count - 1, 1)) for i in range(count)]


def scatter_groups(
    ax: Axes,
    points: np.ndarray,
    groups: np.ndarray,
    names: Sequence[str] | None,
    title: str,
    negative: str = UNLABELLED,
) -> None:
    """Scatter ``points`` ``(n, 2)`` in one colour per group of ``groups`` ``(n,)``, negative
    groups grey and called ``negative``; a legend to the right names up to
    :data:`MAX_LEGEND_GROUPS` groups."""
    classes = np.unique(groups)
    for colour, group in zip(group_colours(len(classes)), classes, strict=True):
        members = groups == group
        colour = NOISE_GREY if group < 0 else colour
        label = group_name(int(group), names, negative)
        ax.scatter(points[members, 0], points[members, 1], s=5, color=colour, label=label)
    ax.set(title=title, xticks=[], yticks=[])
    if len(classes) <= MAX_LEGEND_GROUPS:
        ax.legend(fontsize=7, markerscale=2.5, loc="center left", bbox_to_anchor=(1.0, 0.5))


def draw_maps(points: np.ndarray, colourings: Sequence[Colouring]) -> Figure:
    """The map ``points`` ``(n, 2)`` once per colouring, side by side."""
    figure, axes = new_figure(columns=len(colourings), size=5.0)
    for ax, (groups, names, title, negative) in zip(axes, colourings, strict=True):
        scatter_groups(ax, points, np.asarray(groups), names, title, negative)
    return figure
