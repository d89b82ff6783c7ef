"""Inputs a new user gets wrong, refused in one line that names the file or flag, before any work:
labels of one class, a LABELS argument beside a run, a NaN row, a text file given as an array; and
what ``assign --max-distance auto`` says of items that are not held out."""

from __future__ import annotations

import numpy as np
import pytest
from test_cli_use import one_line_error, work  # noqa: F401  (tests/: the trained run)

from clusterable.cli import main


@pytest.fixture
def arrays(tmp_path):
    """Three separated blobs of 20 points each, their labels, and labels of one class."""
    rng = np.random.default_rng(0)
    centres = np.repeat(np.eye(3, 4) * 6, 20, axis=0)
    np.save(tmp_path / "emb.npy", centres + rng.normal(size=(60, 4)))
    np.save(tmp_path / "labels.npy", np.repeat(np.arange(3), 20))
    np.save(tmp_path / "one.npy", np.zeros(60, int))
    return tmp_path


def test_cluster_refuses_labels_of_one_class_before_clustering(arrays, capsys):
    out = arrays / "ids.npy"
    argv = ["cluster", str(arrays / "emb.npy"), "--labels", str(arrays / "one.npy")]
    err = one_line_error(capsys, [*argv, "--out", str(out)], "cluster")
    assert "--labels" in err and "one.npy" in err and "2 classes" in err
    assert not out.exists()  # refused before the clustering wrote its ids


def test_evaluate_names_the_labels_file_of_one_class(arrays, capsys):
    err = one_line_error(
        capsys, ["evaluate", str(arrays / "emb.npy"), str(arrays / "one.npy")], "evaluate"
    )
    assert "one.npy" in err and "evaluate_embeddings" not in err


def test_embed_refuses_labels_given_with_a_run(work, tmp_path, capsys):  # noqa: F811
    _, run, pngs = work
    out = tmp_path / "emb"
    err = one_line_error(
        capsys, ["embed", str(run), str(pngs[0].parent), "--out", str(out)], "embed"
    )
    assert "LABELS" in err and f"--items {pngs[0].parent}" in err
    assert not out.exists()


def test_cluster_names_the_file_of_a_nan_row(arrays, capsys):
    points = np.load(arrays / "emb.npy")
    points[3, 1] = np.nan
    np.save(arrays / "nan.npy", points)
    out = arrays / "ids.npy"
    argv = ["cluster", str(arrays / "nan.npy"), "--out", str(out)]
    err = one_line_error(capsys, argv, "cluster")
    assert "nan.npy" in err and "NaN" in err
    assert not out.exists()


def test_a_text_file_is_not_called_pickled_data(arrays, capsys):
    (arrays / "text.npy").write_text("1,2,3\n4,5,6\n")
    argv = ["evaluate", str(arrays / "text.npy"), str(arrays / "labels.npy")]
    err = one_line_error(capsys, argv, "evaluate")
    assert "text.npy" in err and "not a NumPy array file" in err
    assert "pickle" not in err


def test_assign_auto_on_the_fitted_items_notes_they_are_not_held_out(arrays, capsys):
    emb = arrays / "emb.npy"
    argv = ["cluster", str(emb), "--n-clusters", "3", "--out", str(arrays / "c.npy")]
    assert main([*argv, "--save", str(arrays / "part.npz")]) == 0
    capsys.readouterr()
    argv = ["assign", str(arrays / "part.npz"), str(emb), "--max-distance", "auto"]
    assert main([*argv, "--calibration", str(emb)]) == 0
    printed = capsys.readouterr().out
    assert "are not held out" in printed and "fitted on" in printed
