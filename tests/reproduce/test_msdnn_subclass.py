"""``msdnn-subclass`` in quick mode: the table's shape, values in range, files written, and each
claim's verdict worked out again from the report's own numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna
import pytest
from PIL import Image

from clusterable.reproduce import Budget, msdnn_subclass, run_experiment
from clusterable.reproduce._shared import Scale, Search

# Importing the module registers the experiment.
from clusterable.reproduce.msdnn_subclass import PAPER, best_knn_accuracy
from clusterable.tune import study

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


def table_verdicts(result: dict) -> list[bool]:
    """The three claims, judged from the rows' means as their texts say."""
    ours = {row["method"]: row["ours"] for row in result["rows"]}
    msdnn = ("MsDNN", "MsDNN-AE")
    # Tables I: each of MsDNN and MsDNN-AE above each of triplet and lifted, in NMI and ACC.
    better = all(
        ours[method][metric] > ours[baseline][metric]
        for method in msdnn
        for baseline in ("triplet", "lifted")
        for metric in ("nmi", "accuracy")
    )
    ae_helps = all(ours["MsDNN-AE"][m] > ours["MsDNN"][m] for m in ("nmi", "accuracy"))
    # Table III, "comparable": each of MsDNN and MsDNN-AE within 1 point of the best other method.
    best_other = max(v["knn_accuracy"] for name, v in ours.items() if name not in msdnn)
    comparable = all(best_other - ours[method]["knn_accuracy"] <= 0.01 for method in msdnn)
    return [better, ae_helps, comparable]


def test_claims_and_record(quick_run: tuple[Path, dict], assert_verdicts) -> None:
    folder, result = quick_run
    assert_verdicts(folder, table_verdicts(result))
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


def test_the_default_budget_searches_the_papers_range_by_5_fold_cross_validation() -> None:
    scale = msdnn_subclass._scale(Budget(mode="default"))
    assert scale.search.cross_validated and scale.search.folds == 5
    assert scale.search.protocol == "stratified" and scale.search.trials >= 21
    for name in ("sigma", "temperature"):
        assert scale.parameter(name).choices == tuple(2.0**p for p in range(-10, 11))
    assert scale.parameter("lambda").choices == (0.1, 0.5, 1.0, 10.0)
    assert scale.parameter("lambda").target == "loss"  # the autoencoder loss's argument
    quick = msdnn_subclass._scale(Budget(mode="quick"))
    assert not quick.search.cross_validated and len(quick.parameter("sigma").choices) == 2


def test_the_value_a_search_chose_is_the_one_trained(tmp_path, monkeypatch, fashion_mnist) -> None:
    """A tiny cross-validated search: each row's setting is its study's best trial."""
    tiny = Scale(
        12,
        6,
        1,
        tsne_items=30,
        search=Search(epochs=1, fit_per_class=20, folds=2, trials=2),
        space={
            "sigma": "sigma=choice:0.0625,4.0",
            "temperature": "temperature=choice:0.0625,4.0",
            "lambda": "reconstruction_weight=choice:0.5,10.0",
        },
    )
    monkeypatch.setattr(msdnn_subclass, "_scale", lambda budget: tiny)
    report = run_experiment("msdnn-subclass", Budget(mode="default", folder=tmp_path))
    notes = {row.method: row.note for row in report.rows}
    chosen = {}
    for folder in ("msdnn", "snn", "msdnn-ae"):
        storage = f"sqlite:///{tmp_path / 'search' / folder / study.STUDY_FILE}"
        searched = optuna.load_study(study_name=study.STUDY_NAME, storage=storage)
        assert searched.user_attrs["settings"]["folds"] == 2
        assert searched.user_attrs["settings"]["items"] == 2 * 20  # 20 per coarse class
        chosen[folder] = searched.best_params
    assert notes["MsDNN"] == f"sigma={chosen['msdnn']['loss.sigma']:g}"
    assert notes["SNN"] == f"temperature={chosen['snn']['loss.temperature']:g}"
    weight = chosen["msdnn-ae"]["loss.reconstruction_weight"]
    assert notes["MsDNN-AE"] == f"sigma={chosen['msdnn']['loss.sigma']:g}, lambda={weight:g}"
    assert "5-fold" not in report.setup and "2-fold stratified" in report.setup
    assert "2 trials, 2-fold stratified" in report.budget
    assert any(p.startswith("search/") for p in report.plots)


def test_a_search_note_counts_the_trials_as_the_search_does(monkeypatch, search_with_a_failure):
    """The note of a cross-validated choice counts the trials in the search's own words
    (`TuneResult.tally`): its failed trials too."""
    result = search_with_a_failure({"loss.sigma": 0.0625})
    monkeypatch.setattr(msdnn_subclass, "tune_method", lambda method, *args: (method, result))
    budget = Budget(mode="default")
    method = msdnn_subclass._method("MsDNN", "msdnn", {}, budget)
    _, note = msdnn_subclass._choose(method, "sigma", msdnn_subclass._scale(budget), None, None)
    assert note.startswith("MsDNN sigma: 0.0625 chosen by 5-fold cross-validation")
    assert f"(coarse labels, {result.tally()}, mean 50.00 %)" in note
    assert "3 trials completed, 1 pruned, 1 failed (lr=0.5: RuntimeError" in note
