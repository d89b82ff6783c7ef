"""A user's own unlabelled items (a folder of photos without class folders, a table without
labels) through every verb: `train --unsupervised` trains OPML on their pseudo-labels and writes
no test table; the model then clusters, embeds, indexes and exports them; what needs classes
(evaluate, a supervised train, tune) says so in one line. Both were refused whole before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clusterable.cli import main

OPML = ["--unsupervised", "--loss", "opml", "--loss-arg", "metric_dim=8", "--loss-arg",
        "maxiter=2", "--embedding-dim", "16", "--epochs", "1", "--batch-size", "16",
        "--no-progress", "--seed", "0"]  # fmt: skip


def photos(folder: Path, count: int = 36) -> Path:
    """``count`` JPEGs directly in ``folder``, in three colours: no class folders."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    for i in range(count):
        pixels = rng.integers(0, 40, (24, 32, 3)) + 150 * np.eye(3, dtype=int)[i % 3]
        Image.fromarray(pixels.astype(np.uint8)).save(folder / f"{i:02d}.jpg", quality=90)
    return folder


def table(path: Path) -> Path:
    """Three overlapping blobs of 40 rows in 6 dimensions saved as ``x`` alone."""
    rng = np.random.default_rng(0)
    x = np.repeat(np.eye(3, 6) * 3, 40, axis=0) + rng.normal(size=(120, 6))
    np.savez(path, x=x.astype(np.float32))
    return path


@pytest.fixture(scope="module", params=["folder", "table"])
def unlabelled_run(request, tmp_path_factory):
    """An unsupervised run on unlabelled items: its folder, its items, the items' data name."""
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "folder":
        items = photos(root / "photos")
        data = [f"folder:{items}", "--image-size", "16"]
    else:
        items = table(root / "rows.npz")
        data = [f"table:{items}"]
    out = root / "run"
    assert main(["train", "--data", *data, *OPML, "--out", str(out)]) == 0
    return out, items, data


def cli(*argv: object) -> int:
    return main([str(a) for a in argv])


def test_it_trains_without_a_test_table_and_says_how_to_cluster(unlabelled_run, capsys):
    out, _, data = unlabelled_run
    assert (out / "checkpoints").is_dir() and not (out / "test_metrics.json").exists()
    assert "No test table" in (out / "report.html").read_text()
    assert cli("report", out) == 0
    again = out.parent / "again"  # the banner of a run, printed where its test table would be
    capsys.readouterr()
    assert main(["train", "--data", *data, *OPML, "--out", str(again)]) == 0
    printed = capsys.readouterr().out
    assert "no test table" in printed
    assert f"clusterable cluster {again}  # its items' clusters" in printed  # every item


def test_the_model_clusters_embeds_indexes_and_exports_them(unlabelled_run, tmp_path):
    out, items, _ = unlabelled_run
    clusters = tmp_path / "clusters.npy"
    assert cli("cluster", out, "--split", "train", "--n-clusters", "3", "--out", clusters) == 0
    assert np.load(clusters).shape == (len(_rows(items)),)
    assert cli("embed", out, "--items", items, "--out", tmp_path / "emb") == 0
    embedded = np.load(tmp_path / "emb" / "embeddings.npy")
    assert embedded.shape == (len(_rows(items)), 16)
    assert cli("cluster", tmp_path / "emb" / "embeddings.npy", "--n-clusters", "3",
               "--out", tmp_path / "c2.npy", "--save", tmp_path / "p.npz") == 0  # fmt: skip
    assert cli("report", tmp_path / "p.npz", "--embeddings", tmp_path / "emb" / "embeddings.npy",
               "--out", tmp_path / "clusters.html") == 0  # fmt: skip
    assert (tmp_path / "clusters.html").is_file()
    assert cli("index", out, "--out", tmp_path / "gallery.npz") == 0
    assert cli("export", out, "--format", "torchscript", "--out", tmp_path / "m.pt") == 0


def _rows(items: Path) -> list:
    if items.is_dir():
        return sorted(items.iterdir())
    return list(np.load(items)["x"])


def test_what_needs_classes_says_so_in_one_line(unlabelled_run, tmp_path, capsys):
    out, _, data = unlabelled_run
    capsys.readouterr()
    for argv, words in (
        (["evaluate", out], "no test split to score"),
        (["train", "--data", *data, "--epochs", "1", "--out", tmp_path / "supervised"],
         "train --unsupervised trains on all of it"),
        (["tune", "--data", data[0], "--param", "lr=log:1e-4:1e-2", "--trials", "1"],
         "has no labelled item"),
    ):  # fmt: skip
        with pytest.raises(SystemExit) as stop:
            cli(*argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and len(err.strip().splitlines()) == 1, err
        assert words in err, err
    assert not (tmp_path / "supervised" / "checkpoints").exists()


def test_its_verbs_read_every_item_for_want_of_a_test_split(unlabelled_run, tmp_path, capsys):
    """Such a run has no test split: plot, embed and cluster of it read its train split, every
    item, unless told (each refused it, asking for --split train); --split test is refused in one
    line saying so, and evaluate of any split says the items have no classes to score."""
    out, items, _ = unlabelled_run
    rows = len(_rows(items))
    assert cli("plot", out, "--out", tmp_path / "plots") == 0
    assert (tmp_path / "plots" / "tsne.png").is_file()
    assert cli("embed", out, "--out", tmp_path / "emb") == 0
    assert np.load(tmp_path / "emb" / "embeddings.npy").shape == (rows, 16)
    assert cli("cluster", out, "--n-clusters", "3", "--out", tmp_path / "c.npy") == 0
    assert np.load(tmp_path / "c.npy").shape == (rows,)
    capsys.readouterr()
    for argv, words in (
        (["plot", out, "--split", "test", "--out", tmp_path / "p2"], "--split test: the run"),
        (["embed", out, "--split", "test", "--out", tmp_path / "e2"], "--split test: the run"),
        (["cluster", out, "--split", "test", "--out", tmp_path / "c2.npy"], "no test split"),
        (["index", out, "--split", "test", "--out", tmp_path / "i.npz"], "--split train"),
        (["evaluate", out, "--split", "train"], f"clusterable cluster {out.resolve()}"),
    ):
        with pytest.raises(SystemExit) as stop:
            cli(*argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and len(err.strip().splitlines()) == 1, err
        assert words in err and "unlabelled items" in err, err


def test_assign_calibrates_on_labelled_items_only_and_says_so(unlabelled_run, tmp_path, capsys):
    """--max-distance auto needs classes to choose its distance: the run's unlabelled items are
    refused in one line naming --calibration (it said "points is empty")."""
    out, items, _ = unlabelled_run
    part = tmp_path / "p.npz"
    argv = ["cluster", out, "--split", "train", "--n-clusters", "3", "--save", part]
    assert cli(*argv, "--out", tmp_path / "c.npy") == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        cli("assign", part, out, items, "--max-distance", "auto", "--calibration", "train")
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--calibration: the run's train split holds 0 classes" in err, err


def test_classify_by_its_items_is_refused_before_any_embedding(unlabelled_run, capsys, monkeypatch):
    """A run's train split is the gallery classify votes among: without labels it is refused
    in one line before the items and the whole split are embedded (it was, after both)."""
    from clusterable.trained_run import TrainedRun

    out, items, _ = unlabelled_run

    def embed(*args, **kwargs):
        raise AssertionError("embedded before the refusal")

    monkeypatch.setattr(TrainedRun, "embed", embed)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        cli("classify", out, items)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert "has no labels to classify by" in err and f"clusterable index {out}" in err, err
