"""Decisions with a trained model on the command line: ``classify``, ``search --max-distance``,
``assign --max-distance D|auto`` (open set: "none of these") and ``index --add/--remove``."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest
from test_cli_use import one_line_error, train, work  # noqa: F401  (tests/: the trained run)

from clusterable.cli import main
from clusterable.index import EmbeddingIndex
from clusterable.trained_run import TrainedRun


def sklearn_knn(index: EmbeddingIndex, queries: np.ndarray, k: int, weights: str) -> tuple:
    from sklearn.neighbors import KNeighborsClassifier

    model = KNeighborsClassifier(n_neighbors=k, weights=weights, algorithm="brute")
    model.fit(index.vectors.astype(np.float64), index.labels)
    q = queries.astype(np.float64)
    return model.predict(q), model.predict_proba(q).max(axis=1)


def blobs(n_per_class: int, classes: int, seed: int, dim: int = 8) -> tuple:
    """Well-separated Gaussian classes: ``(n, dim)`` float32 points and their labels."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(scale=8.0, size=(classes, dim))
    labels = np.repeat(np.arange(classes), n_per_class)
    points = centres[labels] + rng.normal(size=(len(labels), dim))
    return points.astype(np.float32), labels


# --- classify ----------------------------------------------------------------------------------


@pytest.mark.parametrize("weighting", ["uniform", "distance"])
def test_classify_images_equals_scikit_learns_knn(work, tmp_path, capsys, weighting):  # noqa: F811
    folder, run, pngs = work
    out = tmp_path / "labels.json"
    gallery = str(folder / "gallery.npz")
    argv = ["classify", gallery, *map(str, pngs), "-k", "5", "--weighting", weighting]
    assert main([*argv, "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    index = EmbeddingIndex.load(gallery)
    queries = TrainedRun.load(run).embed([str(p) for p in pngs]).embeddings
    want_labels, want_conf = sklearn_knn(index, queries, 5, weighting)
    written = json.loads(out.read_text())
    assert [item["id"] for item in written["items"]] == [str(p) for p in pngs]
    assert [item["label"] for item in written["items"]] == want_labels.tolist()
    np.testing.assert_allclose([i["confidence"] for i in written["items"]], want_conf, rtol=1e-5)
    assert (written["k"], written["weighting"], written["max_distance"]) == (5, weighting, None)
    assert f"{pngs[0]}  {want_labels[0]}  {want_conf[0]:.3f}" in printed


def test_classify_saved_embeddings_by_class_mean_and_within_a_distance(tmp_path, capsys):
    gallery, labels = blobs(30, 4, seed=0)
    names = np.array(["ant", "bee", "cat", "dog"])[labels]
    EmbeddingIndex.build(gallery, labels=names).save(tmp_path / "g.npz")
    queries, _ = blobs(5, 4, seed=1)
    far = queries[:3] + 1000.0  # far from every class
    np.save(tmp_path / "q.npy", np.concatenate([queries, far]))
    argv = ["classify", str(tmp_path / "g.npz"), str(tmp_path / "q.npy"), "--method", "class-mean"]
    assert main([*argv, "--max-distance", "10", "--output", str(tmp_path / "out.csv")]) == 0
    rows = list(csv.DictReader((tmp_path / "out.csv").open()))
    want = EmbeddingIndex.load(tmp_path / "g.npz").classify(queries, method="class-mean")
    assert [r["label"] for r in rows] == [*want.labels.tolist(), "", "", ""]  # "": none of these
    assert [float(r["confidence"]) for r in rows][-3:] == [0.0, 0.0, 0.0]
    printed = capsys.readouterr().out
    assert "note: " in printed and "none: 3" in printed and "22  none  0.000" in printed
    # Without --max-distance every item gets a class.
    assert main(argv[:3] + ["-k", "3"]) == 0
    assert "none" not in capsys.readouterr().out


def test_classify_from_a_run_folder_uses_its_training_split(work, tmp_path, capsys):  # noqa: F811
    folder, run, pngs = work
    assert main(["classify", str(run), str(pngs[0]), "-k", "3"]) == 0
    by_run = capsys.readouterr().out.splitlines()
    assert main(["classify", str(folder / "gallery.npz"), str(pngs[0]), "-k", "3"]) == 0
    by_index = capsys.readouterr().out.splitlines()
    assert by_run[0].startswith("gallery: ") and by_run[1] == by_index[0]


def test_classify_refuses_what_it_cannot_decide(work, tmp_path, capsys):  # noqa: F811
    folder, run, pngs = work
    gallery = str(folder / "gallery.npz")
    EmbeddingIndex.build(np.eye(3)).save(tmp_path / "unlabelled.npz")
    np.save(tmp_path / "q.npy", np.eye(3))
    err = one_line_error(
        capsys, ["classify", str(tmp_path / "unlabelled.npz"), str(tmp_path / "q.npy")], "classify"
    )
    assert "holds no labels" in err
    assert main(["embed", str(run), "--split", "test", "--out", str(tmp_path / "emb")]) == 0
    (tmp_path / "emb" / "model.json").write_text(json.dumps({"model": "0" * 64, "run": "x"}))
    err = one_line_error(
        capsys, ["classify", gallery, str(tmp_path / "emb" / "embeddings.npy")], "classify"
    )
    assert "embedded by another model" in err
    # From a run folder: refused before its gallery is embedded (the audit saw it embedded first).
    with pytest.raises(SystemExit):
        main(["classify", str(run), str(tmp_path / "emb" / "embeddings.npy")])
    said = capsys.readouterr()
    assert "embedded by another model" in said.err and "gallery:" not in said.out
    other = train(tmp_path / "other", seed=1)
    err = one_line_error(
        capsys, ["classify", gallery, str(pngs[0]), "--run", str(other)], "classify"
    )
    assert "another model" in err
    for flags, named in (
        (["-k", "0"], "argument -k/--k: '0'"),
        (["--max-distance", "-1"], "argument --max-distance: '-1' is not a distance"),
        (["--max-distance", "auto"], "argument --max-distance: 'auto' is not a distance"),
        (["--output", str(tmp_path / "labels.txt")], "--output"),
    ):
        err = one_line_error(capsys, ["classify", gallery, str(pngs[0]), *flags], "classify")
        assert named in err
    assert "embedding" not in capsys.readouterr().out


# --- search --max-distance ---------------------------------------------------------------------


def test_search_max_distance_keeps_the_neighbours_within_it(work, tmp_path, capsys):  # noqa: F811
    folder, run, pngs = work
    gallery = str(folder / "gallery.npz")
    index = EmbeddingIndex.load(gallery)
    queries = TrainedRun.load(run).embed([str(p) for p in pngs]).embeddings
    distances, rows, _ = index.search(queries, 5)
    limit = float(np.median(distances))
    out = tmp_path / "hits.json"
    argv = ["search", gallery, *map(str, pngs), "-k", "5", "--max-distance", repr(limit)]
    assert main([*argv, "--json", str(out)]) == 0
    hits = json.loads(out.read_text())
    assert hits["max_distance"] == limit
    for q, result in enumerate(hits["queries"]):
        within = distances[q] <= limit
        assert [n["id"] for n in result["neighbours"]] == rows[q][within].tolist()
    capsys.readouterr()
    assert main(["search", gallery, str(pngs[0]), "--max-distance", "0"]) == 0
    assert "no gallery item within 0" in capsys.readouterr().out


# --- assign --max-distance: the open set -------------------------------------------------------


@pytest.fixture(scope="module")
def open_set(tmp_path_factory):
    """Blobs of five classes: four clustered (k-means, saved), held-out items of those four to
    calibrate on (as `embed` writes them), and new items of all five (class 4 never seen)."""
    folder = tmp_path_factory.mktemp("open-set")
    fitted, _ = blobs(60, 4, seed=0)
    np.save(folder / "fitted.npy", fitted)
    calibration, calibration_labels = blobs(30, 4, seed=1)
    (folder / "cal").mkdir()
    np.save(folder / "cal" / "embeddings.npy", calibration)
    np.save(folder / "cal" / "labels.npy", calibration_labels)
    new, new_labels = blobs(40, 5, seed=2)
    np.save(folder / "new.npy", new)
    argv = ["cluster", str(folder / "fitted.npy"), "--n-clusters", "4"]
    assert main([*argv, "--out", str(folder / "c.npy"), "--save", str(folder / "p.npz")]) == 0
    return folder, new_labels


@pytest.mark.parametrize("criterion", [None, "f1", "fmr=0.01"])
def test_assign_auto_sends_an_unseen_class_to_none(open_set, capsys, criterion):
    folder, new_labels = open_set
    part, new = str(folder / "p.npz"), str(folder / "new.npy")
    assert main(["assign", part, new, "--json", str(folder / "plain.json"), "--overwrite"]) == 0
    auto = ["--max-distance", "auto", "--calibration", str(folder / "cal" / "embeddings.npy")]
    if criterion:
        auto += ["--threshold-criterion", criterion]
    capsys.readouterr()
    assert (
        main(["assign", part, new, *auto, "--json", str(folder / "auto.json"), "--overwrite"]) == 0
    )
    printed = capsys.readouterr().out
    plain = np.array(
        [i["cluster"] for i in json.loads((folder / "plain.json").read_text())["items"]]
    )
    result = json.loads((folder / "auto.json").read_text())
    clusters = np.array([item["cluster"] for item in result["items"]])
    unseen = new_labels == 4
    assert (clusters[unseen] == -1).mean() >= 0.9  # most of the unseen class: none of these
    assert (clusters[~unseen] == plain[~unseen]).mean() >= 0.95  # the others keep their clusters
    named = {None: "balanced_accuracy", "f1": "f1", "fmr=0.01": "fmr<=0.01"}[criterion]
    assert f"--max-distance auto: {result['max_distance']:g}, the best {named}" in printed
    assert f" farther than {result['max_distance']:g}: none of these" in printed  # the same D
    assert "on 120 held-out items of " in printed


def test_assign_with_a_distance_and_by_a_runs_validation_split(work, tmp_path, capsys):  # noqa: F811
    _, run, pngs = work
    part = tmp_path / "part.npz"
    argv = ["cluster", str(run), "--n-clusters", "10", "--out", str(tmp_path / "c.npy")]
    assert main([*argv, "--save", str(part)]) == 0
    capsys.readouterr()
    assert main(["assign", str(part), str(run), str(pngs[0].parent), "--max-distance", "0"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("  none") == 5 and "5 farther than 0: none of these (-1)" in printed
    argv = ["assign", str(part), str(run), str(pngs[0].parent), "--max-distance", "auto"]
    assert main([*argv, "--json", str(tmp_path / "a.json")]) == 0
    printed = capsys.readouterr().out
    assert "held-out items of the run's validation split" in printed
    assert json.loads((tmp_path / "a.json").read_text())["max_distance"] > 0
    assert main([*argv, "--calibration", "test"]) == 0  # the very items clustered: not held out
    printed = capsys.readouterr().out
    assert "on 539 items of the run's test split" in printed and "not held out" in printed
    other = train(tmp_path / "other", seed=1)
    assert main(["embed", str(other), "--split", "test", "--out", str(tmp_path / "emb")]) == 0
    err = one_line_error(
        capsys, [*argv, "--calibration", str(tmp_path / "emb" / "embeddings.npy")], "assign"
    )
    assert "--calibration" in err and "embedded by another model" in err


def test_assign_auto_notes_a_calibration_on_items_the_partition_clustered(work, tmp_path, capsys):  # noqa: F811
    """The run's validation items are in its train split: calibrated on them by default, the
    distance of a partition of the train split is noted as not held out (it was called held
    out), as the whole train split was; the test split is held out, without a note."""
    _, run, pngs = work
    part = tmp_path / "part.npz"
    argv = ["cluster", str(run), "--split", "train", "--n-clusters", "10"]
    assert main([*argv, "--out", str(tmp_path / "c.npy"), "--save", str(part)]) == 0
    argv = ["assign", str(part), str(run), str(pngs[0].parent), "--max-distance", "auto"]
    capsys.readouterr()
    assert main(argv) == 0
    printed = capsys.readouterr().out
    validation = len(TrainedRun.load(run).validation_split())
    assert f"on {validation} items of the run's validation split" in printed
    (note,) = [line for line in printed.splitlines() if line.startswith("note:")]
    assert f"{validation} of these {validation} items are not held out" in note
    assert "give --calibration" in note
    assert main([*argv, "--calibration", "test"]) == 0
    printed = capsys.readouterr().out
    assert "held-out items of the run's test split" in printed and "note:" not in printed


def test_assign_refuses_bad_threshold_flags(open_set, capsys):
    folder, _ = open_set
    part, new = str(folder / "p.npz"), str(folder / "new.npy")
    for flags, named in (
        (["--max-distance", "-1"], "argument --max-distance: '-1' is not a distance"),
        (["--max-distance", "near"], "give a number of 0 or more, or auto"),
        (["--threshold-criterion", "recall"], "argument --threshold-criterion: 'recall'"),
        (["--threshold-criterion", "fmr=2"], "argument --threshold-criterion: 'fmr=2'"),
        (["--threshold-criterion", "f1"], "--threshold-criterion serves --max-distance auto"),
        (["--calibration", "x.npy"], "--calibration serves --max-distance auto"),
        (["--max-distance", "auto"], "--max-distance auto needs held-out labelled items"),
    ):
        assert named in one_line_error(capsys, ["assign", part, new, *flags], "assign")


# --- index --add / --remove --------------------------------------------------------------------


def test_index_add_and_remove_change_the_saved_index_in_place(work, tmp_path, capsys):  # noqa: F811
    folder, run, pngs = work
    path = tmp_path / "gallery.npz"
    shutil.copy(folder / "gallery.npz", path)
    before = EmbeddingIndex.load(path)
    assert main(["index", str(path), "--remove", "0", "7"]) == 0
    after = EmbeddingIndex.load(path)  # its checksums were written again
    assert len(after) == len(before) - 2 and not np.isin([0, 7], after.ids).any()
    assert (after.model, after.run) == (before.model, before.run)
    assert main(["index", str(path), "--add", *map(str, pngs[:2]), "--label", "3"]) == 0
    grown = EmbeddingIndex.load(path)
    new_ids = grown.ids[-2:].tolist()
    assert new_ids == [int(before.ids.max()) + 1, int(before.ids.max()) + 2]
    embedded = TrainedRun.load(run).embed([str(p) for p in pngs[:2]]).embeddings
    np.testing.assert_array_equal(grown.vectors[-2:], embedded)
    assert grown.labels[-2:].tolist() == ["3", "3"] and grown.model == before.model
    printed = capsys.readouterr().out
    assert f"(ids {new_ids[0]} .. {new_ids[1]})" in printed


def test_index_changes_refused_leave_the_file_as_it_was(work, tmp_path, capsys, monkeypatch):  # noqa: F811
    folder, run, pngs = work
    path = tmp_path / "gallery.npz"
    shutil.copy(folder / "gallery.npz", path)
    original = path.read_bytes()
    other = train(tmp_path / "other", seed=1)
    for flags, named in (
        (["--add", str(pngs[0]), "--label", "3", "--run", str(other)], "another model"),
        (["--add", str(pngs[0])], "give the new items theirs with --label"),
        (["--remove", "100000"], "id 100000 is not in this index"),
        (["--remove", "4", "4"], "names id 4 twice"),
        (["--remove", "four"], "--remove four: this index's ids are whole numbers"),
        (["--remove", "4", "--out", str(tmp_path / "x.npz")], "--out builds a new index"),
        (["--add", str(pngs[0]), "--remove", "4"], "not allowed with argument"),
    ):
        assert named in one_line_error(capsys, ["index", str(path), *flags], "index")
    assert main(["embed", str(other), "--split", "test", "--out", str(tmp_path / "emb")]) == 0
    other_emb = str(tmp_path / "emb" / "embeddings.npy")
    err = one_line_error(capsys, ["index", str(path), "--add", other_emb, "--label", "1"], "index")
    assert "embedded by another model" in err
    err = one_line_error(capsys, ["index", str(run)], "index")
    assert "building an index needs --out" in err

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)  # the write fails half-way
    assert main(["index", str(path), "--remove", "4"]) == 130  # Ctrl-C: one line, exit 130
    assert path.read_bytes() == original and sorted(p.name for p in tmp_path.iterdir()) == [
        "emb",
        "gallery.npz",
        "other",
    ]


def test_index_add_to_a_gallery_of_named_items_checks_their_ids(tmp_path, capsys):
    gallery, labels = blobs(5, 2, seed=0)
    ids = [f"item{i}" for i in range(10)]
    EmbeddingIndex.build(gallery, ids=ids, labels=labels).save(tmp_path / "g.npz")
    np.save(tmp_path / "new.npy", gallery[:2] + 0.5)
    add = ["index", str(tmp_path / "g.npz"), "--add", str(tmp_path / "new.npy"), "--label", "1"]
    assert main(add) == 0
    index = EmbeddingIndex.load(tmp_path / "g.npz")
    assert index.ids[-2:].tolist() == [f"{tmp_path / 'new.npy'}:0", f"{tmp_path / 'new.npy'}:1"]
    assert index.labels[-2:].tolist() == [1, 1]
    assert "already in this index" in one_line_error(capsys, add, "index")
    assert main(["index", str(tmp_path / "g.npz"), "--remove", "item3"]) == 0
    assert "item3" not in EmbeddingIndex.load(tmp_path / "g.npz").ids


@pytest.mark.parametrize("verb", ["search", "classify"])
def test_k_is_also_spelled_as_a_long_flag(tmp_path, capsys, verb):
    gallery, labels = blobs(10, 3, seed=0)
    EmbeddingIndex.build(gallery, labels=labels).save(tmp_path / "g.npz")
    np.save(tmp_path / "q.npy", blobs(2, 3, seed=1)[0])
    argv = [verb, str(tmp_path / "g.npz"), str(tmp_path / "q.npy")]
    assert main([*argv, "-k", "4"]) == 0
    short = capsys.readouterr().out
    assert main([*argv, "--k", "4"]) == 0
    assert capsys.readouterr().out == short


# --- output files checked before the work -------------------------------------------------------


def test_an_output_that_is_a_folder_or_not_npy_is_refused_before_the_work(
    work,  # noqa: F811
    open_set,
    tmp_path,
    capsys,
):
    """The audit's finds: ``--json DIR`` failed after the whole table or search, naming a hidden
    temporary; ``--out x.txt`` wrote ``x.txt.npy`` and said "wrote x.txt". Each is now one line
    naming the flag, and nothing is embedded, searched or written."""
    folder, run, pngs = work
    part, new = str(open_set[0] / "p.npz"), str(open_set[0] / "new.npy")
    gallery, query = str(folder / "gallery.npz"), str(pngs[0])
    taken = tmp_path / "taken"
    taken.mkdir()
    for verb, argv, named in (
        ("search", [gallery, query, "--json", str(taken)], f"--json {taken} is a folder"),
        ("assign", [part, new, "--json", str(taken)], f"--json {taken} is a folder"),
        ("assign", [part, new, "--out", str(taken)], f"--out {taken}: cluster ids are written"),
        ("assign", [part, new, "--out", str(tmp_path / "y.txt")], "name one"),
        ("cluster", [new, "--n-clusters", "4", "--out", str(tmp_path / "y.txt")], "name one"),
        ("cluster", [new, "--n-clusters", "4", "--save", str(taken)], f"--save {taken} is a"),
        (
            "evaluate",
            [new, str(open_set[0] / "cal" / "labels.npy"), "--json", str(taken)],
            "--json",
        ),
        ("classify", [gallery, query, "--output", str(taken / "x.csv")], None),
        ("index", [str(run), "--data", "digits", "--out", str(taken)], f"--out {taken} is a"),
        ("export", [str(run), "--out", str(taken)], f"--out {taken} is a folder"),
        ("report", [str(run), "--out", str(taken)], f"--out {taken} is a folder"),
    ):
        if named is None:  # a file inside the folder is fine: it runs
            assert main([verb, *argv]) == 0
            capsys.readouterr()
            continue
        with pytest.raises(SystemExit) as stop:
            main([verb, *argv])
        said = capsys.readouterr()
        assert stop.value.code == 2 and said.err.startswith(f"clusterable {verb}: error:")
        assert named in said.err and said.err.count("\n") == 1, said.err
        assert not said.out  # refused before any work printed a line
    assert sorted(p.name for p in taken.iterdir()) == ["x.csv"]
    assert not (tmp_path / "y.txt").exists() and not (tmp_path / "y.txt.npy").exists()


def test_a_file_added_again_by_another_name_is_the_same_item(work, tmp_path, capsys, monkeypatch):  # noqa: F811
    """The audit added ``photos/c0/0.jpg`` to an index of ``folder:photos`` and got the file twice,
    once by its absolute path and once by the relative one."""
    _, run, pngs = work
    index = tmp_path / "photos.npz"
    assert main(["index", str(run), "--data", str(pngs[0].parent), "--out", str(index)]) == 0
    before = EmbeddingIndex.load(index).ids.tolist()
    assert str(pngs[0]) in before
    monkeypatch.chdir(pngs[0].parent.parent)
    relative = str(pngs[0].relative_to(pngs[0].parent.parent))
    err = one_line_error(capsys, ["index", str(index), "--add", relative], "index")
    assert "is already in this index" in err
    assert EmbeddingIndex.load(index).ids.tolist() == before


def test_remove_takes_a_file_by_any_name_and_a_folder(work, tmp_path, capsys, monkeypatch):  # noqa: F811
    """``--remove`` names files as ``--add`` does: a relative path is the item of its absolute
    id, and a folder removes every item in it (what ``--add FOLDER`` added)."""
    _, run, pngs = work
    index = tmp_path / "photos.npz"
    others = tmp_path / "others"
    others.mkdir()
    for png in pngs[:3]:
        shutil.copy(png, others / png.name)
    assert main(["index", str(run), "--data", str(pngs[0].parent), "--out", str(index)]) == 0
    assert main(["index", str(index), "--add", str(others)]) == 0
    monkeypatch.chdir(pngs[0].parent.parent)
    relative = str(pngs[0].relative_to(pngs[0].parent.parent))
    assert main(["index", str(index), "--remove", relative]) == 0
    ids = EmbeddingIndex.load(index).ids.tolist()
    assert str(pngs[0]) not in ids and len(ids) == len(pngs) - 1 + 3
    assert "removed 1 item from" in capsys.readouterr().out
    assert main(["index", str(index), "--remove", str(others)]) == 0
    assert EmbeddingIndex.load(index).ids.tolist() == [str(p) for p in pngs[1:]]
    err = one_line_error(capsys, ["index", str(index), "--remove", str(others)], "index")
    assert "no item of this index is in that folder" in err
