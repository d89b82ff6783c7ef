"""PCA maps: each embedding on its principal plane, a panel each, the same items in every one."""

from __future__ import annotations

import numpy as np

from clusterable.plots import pca


def test_the_principal_plane_keeps_the_widest_directions():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3)) * [0.1, 5.0, 1.0] + 7.0  # widest along y, then z
    plane = pca.principal_plane(x)
    assert plane.shape == (200, 2)
    assert np.allclose(plane.mean(axis=0), 0, atol=1e-9)
    assert np.allclose(np.abs(np.corrcoef(plane[:, 0], x[:, 1])[0, 1]), 1, atol=1e-3)
    assert np.var(plane[:, 0]) > np.var(plane[:, 1]) > 0.5
    assert abs(np.cov(plane.T)[0, 1]) < 1e-9  # the components are uncorrelated


def test_a_panel_per_embedding_spare_panels_hidden(drawn, tmp_path):
    figures = drawn(pca)
    rng = np.random.default_rng(0)
    labels = np.arange(50) % 5
    maps = {name: rng.normal(size=(50, 4)) for name in ("FFNN: CCE", "FFNN: Center", "CNN: CCE")}
    pca.plot_pca_maps(maps, labels, tmp_path / "p.png", columns=2, items=20)
    axes = figures[0].axes
    assert [ax.get_visible() for ax in axes] == [True, True, True, False]
    assert [ax.get_title() for ax in axes[:3]] == list(maps)
    drawn_labels = [ax.collections[0].get_array() for ax in axes[:3]]
    assert len(drawn_labels[0]) == 20
    assert all(np.array_equal(drawn_labels[0], other) for other in drawn_labels[1:])
