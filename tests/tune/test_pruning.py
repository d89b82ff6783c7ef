"""tune prunes a trial only while it has folds left to train: a trial that trained every fold
keeps its score."""

from __future__ import annotations

from test_study import CONFIG, SPEC, stored_trials

from clusterable.tune import parse_parameter, study, tune


def test_a_trial_that_trained_every_fold_is_completed_not_pruned(tmp_path, monkeypatch):
    """The audit: the pruner was asked after the last fold too, so a trial whose mean fell
    below the median there was pruned after all its training, and its score never counted."""
    # Trials 1-3 score 0.5 then 1.5 (means 0.5, then 1); trial 4 scores 0.6 twice: not below
    # the median after fold 1, below it after fold 2 (the pruner compares a trial's best mean).
    scores = iter([0.5, 1.5] * 3 + [0.6, 0.6])
    monkeypatch.setattr(study, "_fold_score", lambda *a, **k: next(scores))
    space = [parse_parameter("margin=log:0.1:2")]
    result = tune(SPEC, space, config=CONFIG, folds=2, trials=4, out=tmp_path, report=print)
    last = stored_trials(tmp_path)[-1]
    assert last.state.name == "COMPLETE" and last.value == 0.6
    assert (result.completed, result.pruned) == (4, 0)


def test_a_trial_worse_than_the_median_before_its_last_fold_is_pruned(tmp_path, monkeypatch):
    scores = iter([1.0] * 9 + [0.0])  # trials 1-3 score 1 in all three folds; trial 4: 0
    monkeypatch.setattr(study, "_fold_score", lambda *a, **k: next(scores))
    space = [parse_parameter("margin=log:0.1:2")]
    result = tune(SPEC, space, config=CONFIG, folds=3, trials=4, out=tmp_path, report=print)
    last = stored_trials(tmp_path)[-1]
    assert last.state.name == "PRUNED" and list(last.intermediate_values) == [0]
    assert (result.completed, result.pruned) == (3, 1)
