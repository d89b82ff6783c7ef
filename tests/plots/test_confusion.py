"""Clusters against classes: each row the shares of one cluster's items in each class."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from clusterable.plots import draw_confusion


def test_each_row_holds_the_shares_of_a_cluster():
    clusters = np.array([0, 0, 0, 0, 1, 1, -1, -1])
    labels = np.array([0, 0, 0, 1, 1, 1, 0, 2])
    figure = draw_confusion(clusters, labels, ["cat", "dog"], np.array([0, 1, -1]))
    ax = figure.axes[0]
    shares = ax.get_images()[0].get_array()
    assert np.allclose(shares, [[0.75, 0.25, 0], [0, 1, 0], [0.5, 0, 0.5]])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["cat", "dog", "2"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1", "noise"]
    plt.close(figure)


def test_too_many_classes_go_unnamed():
    labels = np.arange(50)
    figure = draw_confusion(np.zeros(50, dtype=int), labels, None, np.array([0]))
    assert len(figure.axes[0].get_xticks()) < 50
    assert figure.axes[0].get_images()[0].get_array().shape == (1, 50)
    plt.close(figure)


def test_a_shown_cluster_without_items_is_a_row_of_zeros():
    """A cluster of unlabelled items alone, which the report leaves out of the heat map."""
    clusters, labels = np.array([0, 0, 1]), np.array([0, 1, 1])
    figure = draw_confusion(clusters, labels, None, np.array([0, 2, 1]))
    shares = figure.axes[0].get_images()[0].get_array()
    assert np.array_equal(shares, [[0.5, 0.5], [0, 0], [0, 1]])
    plt.close(figure)
