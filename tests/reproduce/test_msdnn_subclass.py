"""``msdnn-subclass`` in quick mode: the table's shape, values in range, files written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

# Importing the module registers the experiment.
from clusterable.reproduce.msdnn_subclass import PAPER, best_knn_accuracy

METHODS = ["MsDNN", "MsDNN-AE", "SNN", "triplet", "contrastive", "lifted", "cross-entropy"]
METRICS = ["nmi", "accuracy", "knn_accuracy"]


@pytest.fixture(scope="module")
def quick_run(run_quick) -> tuple[Path, dict]:
    return run_quick("msdnn-subclass")


def test_table_has_every_method_and_metric(quick_run: tuple[Path, dict]) -> None:
    _, result = quick_run
    assert result["metrics"] == METRICS
    assert [row["method"] for row in result["rows"]] == METHODS
    for row in result["rows"]:
        assert set(row["ours"]) == set(METRICS)
        assert row["paper"] == PAPER[row["method"]]


def test_values_are_fractions(quick_run: tuple[Path, dict]) -> None:
    _, result = quick_run
    values = [v for row in result["rows"] for v in (*row["ours"].values(), *row["paper"].values())]
    assert all(0.0 <= v <= 1.0 for v in values)
    # Two coarse classes: a k-NN classifier is at least as good as chance on balanced data.
    assert all(row["ours"]["knn_accuracy"] >= 0.5 for row in result["rows"])


def test_claims_and_record(quick_run: tuple[Path, dict]) -> None:
    _, result = quick_run
    assert len(result["claims"]) == 3
    assert all(claim["holds"] in (True, False) for claim in result["claims"])
    assert result["record"]["seeds"] == [0]
    assert result["record"]["mode"] == "quick"
    # The chosen sigma and temperature are named in the rows.
    notes = {row["method"]: row["note"] for row in result["rows"]}
    assert notes["MsDNN"].startswith("sigma=") and notes["SNN"].startswith("temperature=")
    assert "lambda=" in notes["MsDNN-AE"]


def test_files_written(quick_run: tuple[Path, dict]) -> None:
    folder, result = quick_run
    markdown = (folder / "results.md").read_text()
    assert "| MsDNN (sigma=" in markdown and "nmi (paper)" in markdown
    assert result["plots"]
    for name in result["plots"]:
        with Image.open(folder / name) as image:
            image.verify()
        assert f"]({name})" in markdown


def test_best_knn_accuracy_takes_the_best_k() -> None:
    # Query 0.4 sits next to one item of class 1 but has class-0 items just further out: k = 1
    # gets it wrong and k = 3 right, so the best of k in 1, 3, 5, 7 is right.
    reference = np.array([[0.0], [0.1], [0.2], [0.3], [0.45], [5.0], [5.1], [5.2]])
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    assert best_knn_accuracy(reference, labels, np.array([[0.4]]), np.array([0])) == 1.0
