"""``budget-curves``: a gap per budget per claim, the plot, the budgets named; gaps are A - B."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clusterable.data import load_dataset

# Importing the module registers the experiment.
from clusterable.reproduce import budget_curves
from clusterable.reproduce.budget_curves import COMPARISONS, PLOT, SCORES, _scale
from clusterable.reproduce.experiment import Budget, run_experiment

QUICK_POINTS = _scale(Budget(mode="quick")).points


@pytest.fixture(scope="module")
def quick_run(run_quick) -> tuple[Path, dict]:
    return run_quick("budget-curves")


def test_a_gap_per_budget_per_claim(quick_run: tuple[Path, dict]) -> None:
    folder, result = quick_run
    assert len(QUICK_POINTS) == 2
    expected = [f"{c.name}, {p.label}" for c in COMPARISONS for p in QUICK_POINTS]
    assert [row["method"] for row in result["rows"]] == expected
    by_name = {row["method"]: row for row in result["rows"]}
    for comparison in COMPARISONS:
        for point in QUICK_POINTS:
            gap = by_name[f"{comparison.name}, {point.label}"]["ours"]
            assert set(gap) == set(comparison.metrics)
            assert all(-1.0 <= v <= 1.0 for v in gap.values())
    raw = json.loads((folder / SCORES).read_text())
    assert raw["seeds"] == result["record"]["seeds"] == [0]
    for comparison in COMPARISONS:
        assert len(raw["gaps"][comparison.name]) == len(QUICK_POINTS)  # one list per budget
        assert all(len(per_seed) == 1 for per_seed in raw["gaps"][comparison.name])


#: Each claim as its text puts it: (row name, A, B, metrics, whether A must be strictly above).
CLAIMED = [
    ("lifted - triplet", "lifted", "triplet (semi-hard)", ("nmi", "recall@1"), False),
    ("lifted - contrastive", "lifted", "contrastive", ("nmi", "recall@1"), False),
    (
        "DSCL (d=5): with SC - without SC",
        "DSCL (d=5) with SC",
        "DSCL (d=5) without SC",
        ("nmi", "recall@1"),
        False,
    ),
    (
        "DSCL (d=64): with SC - without SC",
        "DSCL (d=64) with SC",
        "DSCL (d=64) without SC",
        ("nmi", "recall@1"),
        False,
    ),
    ("MsDNN-AE - MsDNN", "MsDNN-AE", "MsDNN", ("nmi", "accuracy"), True),  # "above"
]


def test_claims_are_judged_at_the_largest_budget(quick_run, assert_verdicts) -> None:
    """Each verdict from the raw per-seed scores of ``scores.json`` at the largest budget: the
    mean over seeds of A - B at least 0 on every metric (above 0 where the claim says "above")."""
    folder, result = quick_run
    largest = json.loads((folder / SCORES).read_text())["scores"][-1]  # per seed: method -> scores
    rows = {row["method"]: row["ours"] for row in result["rows"]}
    expected = []
    for name, a, b, metrics, strict in CLAIMED:
        gaps = {m: float(np.mean([seed[a][m] - seed[b][m] for seed in largest])) for m in metrics}
        assert rows[f"{name}, {QUICK_POINTS[-1].label}"] == pytest.approx(gaps)
        expected.append(all(g > 0 if strict else g >= 0 for g in gaps.values()))
    assert_verdicts(folder, expected)


def test_plot_written_and_linked(quick_run: tuple[Path, dict]) -> None:
    folder, result = quick_run
    assert result["plots"] == [PLOT]
    with Image.open(folder / PLOT) as image:
        image.verify()
    assert f"]({PLOT})" in (folder / "results.md").read_text()


def test_report_names_the_budgets(quick_run: tuple[Path, dict]) -> None:
    folder, result = quick_run
    for point in QUICK_POINTS:
        assert f"{point.epochs} epochs on {point.train_items:,} training images" in result["setup"]
    markdown = (folder / "results.md").read_text()
    assert all(point.label in markdown for point in QUICK_POINTS)
    assert result["budget"].startswith("quick budget:")
    assert all(point.label in result["budget"] for point in QUICK_POINTS)
    assert "Claims judged at the quick budget" in markdown
    assert len(result["claims"]) == len(COMPARISONS)
    for claim in result["claims"]:
        assert QUICK_POINTS[-1].label in claim["text"]  # judged at the largest budget
        assert all(point.label in claim["evidence"] for point in QUICK_POINTS)


#: What the fake training below returns, by method: a distinct constant per method.
FAKE_SCORE = {
    ("lifted", False): 0.50,
    ("triplet", False): 0.20,
    ("contrastive", False): 0.35,
    ("spectral", False): 0.40,
    ("msdnn", False): 0.30,
    ("msdnn", True): 0.45,  # MsDNN-AE
}
SC_BONUS = 0.04  # what the fake scorer adds with the spectral partition


def test_gap_is_a_minus_b(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    try:
        load_dataset("fashion-mnist", split="test")
    except FileNotFoundError as error:
        pytest.skip(f"Fashion-MNIST is not installed: {error}")

    devices = set()  # where each training and scoring was told to run

    def fake_training(spec, config, train, eval_sets):
        devices.add(config.device)
        value = FAKE_SCORE[(spec.loss, spec.autoencoder)]
        return [np.full((len(ds), 2), value) for ds in eval_sets]

    def fake_zero_shot(embedding, labels, *, spectral, seed, device):
        devices.add(device)
        return {"nmi": embedding[0, 0] + SC_BONUS * spectral, "recall@1": 2 * embedding[0, 0]}

    def fake_subclass(embedding, fine_labels, n_subclasses, seed, device):
        devices.add(device)
        return {"nmi": embedding[0, 0], "accuracy": 0.5 * embedding[0, 0]}

    monkeypatch.setattr(budget_curves, "trained_embeddings", fake_training)
    monkeypatch.setattr(budget_curves, "zero_shot_scores", fake_zero_shot)
    monkeypatch.setattr(budget_curves, "subclass_scores", fake_subclass)
    report = run_experiment("budget-curves", Budget(mode="quick", folder=tmp_path, device="cpu"))
    assert devices == {"cpu"}  # the budget's device, handed to every step

    def difference(a: tuple[str, bool], b: tuple[str, bool]) -> float:
        return FAKE_SCORE[a] - FAKE_SCORE[b]

    expected = {
        "lifted - triplet": {"nmi": 0.30, "recall@1": 0.60},
        "lifted - contrastive": {"nmi": 0.15, "recall@1": 0.30},
        "DSCL (d=5): with SC - without SC": {"nmi": SC_BONUS, "recall@1": 0.0},
        "DSCL (d=64): with SC - without SC": {"nmi": SC_BONUS, "recall@1": 0.0},
        "MsDNN-AE - MsDNN": {
            "nmi": difference(("msdnn", True), ("msdnn", False)),
            "accuracy": 0.5 * difference(("msdnn", True), ("msdnn", False)),
        },
    }
    rows = {row.method: row.ours for row in report.rows}
    for name, gap in expected.items():
        for point in QUICK_POINTS:
            assert rows[f"{name}, {point.label}"] == pytest.approx(gap), name
    # A positive gap is a claim that holds; B - A would have turned every one of them down.
    assert [claim.holds for claim in report.claims] == [True] * len(COMPARISONS)


def test_epochs_and_items_grow_together(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    try:
        load_dataset("fashion-mnist", split="test")
    except FileNotFoundError as error:
        pytest.skip(f"Fashion-MNIST is not installed: {error}")
    trained = []

    def fake_training(spec, config, train, eval_sets):
        trained.append((spec.loss, spec.autoencoder, config.epochs, config.seed, len(train)))
        return [np.random.default_rng(0).normal(size=(len(ds), 4)) for ds in eval_sets]

    monkeypatch.setattr(budget_curves, "trained_embeddings", fake_training)
    run_experiment("budget-curves", Budget(mode="quick", seeds=2, folder=tmp_path))
    methods = {(loss, autoencoder) for loss, autoencoder, *_ in trained}
    assert len(trained) == len(QUICK_POINTS) * 2 * (len(methods) + 1)  # DSCL twice: d = 5, 64
    for loss, autoencoder in methods:
        runs = [run for run in trained if run[:2] == (loss, autoencoder)]
        epochs = sorted({run[2] for run in runs})
        assert epochs == [p.epochs for p in QUICK_POINTS]
        sizes = [max(run[4] for run in runs if run[2] == e) for e in epochs]
        assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
        assert {run[3] for run in runs} == {0, 1}
    zero_shot_sizes = {run[4] for run in trained if run[0] == "lifted"}
    assert zero_shot_sizes == {p.train_items for p in QUICK_POINTS}
