"""2-D maps of items coloured by group (class, sub-class or cluster), with a legend of names.

The one scatter behind the t-SNE files (:func:`clusterable.plots.plot_tsne`) and the reports'
map panel. Negative groups (clustering noise, distractor items) are light grey.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from clusterable.plots._figure import new_figure

#: Beyond this many groups a legend would be taller than the map: the colours alone are shown.
MAX_LEGEND_GROUPS = 20

#: The colour of negative groups (noise, distractors).
NOISE_GREY = (0.75, 0.75, 0.75, 1.0)

#: One way of colouring a map: each item's group, the groups' names (None: their numbers), and
#: the panel's title.
Colouring = tuple[np.ndarray, Sequence[str] | None, str]


def group_name(group: int, names: Sequence[str] | None, noise: str = "noise") -> str:
    """What a legend or a table calls ``group``: ``noise`` when negative, else ``names[group]``,
    or the number where there are no names or too few."""
    if group < 0:
        return noise
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
    noise: str = "noise",
) -> None:
    """Scatter ``points`` ``(n, 2)`` in one colour per group of ``groups`` ``(n,)``, negative
    groups grey and called ``noise``; a legend to the right names up to
    :data:`MAX_LEGEND_GROUPS` groups."""
    classes = np.unique(groups)
    for colour, group in zip(group_colours(len(classes)), classes, strict=True):
        members = groups == group
        colour = NOISE_GREY if group < 0 else colour
        label = group_name(int(group), names, noise)
        ax.scatter(points[members, 0], points[members, 1], s=5, color=colour, label=label)
    ax.set(title=title, xticks=[], yticks=[])
    if len(classes) <= MAX_LEGEND_GROUPS:
        ax.legend(fontsize=7, markerscale=2.5, loc="center left", bbox_to_anchor=(1.0, 0.5))


def draw_maps(points: np.ndarray, colourings: Sequence[Colouring], noise: str = "noise") -> Figure:
    """The map ``points`` ``(n, 2)`` once per colouring, side by side."""
    figure, axes = new_figure(columns=len(colourings), size=5.0)
    for ax, (groups, names, title) in zip(axes, colourings, strict=True):
        scatter_groups(ax, points, np.asarray(groups), names, title, noise)
    return figure
