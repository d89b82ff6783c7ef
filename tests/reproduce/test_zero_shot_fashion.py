"""``zero-shot-fashion`` in quick mode: the table's shape, values in range, files written, and
each claim's verdict worked out again from the report's own numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna
import pytest
from PIL import Image

from clusterable.cluster import spectral
from clusterable.data import class_split, first_per_class, load_dataset
from clusterable.evaluate import nmi
from clusterable.reproduce import Budget, zero_shot_fashion
from clusterable.reproduce._shared import Scale, Search

# Importing the module registers the experiment.
from clusterable.reproduce.zero_shot_fashion import METRICS, SEEN, zero_shot_scores
from clusterable.tune import parse_parameter, study

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


def claim_verdicts(result: dict) -> list[bool]:
    """The four claims, judged from the rows' means as their texts say ("A >= B in NMI and R@1":
    at least as high in both)."""
    ours = {row["method"]: row["ours"] for row in result["rows"]}

    def at_least(a: str, *others: str) -> bool:
        return all(ours[a][m] >= ours[b][m] for b in others for m in ("nmi", "recall@1"))

    pair_level = ("triplet (semi-hard)", "contrastive")
    return [
        at_least("DSCL (d=5) with SC", "DSCL (d=5) without SC"),
        at_least("DSCL (d=64) with SC", "DSCL (d=64) without SC"),
        # At the baselines' d = 64 and clustering (without SC), as the claim says.
        at_least("DSCL (d=64) without SC", *pair_level),
        at_least("lifted", *pair_level),
    ]


def test_claims_and_record(quick_run: tuple[Path, dict], assert_verdicts) -> None:
    folder, result = quick_run
    assert_verdicts(folder, claim_verdicts(result))
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


def test_the_default_budget_tunes_every_method_on_class_disjoint_folds() -> None:
    scale = zero_shot_fashion._scale(Budget(mode="default"))
    assert scale.search.cross_validated and scale.search.protocol == "class-disjoint"
    assert scale.search.trials > 1
    for method, _, space in zero_shot_fashion._methods(Budget(mode="default")):
        names = [parse_parameter(text).name for text in space]
        assert "lr" in names, method.label
        assert ("margin" in names) == ("margin" in method.spec.loss_args), method.label
    assert zero_shot_fashion._scale(Budget(mode="quick")).search is None


def test_a_tiny_search_chooses_what_the_method_then_trains_with(tmp_path, fashion_mnist) -> None:
    seen = class_split(load_dataset("fashion-mnist", split="train"), SEEN, relabel=True)
    tiny = Scale(8, 4, 1, search=Search(1, 8, folds=2, trials=2, protocol="class-disjoint"))
    budget = Budget(mode="default", folder=tmp_path)
    methods, notes = zero_shot_fashion.tuned_methods(budget, tiny, first_per_class(seen, 8))
    assert len(methods) == len(notes) == len(zero_shot_fashion._methods(budget))
    lifted = next(method for method, _ in methods if method.label == "lifted")
    storage = f"sqlite:///{tmp_path / 'search' / 'lifted' / study.STUDY_FILE}"
    searched = optuna.load_study(study_name=study.STUDY_NAME, storage=storage)
    assert searched.user_attrs["settings"]["protocol"] == "class-disjoint"
    assert lifted.train_args["lr"] == searched.best_params["train.lr"]
    assert lifted.spec.loss_args["margin"] == searched.best_params["loss.margin"]
    assert zero_shot_fashion._describe(lifted).startswith("lr=")


def test_a_search_note_says_the_values_and_trials_as_the_search_does(
    tmp_path, monkeypatch, search_with_a_failure
) -> None:
    """Each note names the chosen values and the trials in the search's own words
    (`values_in_words`, `TuneResult.tally`): its failed trials too."""
    result = search_with_a_failure({"train.lr": 0.00123456, "loss.margin": 0.5})
    monkeypatch.setattr(zero_shot_fashion, "tune_method", lambda method, *args: (method, result))
    budget = Budget(mode="default", folder=tmp_path)
    _, notes = zero_shot_fashion.tuned_methods(budget, zero_shot_fashion._scale(budget), None)
    said = f": {study.values_in_words(result.best_values)} (map@r 50.00 % on held-out classes"
    assert all(said in note and f"folds, {result.tally()}; searched" in note for note in notes)
    assert "lr=0.001235, margin=0.5" in notes[0] and "1 failed (lr=0.5: RuntimeError" in notes[0]
