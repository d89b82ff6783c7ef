"""``index RUN --out FILE`` where FILE exists: refused before any work unless ``--overwrite``.

An index may hold items added later with ``index FILE --add``, which no run rebuilds; building
over it silently lost them.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from test_cli_use import one_line_error, work  # noqa: F401  (tests/: the trained run)

from clusterable.cli import main
from clusterable.index import EmbeddingIndex
from clusterable.trained_run import TrainedRun


def build(run, out, *flags: str) -> list[str]:
    """``clusterable index`` of the run's test split into ``out``."""
    return ["index", str(run), "--data", "digits", "--split", "test", "--out", str(out), *flags]


@pytest.fixture
def saved(work, tmp_path, capsys):  # noqa: F811
    """A copy of the module's gallery index with one item added, as a user keeps it, and its
    bytes."""
    folder, _, pngs = work
    path = tmp_path / "gallery.npz"
    shutil.copy(folder / "gallery.npz", path)
    assert main(["index", str(path), "--add", str(pngs[0]), "--label", "3"]) == 0
    assert f"added 1 item to {path} (id " in capsys.readouterr().out
    return path, path.read_bytes()


def test_an_existing_out_is_refused_before_any_work(saved, work, tmp_path, capsys, monkeypatch):  # noqa: F811
    path, before = saved
    _, run, _ = work

    def embedded(*args, **kwargs):
        raise AssertionError("the gallery was embedded before the refusal")

    monkeypatch.setattr(TrainedRun, "embed", embedded)
    for source in (tmp_path / "no-such-run", run):  # refused before the run is even read
        err = one_line_error(capsys, build(source, path), "index")
        assert f"--out {path} already exists" in err
        assert "--overwrite" in err and "--add" in err and "another --out" in err
        assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gallery.npz"]


def test_overwrite_replaces_an_existing_index(saved, work, capsys):  # noqa: F811
    path, before = saved
    _, run, _ = work
    added = len(EmbeddingIndex.load(path))
    assert main(build(run, path, "--overwrite")) == 0
    assert f"wrote {path}" in capsys.readouterr().out
    rebuilt = EmbeddingIndex.load(path)
    test = TrainedRun.load(run).embed("digits", split="test")
    np.testing.assert_array_equal(rebuilt.vectors, test.embeddings)
    assert len(rebuilt) == len(test.ids) != added and path.read_bytes() != before
    assert sorted(p.name for p in path.parent.iterdir()) == ["gallery.npz"]  # no temporary left


def test_a_new_out_is_written_with_or_without_overwrite(work, tmp_path):  # noqa: F811
    _, run, _ = work
    for name, flags in (("new.npz", ()), ("also-new.npz", ("--overwrite",))):
        assert main(build(run, tmp_path / name, *flags)) == 0
        assert len(EmbeddingIndex.load(tmp_path / name)) == 539  # the digits test split


def test_overwrite_is_refused_when_changing_an_index(saved, capsys):
    path, before = saved
    for change in (["--add", str(path.parent / "x.png"), "--label", "3"], ["--remove", "4"]):
        err = one_line_error(capsys, ["index", str(path), *change, "--overwrite"], "index")
        assert "--overwrite replaces --out when building an index" in err
        assert f"change {path} in place" in err
    assert path.read_bytes() == before


def test_an_interrupted_overwrite_leaves_the_old_index(saved, work, monkeypatch):  # noqa: F811
    """The old file is replaced only once the new one is whole (`clusterable._atomic`)."""
    path, before = saved
    _, run, _ = work

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    assert main(build(run, path, "--overwrite")) == 130  # Ctrl-C: one line, exit 130
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["gallery.npz"]
