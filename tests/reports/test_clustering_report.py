"""The report of a clustering: sizes, majority classes, purity, members, confusion, noise."""

from __future__ import annotations

import re

import numpy as np
import pytest

from clusterable.cli import main
from clusterable.reports import write_clustering_report

from _html import decoded_png, image_sources, section_ids


def cluster_rows(page: str) -> list[list[str]]:
    """The cells of the cluster table, as text (thumbnail strips dropped)."""
    panel = page.split('<section id="clusters">')[1].split("</table>")[0]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", panel)[1:]
    return [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in rows]


def test_sizes_majority_and_purity_are_those_of_the_clusters(tmp_path):
    rng = np.random.default_rng(0)
    points = rng.normal(size=(90, 4))
    clusters = np.repeat([0, 1, 2], 30)
    labels = np.concatenate([np.zeros(27), np.ones(3), np.ones(15), np.full(15, 2), np.full(30, 2)])
    page = write_clustering_report(
        points, clusters, tmp_path / "c.html", labels=labels.astype(int), class_names=list("abc")
    ).read_text()
    assert section_ids(page) == ["settings", "metrics", "map", "clusters"]
    # Equal sizes keep their order; cluster 1 is half b, half c: its majority is the first seen.
    assert cluster_rows(page) == [
        ["0", "30", "a", "90%"],
        ["1", "30", "b", "50%"],
        ["2", "30", "c", "100%"],
    ]
    heat_map = decoded_png(image_sources(page.split('<section id="clusters">')[1])[0])
    assert heat_map.size[0] > 100


def test_noise_is_its_own_group(tmp_path):
    points = np.random.default_rng(1).normal(size=(40, 3))
    clusters = np.repeat([0, 1, -1], [20, 15, 5])
    page = write_clustering_report(points, clusters, tmp_path / "c.html").read_text()
    assert [row[:2] for row in cluster_rows(page)] == [["0", "20"], ["1", "15"], ["noise", "5"]]
    assert "2 clusters of 40 items, 5 items called noise" in page


def test_mismatched_rows_are_refused(tmp_path):
    with pytest.raises(ValueError, match="3 cluster ids for 4 embeddings"):
        write_clustering_report(np.zeros((4, 2)), np.zeros(3), tmp_path / "c.html")


def test_a_saved_partition_of_embedded_images_shows_its_members(digits_run, tmp_path, capsys):
    emb = tmp_path / "emb"
    assert main(["embed", str(digits_run), "--split", "test", "--out", str(emb)]) == 0
    partition = tmp_path / "p.npz"
    argv = ["cluster", str(emb / "embeddings.npy"), "--clustering", "aas", "--save", str(partition)]
    assert main([*argv, "--out", str(tmp_path / "c.npy")]) == 0
    assert main(["report", str(partition), "--embeddings", str(emb / "embeddings.npy")]) == 0
    written = tmp_path / "p-report.html"
    assert f"wrote {written}" in capsys.readouterr().out
    page = written.read_text()
    assert "majority class" in page and 'class="thumb ' in page  # labels and images found
    counts = np.unique(np.load(tmp_path / "c.npy"), return_counts=True)[1]
    assert sorted(int(row[1]) for row in cluster_rows(page)) == sorted(counts.tolist())[-40:]


def test_unlabelled_items_are_left_out_of_the_scores(tmp_path):
    """A negative label is no class: the scores are those of the labelled items alone, and
    labels of fewer than two classes give the page no scores at all."""
    from clusterable.evaluate import evaluate_embeddings, partition_metric_names

    rng = np.random.default_rng(3)
    points = rng.normal(size=(60, 4))
    clusters = np.repeat([0, 1, 2], 20)
    labels = np.repeat([0, 1, 2], 20)
    labels[::4] = -1  # a quarter unlabelled
    page = write_clustering_report(points, clusters, tmp_path / "c.html", labels=labels)
    text = page.read_text()
    assert "against the 3 classes (15 unlabelled items left out)" in text
    keep = labels >= 0
    expected = evaluate_embeddings(
        points[keep], labels[keep], metrics=partition_metric_names(), clustering=clusters[keep]
    )
    assert f"{100 * expected['nmi']:.2f}" in text
    unlabelled = np.full(60, -1)
    text = write_clustering_report(points, clusters, tmp_path / "u.html", labels=unlabelled)
    assert "metrics" not in section_ids(text.read_text())


def test_cluster_ids_without_embeddings_get_a_one_line_error(tmp_path, capsys):
    np.save(tmp_path / "c.npy", np.zeros(5, dtype=np.int64))
    with pytest.raises(SystemExit):
        main(["report", str(tmp_path / "c.npy")])
    assert "add --embeddings EMB.npy" in capsys.readouterr().err


def test_the_partition_an_evaluation_scored_is_reported_with_its_rule(tmp_path):
    from clusterable.evaluate import evaluate_embeddings

    rng = np.random.default_rng(2)
    labels = np.repeat(np.arange(3), 20)
    points = rng.normal(size=(60, 4)) + 8 * np.eye(4)[labels]
    table = evaluate_embeddings(points, labels, metrics=["nmi"])
    page = write_clustering_report(
        points, table.partition, tmp_path / "c.html", labels=labels
    ).read_text()
    assert "k-means++ seeding, 10 restarts of at most 20 iterations, best inertia" in page
    assert [row[:2] for row in cluster_rows(page)] == [["0", "20"], ["1", "20"], ["2", "20"]]
    assert "NMI (clusters)" in page and "silhouette (clusters)" in page


def test_unlabelled_members_count_in_the_size_never_as_a_class(tmp_path, monkeypatch):
    """A cluster's majority and purity are those of its labelled members; a cluster of
    unlabelled items alone has none; the heat map has no column for them."""
    from clusterable.reports import panels

    drawn, draw = [], panels.draw_confusion

    def draw_confusion(clusters, labels, class_names, shown):
        drawn.append(labels)
        return draw(clusters, labels, class_names, shown)

    monkeypatch.setattr(panels, "draw_confusion", draw_confusion)
    points = np.random.default_rng(4).normal(size=(45, 3))
    clusters = np.repeat([0, 1, 2], [20, 15, 10])
    # cluster 0: 12 unlabelled, 6 of a, 2 of b; cluster 1: 15 of b; cluster 2: unlabelled only
    labels = np.concatenate([np.full(12, -1), np.zeros(6), np.ones(17), np.full(10, -1)])
    page = write_clustering_report(
        points, clusters, tmp_path / "c.html", labels=labels.astype(int), class_names=["a", "b"]
    ).read_text()
    assert cluster_rows(page) == [
        ["0", "20", "a", "75%"],
        ["1", "15", "b", "100%"],
        ["2", "10", "–", "–"],
    ]
    assert "22 unlabelled items count in the sizes, not in majority or purity" in page
    assert "noise" not in page.split('<section id="clusters">')[1]
    assert [np.unique(labels).tolist() for labels in drawn] == [[0, 1]]
