"""``clusterable index EMB.npy --out G.npz``: a gallery embedded once by ``embed`` is indexed
from what embed wrote beside it (ids, labels, the model), without embedding it again, and then
searched like a gallery a run embedded."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
from test_cli_use import one_line_error, work  # noqa: F401  (tests/: the trained run)

from clusterable.cli import main
from clusterable.index import EmbeddingIndex
from clusterable.trained_run import MODEL_IDENTITY, TrainedRun


def test_an_embed_folder_is_indexed_as_embed_wrote_it(work, tmp_path, capsys):  # noqa: F811
    _, run, pngs = work
    emb = tmp_path / "emb"
    assert main(["embed", str(run), "--split", "test", "--out", str(emb)]) == 0
    gallery = tmp_path / "g.npz"
    assert main(["index", str(emb / "embeddings.npy"), "--out", str(gallery)]) == 0
    index = EmbeddingIndex.load(gallery)
    np.testing.assert_array_equal(index.vectors, np.load(emb / "embeddings.npy"))
    # The same index as the run builds of the same split: ids, class names, model.
    built = tmp_path / "built.npz"
    argv = ["index", str(run), "--data", "digits", "--split", "test", "--out", str(built)]
    assert main(argv) == 0
    from_run = EmbeddingIndex.load(built)
    np.testing.assert_array_equal(index.vectors, from_run.vectors)
    assert index.ids.tolist() == from_run.ids.tolist() == np.load(emb / "ids.npy").tolist()
    assert index.labels.tolist() == from_run.labels.tolist()
    trained = TrainedRun.load(run)
    assert (index.model, index.run) == (trained.model_id, str(trained.folder))
    assert (from_run.model, from_run.run) == (index.model, index.run)
    # The seam: queries embedded by the index's run, found among the saved gallery.
    hits = tmp_path / "hits.json"
    assert main(["search", str(gallery), str(pngs[0]), "-k", "1", "--json", str(hits)]) == 0
    (nearest,) = json.loads(hits.read_text())["queries"][0]["neighbours"]
    assert nearest["id"] == 0  # q0.png is test item 0, saved as an 8-bit image
    assert nearest["label"] == str(np.load(emb / "labels.npy")[0])  # digits' names: "0".."9"


def test_unlabelled_items_of_a_flat_folder_and_an_unknown_model(work, tmp_path, capsys):  # noqa: F811
    _, run, pngs = work
    emb = tmp_path / "emb"
    assert main(["embed", str(run), "--items", str(pngs[0].parent), "--out", str(emb)]) == 0
    gallery = tmp_path / "g.npz"
    assert main(["index", str(emb / "embeddings.npy"), "--out", str(gallery)]) == 0
    index = EmbeddingIndex.load(gallery)
    assert index.labels is None  # every label -1: an unlabelled gallery
    assert not (emb / "class_names.npy").exists()  # a flat folder's items name no class
    assert index.ids.tolist() == [os.path.abspath(p) for p in sorted(pngs)]
    (emb / MODEL_IDENTITY).unlink()
    capsys.readouterr()
    argv = ["index", str(emb / "embeddings.npy"), "--out", str(gallery), "--overwrite"]
    assert main(argv) == 0
    assert "does not say which model embedded it" in capsys.readouterr().out
    assert EmbeddingIndex.load(gallery).model is None


def test_saved_embeddings_refuse_the_flags_that_pick_a_run_s_items(work, tmp_path, capsys):  # noqa: F811
    _, run, _ = work
    emb = tmp_path / "emb"
    assert main(["embed", str(run), "--out", str(emb)]) == 0
    gallery = tmp_path / "g.npz"
    for flags in (["--data", "digits"], ["--split", "train"]):
        argv = ["index", str(emb / "embeddings.npy"), *flags, "--out", str(gallery)]
        err = one_line_error(capsys, argv, "index")
        assert "holds embeddings already" in err and flags[0] in err
    assert not gallery.exists()


def test_class_folders_name_the_labels_of_the_saved_gallery(work, tmp_path):  # noqa: F811
    _, run, pngs = work
    photos = tmp_path / "photos"
    for i, png in enumerate(pngs):
        folder = photos / ("cats" if i < 2 else "dogs")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / png.name).write_bytes(png.read_bytes())
    emb = tmp_path / "emb"
    assert main(["embed", str(run), "--items", str(photos), "--out", str(emb)]) == 0
    gallery = tmp_path / "g.npz"
    assert main(["index", str(emb / "embeddings.npy"), "--out", str(gallery)]) == 0
    assert EmbeddingIndex.load(gallery).labels.tolist() == ["cats"] * 2 + ["dogs"] * 3
    # Saved arrays embedded again have no class names: the old file is removed with them.
    earlier = tmp_path / "earlier"
    shutil.copytree(emb, earlier)
    again = ["embed", str(emb / "embeddings.npy"), str(emb / "labels.npy")]
    assert main([*again, "--out", str(earlier), "--overwrite"]) == 0
    assert not (earlier / "class_names.npy").exists()


def test_added_saved_embeddings_bring_the_labels_beside_them(work, tmp_path):  # noqa: F811
    """``index G.npz --add EMB/embeddings.npy`` of a labelled gallery labels the new items with
    the labels embed saved beside them, named as the gallery names its own; ``--label`` still
    gives one label to all."""
    _, run, _ = work
    emb = tmp_path / "emb"
    assert main(["embed", str(run), "--split", "test", "--out", str(emb)]) == 0
    gallery = tmp_path / "g.npz"
    assert main(["index", str(emb / "embeddings.npy"), "--out", str(gallery)]) == 0
    held = EmbeddingIndex.load(gallery).labels.tolist()
    assert main(["index", str(gallery), "--add", str(emb / "embeddings.npy")]) == 0
    assert EmbeddingIndex.load(gallery).labels.tolist() == held + held  # names, as the gallery's
    argv = ["index", str(gallery), "--add", str(emb / "embeddings.npy"), "--label", "7"]
    assert main(argv) == 0
    assert EmbeddingIndex.load(gallery).labels.tolist() == held + held + ["7"] * len(held)
