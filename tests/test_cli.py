"""The command line end to end: exit codes, files written, one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterable.cli import main


@pytest.fixture
def saved_embeddings(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 10)
    embeddings = rng.normal(size=(40, 5)) + 6.0 * np.eye(5)[labels]
    np.save(tmp_path / "emb.npy", embeddings)
    np.save(tmp_path / "labels.npy", labels)
    return tmp_path


def test_evaluate_prints_and_writes_the_table(saved_embeddings, capsys):
    out = saved_embeddings / "table.json"
    code = main(
        [
            "evaluate",
            str(saved_embeddings / "emb.npy"),
            str(saved_embeddings / "labels.npy"),
            "--json",
            str(out),
        ]
    )
    assert code == 0
    table = json.loads(out.read_text())
    assert table["recall@1"] == pytest.approx(1.0)
    assert table["nmi"] == pytest.approx(1.0)
    assert "recall@8" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.npy", "does not exist"),
        (lambda d: (d / "text.npy").write_text("hello") and d / "text.npy", "is not a NumPy array"),
    ],
    ids=["missing", "not-an-array"],
)
def test_evaluate_bad_files_exit_with_one_line(saved_embeddings, capsys, make, message):
    path = make(saved_embeddings)
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", str(path), str(saved_embeddings / "labels.npy")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_evaluate_shape_mismatch_is_a_one_line_error(saved_embeddings, capsys):
    np.save(saved_embeddings / "short.npy", np.zeros(39, dtype=int))
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", str(saved_embeddings / "emb.npy"), str(saved_embeddings / "short.npy")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "39" in err and "40" in err and "Traceback" not in err


def test_demo_quick_writes_its_report(tmp_path, capsys):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "results.json").read_text())
    from clusterable.losses import available_losses

    assert set(report["results"]) == {"raw pixels", *available_losses()}
    for row in report["results"].values():
        assert all(0.0 <= row[c] <= 1.0 for c in ("recall@1", "map@r", "nmi", "f1"))
    assert "| lifted |" in (tmp_path / "results.md").read_text()
    assert "wrote" in capsys.readouterr().out
