"""tune: a search on digits that prunes, resumes after a kill, and writes a YAML that trains."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import optuna
import pytest
import yaml

from clusterable.cli import main
from clusterable.evaluate import register_metric
from clusterable.evaluate.registry import METRICS
from clusterable.recipe import RunSpec
from clusterable.train.config import TrainConfig
from clusterable.tune import parse_parameter, study, tune

SPEC = RunSpec(data="digits", loss="contrastive", embedding_dim=8)
CONFIG = TrainConfig(epochs=1, batch_size=60, items_per_class=6)
SPACE = [parse_parameter("margin=log:0.1:2"), parse_parameter("lr=choice:0.001,0.003")]


def search(out, trials, lines=None, **options):
    report = lines.append if lines is not None else (lambda line: None)
    arguments = {"config": CONFIG, "folds": 2, "trials": trials, "out": out, "report": report}
    return tune(SPEC, SPACE, **{**arguments, **options})


def stored_trials(out):
    storage = f"sqlite:///{out / study.STUDY_FILE}"
    return optuna.load_study(study_name=study.STUDY_NAME, storage=storage).trials


def test_a_search_writes_its_study_best_yaml_and_plot(tmp_path):
    lines = []
    result = search(tmp_path, 4, lines)
    assert lines[0] == (
        "searching margin log [0.1, 2], lr in {0.001, 0.003} for contrastive on digits: 4 trials, "
        f"2 stratified folds of the training split, maximising map@r; study in {tmp_path}"
    )
    assert [line.split(":")[0] for line in lines[1:]] == [f"trial {n}/4" for n in range(1, 5)]
    assert result.completed + result.pruned == 4
    trials = stored_trials(tmp_path)
    best = max(
        (t for t in trials if t.value is not None and t.state.name == "COMPLETE"),
        key=lambda t: t.value,
    )
    assert result.best_score == best.value and result.best_values == best.params
    assert result.spec.loss_args["margin"] == best.params["loss.margin"]
    assert result.config.lr == best.params["train.lr"]
    assert (tmp_path / study.PLOT_FILE).stat().st_size > 1000
    written = yaml.safe_load((tmp_path / study.BEST_FILE).read_text())
    assert written["loss_args"] == {"margin": best.params["loss.margin"]}
    assert written["train"]["lr"] == best.params["train.lr"]


def test_the_best_yaml_trains(tmp_path):
    result = search(tmp_path / "search", 3)
    run = tmp_path / "run"
    argv = ["train", "--config", str(result.folder / study.BEST_FILE), "--out", str(run)]
    assert main([*argv, "--no-progress"]) == 0
    recorded = yaml.safe_load((run / "run.json").read_text())
    assert recorded["spec"]["loss_args"]["margin"] == pytest.approx(result.spec.loss_args["margin"])


def test_a_killed_search_resumes_and_reruns_the_interrupted_trial(tmp_path, monkeypatch):
    real = study._fold_score
    calls = []

    def killed_in_the_third_trial(*args, **kwargs):
        calls.append(1)
        if len(calls) == 5:  # trial 3, fold 1
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(study, "_fold_score", killed_in_the_third_trial)
    with pytest.raises(KeyboardInterrupt):
        search(tmp_path, 4)
    before = stored_trials(tmp_path)
    assert [t.state.name for t in before] == ["COMPLETE", "COMPLETE", "FAIL"]
    monkeypatch.setattr(study, "_fold_score", real)

    lines = []
    result = search(tmp_path, 4, lines)
    assert (
        lines[1].startswith("resuming the search") and "1 interrupted one(s) run again" in lines[1]
    )
    after = stored_trials(tmp_path)
    assert [t.value for t in after[:2]] == [t.value for t in before[:2]]  # kept, not rerun
    assert after[2].state.name == "FAIL" and after[3].params == before[2].params
    assert result.completed + result.pruned == 4 and len(after) == 5


def test_a_trial_that_failed_is_kept_and_not_run_again_on_resume(tmp_path, monkeypatch):
    """A resume ran a trial that had raised an error again, as it runs an interrupted one: the
    same values failed the same way, and a search with such a trial could never go on."""
    calls = []

    def fold_score(spec, config, train, fit_rows, held_rows, metric, seed):
        calls.append(1)
        if len(calls) == 3:  # trial 2, fold 1
            raise RuntimeError("CUDA out of memory.\n  Tried to allocate 2 GiB")
        return float(spec.loss_args["margin"])

    monkeypatch.setattr(study, "_fold_score", fold_score)
    lines = []
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        search(tmp_path, 3, lines)
    failed_lines = lines[-1:]
    lines.clear()
    result = search(tmp_path, 3, lines)
    after = stored_trials(tmp_path)
    failed = after[1]
    assert [t.state.name for t in after[:2]] == ["COMPLETE", "FAIL"] and len(after) == 4
    assert all(t.params != failed.params for t in after[2:])  # new values, not the failed ones
    assert result.completed + result.pruned == 3

    values = ", ".join(f"{k.split('.')[1]}={v:.4g}" for k, v in failed.params.items())
    error = "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB"
    assert failed_lines == [
        f"a trial failed ({values}); it is kept as failed in {tmp_path / study.STUDY_FILE}, and "
        "the same command again goes on with new trials"
    ]
    assert lines[1] == (
        f"resuming the search in {tmp_path}: 1 earlier trials kept, 1 failed one(s) not run "
        f"again ({values}: {error})"
    )
    assert result.failed == [(failed.params, error)]
    assert result.tally().endswith(f", 1 failed ({values}: {error})")
    assert "(0 pruned, 1 failed)" in (tmp_path / study.BEST_FILE).read_text().splitlines()[0]


KILLED = """
import os, sys
from clusterable.tune import study
sys.path.insert(0, {tests!r})
from test_study import search
real, calls = study._fold_score, []
def killed(*args, **kwargs):
    calls.append(1)
    if len(calls) == 3:
        os._exit(9)  # as kill -9: no handler runs, the trial stays RUNNING in the database
    return real(*args, **kwargs)
study._fold_score = killed
search(__import__("pathlib").Path({out!r}), 3)
"""


def test_a_search_killed_outright_resumes_too(tmp_path):
    code = KILLED.format(tests=str(Path(__file__).parent), out=str(tmp_path))
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 9
    assert [t.state.name for t in stored_trials(tmp_path)] == ["COMPLETE", "RUNNING"]
    interrupted = stored_trials(tmp_path)[1].params
    lines = []
    result = search(tmp_path, 3, lines)
    assert "1 interrupted one(s) run again" in lines[1]
    after = stored_trials(tmp_path)
    assert [t.state.name for t in after[:2]] == ["COMPLETE", "FAIL"]
    assert after[2].params == interrupted and result.completed + result.pruned == 3
    # A second resume does not run the same interrupted trial again.
    lines.clear()
    search(tmp_path, 3, lines)
    assert lines[1:] == [f"resuming the search in {tmp_path}: 3 earlier trials kept"]


def test_another_search_in_the_same_folder_is_refused(tmp_path):
    search(tmp_path, 1)
    with pytest.raises(ValueError, match="other settings \\(folds differ\\)"):
        search(tmp_path, 1, folds=3)


def test_a_model_argument_is_searched_and_written_to_the_best_yaml(tmp_path):
    space = [parse_parameter("model.hidden_dims=choice:8,16")]
    result = tune(SPEC, space, config=CONFIG, folds=2, trials=1, out=tmp_path)
    assert result.spec.model_args["hidden_dims"] in ((8,), (16,))
    written = yaml.safe_load((tmp_path / study.BEST_FILE).read_text())
    assert written["model_args"]["hidden_dims"] == list(result.spec.model_args["hidden_dims"])


def test_values_the_loss_refuses_fail_before_any_training(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "_fold_score", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises((TypeError, ValueError), match="nonsense"):
        tune(SPEC, [parse_parameter("nonsense=float:0:1")], config=CONFIG, folds=2, trials=1)
    with pytest.raises(ValueError, match="unknown metric 'mapr'"):
        tune(SPEC, SPACE, config=CONFIG, folds=2, trials=1, metric="mapr")


def test_a_search_folds_the_data_it_is_given(tmp_path):
    digits = SPEC.load("train")
    subset = digits.subset(np.flatnonzero(digits.labels < 4))
    result = search(tmp_path, 2, data=subset)
    storage = f"sqlite:///{tmp_path / study.STUDY_FILE}"
    stored = optuna.load_study(study_name=study.STUDY_NAME, storage=storage).user_attrs
    assert stored["settings"]["items"] == len(subset) < len(digits)
    assert result.completed >= 1
    with pytest.raises(ValueError, match="other settings"):  # other data: another search
        search(tmp_path, 3)


@pytest.mark.parametrize(
    ("metric", "asked"),
    [("recall@2", ["recall@k"]), ("nmi", ["nmi"]), ("v_measure", ["v_measure"])],
)
def test_a_fold_computes_only_the_metric_searched_for(monkeypatch, metric, asked):
    tables, real = [], study.evaluate_embeddings

    def evaluate(*args, **kwargs):
        tables.append((kwargs["metrics"], real(*args, **kwargs)))
        return tables[-1][1]

    monkeypatch.setattr(study, "evaluate_embeddings", evaluate)
    train = study.load_dataset("digits", split="train")
    rows = np.arange(len(train))
    score = study._fold_score(SPEC, CONFIG, train, rows[:400], rows[400:700], metric, seed=0)
    [(metrics, table)] = tables
    assert metrics == asked and set(table) == {metric}
    assert score == table[metric] and 0.0 < score <= 1.0


def test_every_registered_metric_can_be_searched(monkeypatch):
    searched = []

    def fold_score(spec, config, train, fit_rows, held_rows, metric, seed):
        searched.append(metric)
        return 0.5

    monkeypatch.setattr(study, "_fold_score", fold_score)
    result = tune(SPEC, SPACE, config=CONFIG, folds=2, trials=1, metric="v_measure")
    assert result.best_score == 0.5 and searched == ["v_measure", "v_measure"]
    with METRICS.scratch():
        register_metric("largest_cluster_share", needs={"partition"}, default=False)(
            lambda a: float(a.table.cluster_sizes.max() / a.table.n)
        )
        assert "largest_cluster_share" in study.searchable_metrics()
        tune(SPEC, SPACE, config=CONFIG, folds=2, trials=1, metric="largest_cluster_share")
        assert searched[-1] == "largest_cluster_share"
    with pytest.raises(
        ValueError,
        match=r"unknown metric 'largest_cluster_share'; choose one of recall@K, precision@1, "
        r".*, v_measure, silhouette, roc_auc, fnmr@fmr=EPS, knn@K",
    ):
        tune(SPEC, SPACE, config=CONFIG, folds=2, trials=1, metric="largest_cluster_share")
    with pytest.raises(ValueError, match="unknown metric 'recall@k'"):
        tune(SPEC, SPACE, config=CONFIG, folds=2, trials=1, metric="recall@k")


def test_knn_accuracy_on_class_disjoint_folds_is_refused_before_any_training(tmp_path, monkeypatch):
    # Its held-out classes have no training items: every fold would score 0 and a "best" trial
    # would still be reported.
    monkeypatch.setattr(study, "_fold_score", lambda *a, **k: pytest.fail("trained a fold"))
    with pytest.raises(
        ValueError, match=r"knn@5 classifies.*class-disjoint folds hold out whole classes"
    ):
        search(tmp_path, 2, protocol="class-disjoint", metric="knn@5")
    assert not (tmp_path / study.STUDY_FILE).exists()


def test_an_error_rate_is_minimised(monkeypatch):
    """fnmr@fmr=EPS is an error: the best trial is the one with the smallest score."""
    scores = iter([0.9, 0.9, 0.2, 0.2, 0.6, 0.6])

    def fold_score(spec, config, train, fit_rows, held_rows, metric, seed):
        assert metric == "fnmr@fmr=0.001"
        return next(scores)

    monkeypatch.setattr(study, "_fold_score", fold_score)
    result = tune(SPEC, SPACE, config=CONFIG, folds=2, trials=3, metric="fnmr@fmr=0.001")
    assert result.best_score == 0.2 and result.completed == 3


def test_the_tune_flag_takes_a_rate_in_any_spelling_and_says_it_minimises(
    tmp_path, monkeypatch, capsys
):
    seen = []

    def fold_score(spec, config, train, fit_rows, held_rows, metric, seed):
        seen.append(metric)
        return 0.1

    monkeypatch.setattr(study, "_fold_score", fold_score)
    argv = ["tune", "--data", "digits", "--loss", "contrastive", "--param", "margin=log:0.1:2"]
    argv += ["--metric", "fnmr@fmr=1e-3", "--trials", "1", "--folds", "2"]
    assert main([*argv, "--out", str(tmp_path / "study")]) == 0
    assert set(seen) == {"fnmr@fmr=0.001"}
    assert "minimising fnmr@fmr=0.001" in capsys.readouterr().out


@pytest.mark.parametrize(("metric", "worst"), [("nmi", -np.inf), ("fnmr@fmr=0.001", np.inf)])
def test_a_fold_that_scores_nan_scores_the_worst_for_its_direction(monkeypatch, metric, worst):
    """The audit: NaN became -inf, the best score of an error rate, which is minimised."""
    monkeypatch.setattr(
        study, "evaluate_embeddings", lambda *a, **k: {m: float("nan") for m in k["metrics"]}
    )
    train = study.load_dataset("digits", split="train")
    rows = np.arange(len(train))
    assert study._fold_score(SPEC, CONFIG, train, rows[:400], rows[400:700], metric, 0) == worst
