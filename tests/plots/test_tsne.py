"""t-SNE files: a panel by class and one by sub-class, the same items for every embedding."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from clusterable.plots import tsne


@pytest.fixture
def flat_map(monkeypatch):
    """t-SNE replaced by the first two coordinates, to test the drawing alone."""
    monkeypatch.setattr(tsne, "tsne_map", lambda embeddings, seed=0: embeddings[:, :2])


def items(n: int = 40, d: int = 4) -> tuple[np.ndarray, np.ndarray]:
    labels = np.arange(n) % 4
    return np.random.default_rng(0).normal(size=(n, d)) + 5 * np.eye(d)[labels], labels


def test_the_file_is_a_png_map(tmp_path):
    embeddings, labels = items()
    path = tsne.plot_tsne(embeddings, labels, tmp_path / "maps" / "t.png")
    assert path == tmp_path / "maps" / "t.png"
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size[0] > 100


def test_sub_classes_get_a_second_panel_only_when_they_differ(drawn, flat_map, tmp_path):
    figures = drawn(tsne)
    embeddings, labels = items()
    tsne.plot_tsne(embeddings, labels, tmp_path / "a.png", subclasses=labels, title="run")
    tsne.plot_tsne(embeddings, labels, tmp_path / "b.png", subclasses=np.arange(40) % 8)
    assert [ax.get_title() for ax in figures[0].axes] == ["run — classes"]
    assert [ax.get_title() for ax in figures[1].axes] == ["classes", "sub-classes"]
    assert len(figures[1].axes[1].get_legend().get_texts()) == 8


def test_distractors_are_named_as_such(drawn, flat_map, tmp_path):
    figures = drawn(tsne)
    embeddings, labels = items()
    tsne.plot_tsne(embeddings, np.where(labels == 3, -1, labels), tmp_path / "t.png")
    legend = [t.get_text() for t in figures[0].axes[0].get_legend().get_texts()]
    assert legend == ["unlabelled / distractor", "0", "1", "2"]


def test_one_file_per_embedding_of_the_same_items(drawn, flat_map, tmp_path):
    figures = drawn(tsne)
    embeddings, labels = items()
    maps = {"MsDNN": embeddings, "triplet (m=0.2)": -embeddings}
    names = tsne.plot_tsne_maps(maps, labels, tmp_path, 10, subclasses=labels + 4 * (labels > 1))
    assert names == ["tsne_msdnn.png", "tsne_triplet_m0.2.png"]
    first, second = (f.axes[0].collections for f in figures)
    drawn_first = np.concatenate([c.get_offsets() for c in first])
    drawn_second = np.concatenate([c.get_offsets() for c in second])
    assert len(drawn_first) == 10
    assert np.allclose(np.sort(drawn_first, axis=0), np.sort(-drawn_second, axis=0))
    assert [ax.get_title() for ax in figures[1].axes] == [
        "triplet (m=0.2) — classes",
        "triplet (m=0.2) — sub-classes",
    ]


def test_a_title_suffix_names_the_split(drawn, flat_map, tmp_path):
    figures = drawn(tsne)
    embeddings, labels = items()
    tsne.plot_tsne_maps({"lifted": embeddings}, labels, tmp_path, 100, title_suffix=", unseen")
    assert figures[0].axes[0].get_title() == "lifted, unseen — classes"
    assert len(figures[0].axes) == 1
