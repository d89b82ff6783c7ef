"""An error no check foresaw ends a verb in one line and exit status 1, its traceback written to
a file for a bug report (`clusterable.cli._crash`); ``CLUSTERABLE_TRACEBACK=1`` lets it through."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clusterable.cli import main
from clusterable.cli._crash import first_line


@pytest.fixture
def saved_embeddings(tmp_path: Path) -> list[str]:
    rng = np.random.default_rng(0)
    np.save(tmp_path / "e.npy", rng.normal(size=(30, 4)).astype(np.float32))
    np.save(tmp_path / "l.npy", np.arange(30) % 3)
    return [str(tmp_path / "e.npy"), str(tmp_path / "l.npy")]


def _failing_table(message: str, kind: type[Exception]):
    def fail(*args, **kwargs):
        raise kind(message)

    return fail


@pytest.mark.parametrize("kind", [RuntimeError, TypeError, KeyError, AssertionError])
def test_an_unforeseen_error_is_one_line_and_its_traceback_a_file(
    kind, saved_embeddings, tmp_path, capsys, monkeypatch
):
    import clusterable.recipe

    monkeypatch.delenv("CLUSTERABLE_TRACEBACK")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    message = "CUDA error: device-side assert triggered\nCUDA kernel errors might be reported"
    monkeypatch.setattr(clusterable.recipe, "score_test_table", _failing_table(message, kind))

    assert main(["evaluate", *saved_embeddings]) == 1

    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    [report] = tmp_path.glob("clusterable-evaluate-*.txt")
    said = str(kind(message)).splitlines()[0]
    assert err == (
        f"clusterable evaluate: internal error: {kind.__name__}: {said} (the traceback is in "
        f"{report}; please report it with that file)\n"
    )
    written = report.read_text()
    assert "command: " in written and "torch: " in written and "clusterable: " in written
    assert "Traceback (most recent call last)" in written and "in fail" in written


def test_the_traceback_is_shown_when_asked(saved_embeddings, monkeypatch):
    import clusterable.recipe

    monkeypatch.setenv("CLUSTERABLE_TRACEBACK", "1")
    failing = _failing_table("a bug", TypeError)
    monkeypatch.setattr(clusterable.recipe, "score_test_table", failing)
    with pytest.raises(TypeError, match="a bug"):
        main(["evaluate", *saved_embeddings])


def test_no_writable_temporary_folder_still_says_it_in_one_line(
    saved_embeddings, capsys, monkeypatch
):
    import clusterable.cli._crash
    import clusterable.recipe

    monkeypatch.delenv("CLUSTERABLE_TRACEBACK")
    monkeypatch.setattr(clusterable.cli._crash, "write_crash_report", lambda *_: None)
    failing = _failing_table("a bug", TypeError)
    monkeypatch.setattr(clusterable.recipe, "score_test_table", failing)
    assert main(["evaluate", *saved_embeddings]) == 1
    assert capsys.readouterr().err == (
        "clusterable evaluate: internal error: TypeError: a bug (set CLUSTERABLE_TRACEBACK=1 to "
        "see the traceback, and please report it)\n"
    )


def test_a_refused_input_is_still_status_2_without_a_crash_file(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CLUSTERABLE_TRACEBACK")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    with pytest.raises(SystemExit) as stop:
        main(["evaluate", str(tmp_path / "missing.npy")])
    assert stop.value.code == 2
    assert "internal error" not in capsys.readouterr().err
    assert not list(tmp_path.glob("clusterable-*.txt"))


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (RuntimeError("first\nsecond"), "RuntimeError: first"),
        (KeyError("lr"), "KeyError: 'lr'"),
        (AssertionError(), "AssertionError"),
        (ValueError("  \n  padded  \n"), "ValueError: padded"),
    ],
)
def test_first_line(error, said):
    assert first_line(error) == said
