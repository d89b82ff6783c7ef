"""The one scatter of maps: a colour and a legend name per group, negative groups grey and named
as what they are (an unlabelled item among classes, noise among clusters), no legend when the
groups are too many to name."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba

from clusterable.plots.maps import (
    MAX_LEGEND_GROUPS,
    NOISE,
    NOISE_GREY,
    Colouring,
    draw_maps,
    group_colours,
    group_name,
    scatter_groups,
)


@pytest.fixture
def ax():
    figure, ax = plt.subplots()
    yield ax
    plt.close(figure)


def test_a_group_is_named_by_its_name_its_number_or_as_what_a_negative_group_is():
    assert group_name(1, ["cat", "dog"]) == "dog"
    assert group_name(2, ["cat", "dog"]) == "2"  # fewer names than groups
    assert group_name(0, None) == "0"
    assert group_name(-1, ["cat"]) == "unlabelled"  # a class's: an item without one
    assert group_name(-1, None, NOISE) == "noise"
    assert group_name(-1, None, negative="distractor") == "distractor"


def test_each_group_is_one_colour_and_noise_is_grey(ax):
    points = np.arange(20, dtype=float).reshape(10, 2)
    groups = np.array([-1, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    scatter_groups(ax, points, groups, ["a", "b", "c"], "title", negative="distractor")
    counts = [len(c.get_offsets()) for c in ax.collections]
    assert counts == [1, 2, 3, 4]
    assert tuple(ax.collections[0].get_facecolor()[0]) == NOISE_GREY
    colours = {tuple(c.get_facecolor()[0]) for c in ax.collections}
    assert len(colours) == 4
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["distractor", "a", "b", "c"]
    assert ax.get_title() == "title"


def test_too_many_groups_get_no_legend(ax):
    groups = np.arange(MAX_LEGEND_GROUPS + 1)
    scatter_groups(ax, np.zeros((len(groups), 2)), groups, None, "")
    assert ax.get_legend() is None
    assert len(ax.collections) == len(groups)


@pytest.mark.parametrize("count", [3, 15, 30])
def test_the_colours_are_distinct(count):
    colours = group_colours(count)
    assert len(colours) == count and len({to_rgba(c) for c in colours}) == count


def test_one_panel_per_colouring_each_naming_its_negative_group():
    points = np.random.default_rng(0).normal(size=(12, 2))
    labels, clusters = np.arange(12) % 3 - 1, np.arange(12) % 3 - 1  # -1, 0, 1, -1, ...
    colourings = [
        Colouring(labels, None, "by class"),
        Colouring(clusters, ["x", "y"], "by cluster", NOISE),
    ]
    figure = draw_maps(points, colourings)
    assert [ax.get_title() for ax in figure.axes] == ["by class", "by cluster"]
    legends = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in figure.axes]
    assert legends == [["unlabelled", "0", "1"], ["noise", "x", "y"]]
    plt.close(figure)
