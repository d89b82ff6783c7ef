"""clusterable tune: flags and a YAML search mapping, progress per trial, resume, best.yaml."""

from __future__ import annotations

import pytest
import yaml

from clusterable.cli import main
from clusterable.tune import study

DIGITS = ["tune", "--data", "digits", "--loss", "contrastive", "--embedding-dim", "8"]
RUN = {
    "data": "digits",
    "loss": "contrastive",
    "embedding_dim": 8,
    "train": {"epochs": 1, "batch_size": 60, "items_per_class": 6},
    "search": {"margin": {"log": [0.1, 2]}},
}


def test_a_search_from_yaml_and_flags_resumes_and_names_its_best(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(RUN))
    argv = ["tune", "--config", str(config), "--param", "lr=choice:1e-3,3e-3", "--folds", "2"]
    out = tmp_path / "study"
    assert main([*argv, "--trials", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("searching lr in {0.001, 0.003}, margin log [0.1, 2]")
    assert [line.split(":")[0] for line in printed[1:3]] == ["trial 1/2", "trial 2/2"]
    assert printed[3].startswith("best: lr=") and "2 trials completed" in printed[3]

    assert main([*argv, "--trials", "3", "--out", str(out)]) == 0  # one more trial
    printed = capsys.readouterr().out.splitlines()
    assert printed[1] == f"resuming the search in {out}: 2 earlier trials kept"
    assert printed[2].startswith("trial 3/3") and "3 trials completed" in printed[3]
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["train"]["lr"] in (1e-3, 3e-3) and 0.1 <= best["loss_args"]["margin"] <= 2


def test_train_refuses_a_file_with_a_search(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(RUN))
    with pytest.raises(SystemExit):
        main(["train", "--config", str(config), "--out", str(tmp_path / "run")])
    assert "run it with `clusterable tune --config`" in capsys.readouterr().err


def test_a_bad_parameter_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["tune", "--data", "digits", "--param", "sigma=log:0:1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert "a log range needs LOW > 0" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--param", "nope=log:1:10"], "nope"),
        (["--param", "lr=choice:"], "a value is empty"),
        (["--param", "lr=choice:0.001,,0.01"], "a value is empty"),
        (
            ["--param", "margin=log:0.1:2", "--protocol", "class-disjoint", "--metric", "knn@5"],
            "knn@5",
        ),
    ],
    ids=["unknown-name", "empty-choice", "empty-value", "knn-on-unseen-classes"],
)
def test_a_refused_search_leaves_no_folder(flags, words, tmp_path, capsys):
    """The audit found an empty --out folder after each of these (and "searching lr in {None}"
    for the empty choice)."""
    out = tmp_path / "study"
    with pytest.raises(SystemExit) as stop:
        main(["tune", "--data", "digits", "--loss", "contrastive", *flags, "--out", str(out)])
    said = capsys.readouterr()
    assert stop.value.code == 2 and words in said.err and said.err.count("\n") == 1, said.err
    assert "None" not in said.out
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--param", "batch_size=choice:1,2"], "the search can draw batch_size=1"),
        (["--param", "margin=log:0.1:2", "--folds", "3"], "other settings (folds differ)"),
    ],
    ids=["a-space-train-refuses", "a-resume-of-other-settings"],
)
def test_a_refused_search_says_its_error_alone(flags, words, tmp_path, capsys, monkeypatch):
    """tune printed "searching batch_size in {1, 2} ... study in DIR" and only then the error of
    the checks of its space (or of the study it was to resume)."""
    monkeypatch.setattr(study, "_fold_score", lambda *a, **k: 0.5)
    out = tmp_path / "study"
    argv = [*DIGITS, "--epochs", "1", "--trials", "1", "--out", str(out)]
    assert main([*argv, "--param", "margin=log:0.1:2", "--folds", "2"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([*argv, "--folds", "2", *flags])
    said = capsys.readouterr()
    assert said.out == "" and words in said.err and said.err.count("\n") == 1, said


def test_a_resumed_search_says_which_trials_failed_and_why(tmp_path, capsys, monkeypatch):
    calls = []

    def fold_score(spec, config, train, fit_rows, held_rows, metric, seed):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("the loss was NaN")
        return 0.5

    monkeypatch.setattr(study, "_fold_score", fold_score)
    out = tmp_path / "study"
    argv = [*DIGITS, "--param", "margin=log:0.1:2", "--folds", "2", "--out", str(out)]
    with pytest.raises(SystemExit):
        main([*argv, "--trials", "2"])
    said = capsys.readouterr()
    assert said.err.strip() == "clusterable tune: error: the loss was NaN"
    assert said.out.splitlines()[1].startswith("a trial failed (margin=")

    assert main([*argv, "--trials", "2"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert ", 1 failed one(s) not run again (margin=" in printed[1], printed
    assert printed[1].endswith(": ValueError: the loss was NaN)")
    assert "2 trials completed, 0 pruned, 1 failed (margin=" in printed[4], printed
    assert printed[4].endswith(": ValueError: the loss was NaN))")


def test_the_best_yaml_leaves_how_trials_reported_to_train(tmp_path, capsys):
    """The audit: best.yaml held the search's `progress: false`, so `train --config best.yaml`
    trained without progress bars."""
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(RUN))
    out = tmp_path / "study"
    assert (
        main(["tune", "--config", str(config), "--folds", "2", "--trials", "1", "--out", str(out)])
        == 0
    )
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert "progress" not in best["train"] and "verbose" not in best["train"]
    assert best["train"]["epochs"] == 1 and best["train"]["batch_size"] == 60


def test_the_summary_names_the_best_values_and_trials_as_the_search_does(
    tmp_path, capsys, monkeypatch, search_with_a_failure
):
    """The summary's words are the search's own (`values_in_words`, `TuneResult.tally`), never a
    copy of them."""
    import clusterable.tune

    result = search_with_a_failure({"loss.margin": 0.123456, "train.sampler": "random"})
    monkeypatch.setattr(clusterable.tune, "tune", lambda *args, **kwargs: result)
    out = tmp_path / "study"
    assert main([*DIGITS, "--param", "margin=log:0.1:2", "--out", str(out)]) == 0
    best, wrote = capsys.readouterr().out.splitlines()
    assert best == (
        f"best: {study.values_in_words(result.best_values)} (map@r 0.5000, mean over 3 folds; "
        f"{result.tally()})"
    )
    assert best.startswith("best: margin=0.1235, sampler=random (") and "1 failed" in best
    assert wrote.startswith(f"wrote {out / study.BEST_FILE} and the search plot ")
