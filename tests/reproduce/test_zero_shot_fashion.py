"""``zero-shot-fashion`` in quick mode: the table's shape, values in range, files written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clusterable.cluster import spectral
from clusterable.evaluate import nmi

# Importing the module registers the experiment.
from clusterable.reproduce.zero_shot_fashion import METRICS, zero_shot_scores

ROWS = [
    "DSCL (d=5) with SC",
    "DSCL (d=5) without SC",
    "DSCL (d=64) with SC",
    "DSCL (d=64) without SC",
    "lifted",
    "contrastive",
    "triplet (semi-hard)",
    "cross-entropy with SC",
    "cross-entropy without SC",
]


@pytest.fixture(scope="module")
def quick_run(run_quick) -> tuple[Path, dict]:
    return run_quick("zero-shot-fashion")


def test_table_has_every_row_and_metric(quick_run: tuple[Path, dict]) -> None:
    _, result = quick_run
    assert result["metrics"] == METRICS
    assert [row["method"] for row in result["rows"]] == ROWS
    for row in result["rows"]:
        assert set(row["ours"]) == set(METRICS)


def test_values_are_fractions(quick_run: tuple[Path, dict]) -> None:
    _, result = quick_run
    for row in result["rows"]:
        assert all(0.0 <= v <= 1.0 for v in row["ours"].values()), row
        recalls = [row["ours"][f"recall@{k}"] for k in (1, 2, 4, 8)]
        assert recalls == sorted(recalls)  # Recall@K cannot fall as K grows


def test_claims_and_record(quick_run: tuple[Path, dict]) -> None:
    _, result = quick_run
    assert len(result["claims"]) == 4
    assert all(claim["holds"] in (True, False) for claim in result["claims"])
    assert result["record"]["seeds"] == [0]


def test_files_written(quick_run: tuple[Path, dict]) -> None:
    folder, result = quick_run
    markdown = (folder / "results.md").read_text()
    assert "| DSCL (d=5) with SC |" in markdown
    assert result["plots"]
    for name in result["plots"]:
        with Image.open(folder / name) as image:
            image.verify()


def test_spectral_scores_are_algorithm_2() -> None:
    # With SC, the partition is k-means on T, i.e. DSCL Algorithm 2 (cluster.spectral, rank k).
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 30)
    centres = rng.normal(size=(3, 8)) * 3.0
    embedding = centres[labels] + rng.normal(size=(90, 8))
    with_sc = zero_shot_scores(embedding, labels, spectral=True, seed=0)
    normalised = embedding / np.linalg.norm(embedding, axis=1, keepdims=True)
    expected = nmi(labels, spectral(normalised, 3, seed=0, rank=3))
    assert with_sc["nmi"] == pytest.approx(expected)
    without_sc = zero_shot_scores(embedding, labels, spectral=False, seed=0)
    assert set(with_sc) == set(without_sc) == set(METRICS)
