"""tune --out resumes a folder only when it holds a search and nothing else, as train --out takes
an absent or empty folder unless told to resume: a user's own files are never mixed with a
search, and nothing in the folder is changed when it is refused."""

from __future__ import annotations

import hashlib

import pytest
from test_cli_use import one_line_error  # tests/: one line, exit 2, no traceback
from test_study import stored_trials

from clusterable.cli import main
from clusterable.tune import study

SEARCH = [
    *["tune", "--data", "digits", "--loss", "contrastive", "--embedding-dim", "8"],
    *["--epochs", "1", "--folds", "2", "--batch-size", "60", "--items-per-class", "6"],
    *["--param", "margin=log:0.1:2"],
]


def contents(folder):
    """Each entry of ``folder``: a file's hash, or "folder"."""
    return {
        p.name: "folder" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.iterdir()
    }


@pytest.mark.parametrize("extra", ["notes.txt", "mine/"], ids=["a-file", "a-folder"])
def test_a_search_beside_other_files_is_refused_and_left_as_it_is(
    extra, tmp_path, capsys, monkeypatch
):
    """The audit: a study folder holding a user's notes was resumed, and the search's files
    written among them."""
    monkeypatch.setattr(study, "_fold_score", lambda *a, **k: 0.5)
    out = tmp_path / "study"
    argv = [*SEARCH, "--out", str(out)]
    assert main([*argv, "--trials", "1"]) == 0
    if extra.endswith("/"):
        (out / extra).mkdir()
    else:
        (out / extra).write_text("my notes")
    held = contents(out)
    capsys.readouterr()
    err = one_line_error(capsys, [*argv, "--trials", "2"], "tune")
    assert f"--out {out} holds a search of `clusterable tune` and files a search never" in err
    assert extra in err and "move them out" in err and "new or empty folder" in err, err
    assert contents(out) == held
    assert len(stored_trials(out)) == 1
    assert "searching" not in capsys.readouterr().out


def test_a_search_alone_resumes_with_the_files_it_wrote(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(study, "_fold_score", lambda *a, **k: 0.5)
    out = tmp_path / "study"
    argv = [*SEARCH, "--out", str(out)]
    assert main([*argv, "--trials", "1"]) == 0
    assert {p.name for p in out.iterdir()} <= study.SEARCH_FILES
    assert main([*argv, "--trials", "2"]) == 0
    assert "resuming the search" in capsys.readouterr().out
    assert len(stored_trials(out)) == 2
