"""``clusterable embed RUN --items PATH...``: a user's own photos (a flat folder, class folders,
single files) embedded by a trained run, with each row's file in ids.npy, then clustered; and the
flags that cannot go with it refused in one line before any work."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
from test_cli_use import one_line_error, work  # noqa: F401  (tests/: the trained run)

from clusterable.cli import main
from clusterable.index import EmbeddingIndex
from clusterable.trained_run import MODEL_IDENTITY, ModelIdentity, TrainedRun


def test_a_flat_folder_is_embedded_with_its_files_as_ids(work, tmp_path, capsys):  # noqa: F811
    _, run, pngs = work
    out = tmp_path / "emb"
    assert main(["embed", str(run), "--items", str(pngs[0].parent), "--out", str(out)]) == 0
    embeddings = np.load(out / "embeddings.npy")
    ids = np.load(out / "ids.npy")
    assert ids.tolist() == [os.path.abspath(p) for p in sorted(pngs)]
    bare = TrainedRun.load(run, device="cpu").embed(pngs[0].parent, progress=False)
    np.testing.assert_array_equal(embeddings, bare.embeddings)
    assert (np.load(out / "labels.npy") == -1).all()  # a flat folder: no labels
    assert ModelIdentity.beside(out / "embeddings.npy").model == TrainedRun.load(run).model_id
    assert "ids.npy" in capsys.readouterr().out
    # The seam: the user's photos clustered, each file given its cluster.
    clusters, table = tmp_path / "clusters.npy", tmp_path / "clusters.json"
    argv = ["cluster", str(out / "embeddings.npy"), "--n-clusters", "2", "--out", str(clusters)]
    assert main([*argv, "--json", str(table)]) == 0
    written = json.loads(table.read_text())
    assert [item["id"] for item in written["items"]] == ids.tolist()
    assert [item["cluster"] for item in written["items"]] == np.load(clusters).tolist()
    assert written["n_clusters"] == 2 and written["method"] == "kmeans"
    # Its report shows each cluster's photos, read again from the files ids.npy names, and no
    # scores: a flat folder's labels are all -1.
    partition = tmp_path / "p.npz"
    assert main([*argv, "--save", str(partition), "--overwrite"]) == 0
    page = tmp_path / "page.html"
    report = ["report", str(partition), "--embeddings", str(out / "embeddings.npy")]
    assert main([*report, "--out", str(page)]) == 0
    text = page.read_text()
    assert 'class="thumb ' in text and 'id="metrics"' not in text
    np.save(out / "ids.npy", ids[:3])  # ids of other items than these rows
    err = one_line_error(capsys, [*argv, "--json", str(table), "--overwrite"], "cluster")
    assert "ids.npy" in err and "one id per embedding row" in err


def test_relative_items_are_absolute_in_model_json(work, tmp_path, monkeypatch):  # noqa: F811
    """``model.json`` names the items as ``ids.npy`` does, by absolute path, so that it holds
    from another working folder (``photos/`` given in one folder named another's there); several
    items are a list, one entry each, whatever spaces their paths hold."""
    _, run, pngs = work
    photos = tmp_path / "photos"
    shutil.copytree(pngs[0].parent, photos)
    (photos / "q 1.png").write_bytes((photos / "q1.png").read_bytes())
    monkeypatch.chdir(tmp_path)
    cases = {"one": ["photos"], "two": ["photos/q0.png", "./photos/q 1.png"]}
    for out, items in cases.items():
        assert main(["embed", str(run), "--items", *items, "--out", out]) == 0
        identity = ModelIdentity.beside(tmp_path / out / "embeddings.npy")
        named = [str(tmp_path / item.removeprefix("./")) for item in items]
        assert identity.data == (named[0] if len(items) == 1 else tuple(named))
        saved = json.loads((tmp_path / out / MODEL_IDENTITY).read_text())["data"]
        assert saved == (named[0] if len(items) == 1 else named)
        assert identity.split is None and os.path.isabs(identity.run)
        ids = np.load(tmp_path / out / "ids.npy")
        assert all(name.startswith(str(photos)) for name in ids.tolist())


def test_cluster_json_of_a_run_names_its_split_items(work, tmp_path):  # noqa: F811
    _, run, _ = work
    table = tmp_path / "c.json"
    argv = ["cluster", str(run), "--out", str(tmp_path / "c.npy"), "--json", str(table)]
    assert main(argv) == 0
    items = json.loads(table.read_text())["items"]
    assert [item["id"] for item in items] == list(range(len(items)))  # digits: row numbers


def test_class_folders_and_single_files(work, tmp_path):  # noqa: F811
    _, run, pngs = work
    photos = tmp_path / "photos"
    for i, png in enumerate(pngs):
        (photos / ("cats" if i < 2 else "dogs")).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, photos / ("cats" if i < 2 else "dogs") / png.name)
    out = tmp_path / "emb"
    assert main(["embed", str(run), "--items", str(photos), "--out", str(out)]) == 0
    assert np.load(out / "labels.npy").tolist() == [0, 0, 1, 1, 1]  # by class folder, sorted
    files = [str(pngs[3]), str(pngs[1])]
    assert main(["embed", str(run), "--items", *files, "--out", str(out), "--overwrite"]) == 0
    assert np.load(out / "ids.npy").tolist() == [os.path.abspath(p) for p in files]
    assert np.load(out / "embeddings.npy").shape[0] == 2


def test_a_split_embed_writes_ids_and_saved_arrays_remove_them(work, tmp_path, capsys):  # noqa: F811
    _, run, _ = work
    out = tmp_path / "emb"
    assert main(["embed", str(run), "--out", str(out)]) == 0
    ids = np.load(out / "ids.npy")
    assert ids.tolist() == list(range(len(np.load(out / "labels.npy"))))  # digits: row numbers
    assert ModelIdentity.beside(out / "embeddings.npy").split == "test"  # the default split
    again = tmp_path / "again"
    shutil.copytree(out, again)
    (again / MODEL_IDENTITY).unlink()
    argv = ["embed", str(again / "embeddings.npy"), str(again / "labels.npy"), "--out", str(out)]
    assert main([*argv, "--overwrite"]) == 0
    assert not (out / "ids.npy").exists()  # saved arrays have no ids: the old ones would lie
    assert "removed" in capsys.readouterr().out


def test_items_refuse_the_flags_of_a_data_set(work, tmp_path, capsys):  # noqa: F811
    _, run, pngs = work
    out = tmp_path / "emb"
    items = ["--items", str(pngs[0].parent), "--out", str(out)]
    err = one_line_error(capsys, ["embed", str(run), "--data", "digits", *items], "embed")
    assert "--data" in err and "--items" in err
    err = one_line_error(capsys, ["embed", str(run), str(pngs[0]), *items], "embed")
    assert "LABELS" in err
    assert main(["embed", str(run), "--out", str(tmp_path / "split")]) == 0
    saved = str(tmp_path / "split" / "embeddings.npy")
    err = one_line_error(capsys, ["embed", saved, str(pngs[0]), *items], "embed")
    assert "--items" in err and "holds embeddings already" in err
    err = one_line_error(
        capsys,
        ["embed", str(run), "--items", str(pngs[0]), "--split", "train", "--out", str(out)],
        "embed",
    )
    assert "split" in err
    assert not out.exists()


def test_a_file_given_twice_is_refused_before_embedding(work, tmp_path, capsys, monkeypatch):  # noqa: F811
    """``./q0.png`` and ``q0.png`` are one file: embedded twice it would be two rows of one id,
    which `index` then refuses; both `embed --items` and `index --add` refuse it first."""
    folder, run, pngs = work
    monkeypatch.chdir(pngs[0].parent)
    out = tmp_path / "emb"
    argv = ["embed", str(run), "--items", "q0.png", "q1.png", "./q0.png", "--out", str(out)]
    err = one_line_error(capsys, argv, "embed")
    assert f"--items names {pngs[0]} twice (as q0.png and ./q0.png)" in err
    assert not out.exists()
    gallery = tmp_path / "gallery.npz"
    shutil.copy(folder / "gallery.npz", gallery)
    before = gallery.read_bytes()
    err = one_line_error(capsys, ["index", str(gallery), "--add", "q1.png", "q1.png"], "index")
    assert f"--add names {pngs[1]} twice (q1.png)" in err
    assert gallery.read_bytes() == before


def test_a_folder_among_several_items_is_named_as_a_folder(work, tmp_path, capsys):  # noqa: F811
    """Two folders were read as two image files: "image file A does not exist"."""
    _, run, pngs = work
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, png in ((first, pngs[0]), (second, pngs[1])):
        folder.mkdir()
        shutil.copy(png, folder / png.name)
    argv = ["embed", str(run), "--items", str(first), str(second), "--out", str(tmp_path / "o")]
    err = one_line_error(capsys, argv, "embed")
    assert f"{first} is a folder among 2 items: give one folder alone" in err, err
    assert "does not exist" not in err


def test_a_mistyped_folder_is_not_called_an_unknown_data_set(work, tmp_path, capsys):  # noqa: F811
    folder, run, _ = work
    missing = str(tmp_path / "photos2")
    err = one_line_error(
        capsys, ["embed", str(run), "--items", missing, "--out", str(tmp_path / "o")], "embed"
    )
    assert "no folder or file" in err and "photos2" in err and "unknown dataset" not in err
    err = one_line_error(capsys, ["search", str(folder / "gallery.npz"), "photos2"], "search")
    assert "no folder or file 'photos2' exists" in err


def test_a_folder_read_as_a_data_set_is_reported_with_its_images(work, tmp_path, capsys):  # noqa: F811
    """``embed --items FOLDER --split S`` records ``folder:ABSOLUTE`` (and ``--data folder:REL``
    its absolute path), so ``report`` reads the split again from any working folder; items that
    moved leave the page without their images, with a note."""
    _, run, pngs = work
    photos = tmp_path / "photos"
    for c, png in enumerate(pngs):
        (photos / f"c{c % 2}").mkdir(parents=True, exist_ok=True)
        shutil.copy(png, photos / f"c{c % 2}" / png.name)
    out = tmp_path / "emb"
    argv = ["embed", str(run), "--items", str(photos), "--split", "all", "--out", str(out)]
    assert main(argv) == 0
    identity = ModelIdentity.beside(out / "embeddings.npy")
    assert (identity.data, identity.split) == (f"folder:{photos}", "all")
    partition = tmp_path / "p.npz"
    argv = ["cluster", str(out / "embeddings.npy"), "--n-clusters", "2"]
    assert main([*argv, "--out", str(tmp_path / "c.npy"), "--save", str(partition)]) == 0
    page = tmp_path / "page.html"
    report = ["report", str(partition), "--embeddings", str(out / "embeddings.npy")]
    assert main([*report, "--out", str(page)]) == 0
    with_images = page.read_text()
    shutil.move(photos, tmp_path / "moved")
    capsys.readouterr()
    assert main([*report, "--out", str(page), "--overwrite"]) == 0
    assert "shows no item images" in capsys.readouterr().out
    assert len(page.read_text()) < len(with_images)  # the same page, less its thumbnails


def test_saved_embeddings_are_searched_classified_and_assigned_by_their_files(work, tmp_path):  # noqa: F811
    folder, run, pngs = work
    emb = tmp_path / "emb"
    assert main(["embed", str(run), "--items", str(pngs[0].parent), "--out", str(emb)]) == 0
    saved, files = str(emb / "embeddings.npy"), np.load(emb / "ids.npy").tolist()
    gallery = str(folder / "gallery.npz")
    hits, labels, assigned = tmp_path / "hits.json", tmp_path / "labels.json", tmp_path / "a.json"
    assert main(["search", gallery, saved, "-k", "1", "--json", str(hits)]) == 0
    assert [q["query"] for q in json.loads(hits.read_text())["queries"]] == files
    assert main(["classify", gallery, saved, "--output", str(labels)]) == 0
    assert [item["id"] for item in json.loads(labels.read_text())["items"]] == files
    partition = tmp_path / "p.npz"
    argv = ["cluster", saved, "--n-clusters", "2", "--out", str(tmp_path / "c.npy")]
    assert main([*argv, "--save", str(partition)]) == 0
    assert main(["assign", str(partition), saved, "--json", str(assigned)]) == 0
    assert [item["id"] for item in json.loads(assigned.read_text())["items"]] == files


def test_saved_embeddings_added_to_a_gallery_of_files_keep_their_files(work, tmp_path):  # noqa: F811
    _, run, pngs = work
    first, rest = tmp_path / "first", tmp_path / "rest"
    assert main(["embed", str(run), "--items", *map(str, pngs[:3]), "--out", str(first)]) == 0
    assert main(["embed", str(run), "--items", *map(str, pngs[3:]), "--out", str(rest)]) == 0
    gallery = tmp_path / "g.npz"
    assert main(["index", str(first / "embeddings.npy"), "--out", str(gallery)]) == 0
    assert main(["index", str(gallery), "--add", str(rest / "embeddings.npy")]) == 0
    assert EmbeddingIndex.load(gallery).ids.tolist() == [os.path.abspath(p) for p in pngs]
    assert main(["index", str(gallery), "--remove", str(pngs[4])]) == 0  # by its file
    assert len(EmbeddingIndex.load(gallery)) == 4
