"""The new-user audit of `clusterable tune`: a resumed search draws new values and counts its
trials to --trials, --out refuses a folder that is not a search's, every value a search can draw
is checked as `train` checks it before any study file, the README's YAML `search:` reads, tune
takes --progress/--no-progress, and Ctrl-C ends in one line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import optuna
import pytest
import yaml
from test_cli_use import one_line_error  # tests/: one line, exit 2, no traceback
from test_study import CONFIG, SPEC, stored_trials

from clusterable.cli import main
from clusterable.tune import parse_parameter, parse_space, study, tune

README = Path(__file__).parents[2] / "README.md"
#: Two continuous parameters: a value drawn twice is a replayed draw, not chance.
SPACE = [parse_parameter("margin=log:0.1:2"), parse_parameter("lr=log:1e-4:1e-2")]
DIGITS = ["tune", "--data", "digits", "--loss", "contrastive", "--embedding-dim", "8"]
QUICK = ["--epochs", "1", "--folds", "2", "--batch-size", "60", "--items-per-class", "6"]


def scored(monkeypatch, interrupt_at=None):
    """Folds scored without training (the margin, as a score), Ctrl-C at fold ``interrupt_at``."""
    calls = []

    def fold_score(spec, config, train, fit_rows, held_rows, metric, seed):
        calls.append(1)
        if len(calls) == interrupt_at:
            raise KeyboardInterrupt
        return float(spec.loss_args["margin"])

    monkeypatch.setattr(study, "_fold_score", fold_score)


def searched(out, trials, lines):
    return tune(SPEC, SPACE, config=CONFIG, folds=2, trials=trials, out=out, report=lines.append)


def drawn(out):
    return [tuple(sorted(t.params.items())) for t in stored_trials(out)]


def test_an_extended_search_draws_new_values_and_counts_to_trials(tmp_path, monkeypatch):
    """The audit: trial 4 drew trial 1's values and trial 5 trial 2's (a sampler seeded afresh
    replays its first draws)."""
    scored(monkeypatch)
    lines = []
    searched(tmp_path, 2, lines)
    lines.clear()
    result = searched(tmp_path, 4, lines)
    assert [line.split(":")[0] for line in lines[2:]] == ["trial 3/4", "trial 4/4"]
    values = drawn(tmp_path)
    assert len(values) == 4 and len(set(values)) == 4, values
    assert result.completed + result.pruned == 4
    # A new study still draws as its seed says: the same first trials in another folder.
    again = tmp_path / "again"
    searched(again, 2, [])
    assert drawn(again) == values[:2]


def test_a_resumed_search_reruns_the_interrupted_trial_once_and_never_counts_past_trials(
    tmp_path, monkeypatch
):
    """The audit: after Ctrl-C in trial 3 of 4 the resume printed "trial 4/4" for the rerun and
    then "trial 5/4", repeating trial 1's values; Optuna printed a traceback for the
    interrupted trial."""
    scored(monkeypatch, interrupt_at=5)  # trial 3, fold 1
    logged: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = logged.append  # type: ignore[method-assign]
    logging.getLogger("optuna").addHandler(handler)
    try:
        with pytest.raises(study.SearchInterrupted, match="run the same command again to resume"):
            searched(tmp_path, 4, [])
    finally:
        logging.getLogger("optuna").removeHandler(handler)
    assert [r.getMessage() for r in logged if r.levelno >= logging.WARNING] == []
    interrupted = stored_trials(tmp_path)[2]
    assert interrupted.state.name == "FAIL"

    scored(monkeypatch)
    lines = []
    result = searched(tmp_path, 4, lines)
    assert "1 interrupted one(s) run again" in lines[1]
    assert [line.split(":")[0] for line in lines[2:]] == ["trial 3/4", "trial 4/4"]
    trials = stored_trials(tmp_path)
    assert trials[3].params == interrupted.params  # the interrupted trial, run again
    finished = [tuple(sorted(t.params.items())) for t in trials if t.state.name != "FAIL"]
    assert len(finished) == 4 and len(set(finished)) == 4
    assert result.completed + result.pruned == 4


def test_a_trial_left_running_by_a_kill_is_rerun_within_trials(tmp_path, monkeypatch):
    """A study.db with a trial left RUNNING (kill -9), made through Optuna directly."""
    scored(monkeypatch)
    searched(tmp_path, 1, [])
    storage = f"sqlite:///{tmp_path / study.STUDY_FILE}"
    left = optuna.load_study(study_name=study.STUDY_NAME, storage=storage)
    left.enqueue_trial({"loss.margin": 0.5, "train.lr": 1e-3})
    trial = left.ask()  # RUNNING, never told: killed in its first fold
    trial.suggest_float("loss.margin", 0.1, 2, log=True)
    trial.suggest_float("train.lr", 1e-4, 1e-2, log=True)
    lines = []
    result = searched(tmp_path, 3, lines)
    assert [line.split(":")[0] for line in lines[2:]] == ["trial 2/3", "trial 3/3"]
    assert "lr=0.001" in lines[2] and "margin=0.5" in lines[2]
    assert result.completed + result.pruned == 3


@pytest.mark.parametrize(
    "held",
    [["run.json", "checkpoints/"], ["notes.txt"], ["study.db"]],
    ids=["a-run-folder", "other-files", "a-study-db-of-something-else"],
)
def test_out_refuses_a_folder_that_holds_no_search(held, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(study, "_fold_score", lambda *a, **k: pytest.fail("trained"))
    out = tmp_path / "dl"
    out.mkdir()
    for name in held:
        if name.endswith("/"):
            (out / name).mkdir()
        else:
            (out / name).write_text(json.dumps({"spec": {}}))
    before = sorted(p.name for p in out.iterdir())
    argv = [*DIGITS, "--param", "margin=log:0.1:2", *QUICK, "--trials", "2", "--out", str(out)]
    err = one_line_error(capsys, argv, "tune")
    assert f"--out {out} already holds files" in err and "new or empty folder" in err
    assert sorted(p.name for p in out.iterdir()) == before
    assert "searching" not in capsys.readouterr().out


def test_out_refuses_a_file(tmp_path, capsys):
    out = tmp_path / "study"
    out.write_text("mine")
    argv = [*DIGITS, "--param", "margin=log:0.1:2", "--out", str(out)]
    assert "is a file" in one_line_error(capsys, argv, "tune")
    assert out.read_text() == "mine"


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--param", "batch_size=choice:1,2"], "batch_size=1"),
        (
            ["--loss", "spectral", "--param", "batch_size=choice:4,60"],
            "not above the 8 embedding dimensions",
        ),
        (["--param", "lr=float:-1:0.1"], "lr=-1"),
    ],
    ids=["a-batch-of-one", "spectral-batch-within-dimensions", "a-negative-lr"],
)
def test_every_value_a_search_can_draw_is_checked_as_train_checks_it(
    flags, words, tmp_path, capsys, monkeypatch
):
    """The audit: batch_size=choice:1,2 failed in a trial, with Optuna's warning and a
    traceback, and left study.db behind."""
    monkeypatch.setattr(study, "_fold_score", lambda *a, **k: pytest.fail("trained"))
    out = tmp_path / "study"
    argv = [*DIGITS, *QUICK, *flags, "--trials", "2", "--out", str(out)]
    err = one_line_error(capsys, argv, "tune")
    assert words in err and "the search can draw" in err, err
    assert not out.exists()


def test_the_readme_yaml_search_reads_its_numbers_as_numbers():
    """The audit: `sigma: {log: [1e-3, 1e3]}`, as README writes it, was refused (YAML 1.1 reads
    1e-3 as text), and a choice of 1e-4, 1e-3 was shown as text."""
    text = "sigma: {log: [1e-3, 1e3]}\nlam: {choice: [0.1, 0.5, 1, 10]}\n"
    for line in text.splitlines():
        assert f"`{line}`" in README.read_text()
    assert parse_space(yaml.safe_load(text)) == [
        parse_parameter("sigma=log:0.001:1000"),
        parse_parameter("lam=choice:0.1,0.5,1,10"),
    ]
    [choice] = parse_space(yaml.safe_load("lr: {choice: [1e-4, 1e-3]}"))
    assert choice.choices == (1e-4, 1e-3) and choice.describe() == "lr in {0.0001, 0.001}"


def test_a_yaml_search_of_text_numbers_runs_from_the_command_line(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(
        "data: digits\nloss: contrastive\nembedding_dim: 8\n"
        "train: {epochs: 1, batch_size: 60, items_per_class: 6}\n"
        "search:\n  margin: {log: [1e-1, 2e0]}\n  lr: {choice: [1e-3, 3e-3]}\n"
    )
    out = tmp_path / "study"
    argv = ["tune", "--config", str(config), "--folds", "2", "--trials", "1", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "margin log [0.1, 2]" in printed and "lr in {0.001, 0.003}" in printed


def test_tune_takes_progress_flags_and_a_resume_may_change_them(tmp_path, capsys):
    """The audit: `tune ... --no-progress` was an unrecognised argument."""
    out = tmp_path / "study"
    argv = [*DIGITS, "--param", "margin=log:0.1:2", *QUICK, "--out", str(out)]
    assert main([*argv, "--trials", "1", "--no-progress"]) == 0
    assert main([*argv, "--trials", "2", "--progress"]) == 0
    printed = capsys.readouterr().out
    assert "resuming the search" in printed and "trial 2/2" in printed


def test_ctrl_c_ends_the_search_in_one_line_that_says_how_to_resume(tmp_path, capfd, monkeypatch):
    """The audit: a ~97-line traceback (Optuna's warning for the trial, then Python's)."""
    scored(monkeypatch, interrupt_at=3)  # trial 2, fold 1
    out = tmp_path / "study"
    argv = [*DIGITS, "--param", "margin=log:0.1:2", *QUICK, "--trials", "3", "--out", str(out)]
    assert main(argv) == 130
    err = capfd.readouterr().err.strip()
    assert err == (
        f"clusterable tune: interrupted: 1 of 3 trials kept in {out / study.STUDY_FILE}; run the "
        "same command again to resume (the interrupted trial runs again)"
    )
    scored(monkeypatch)
    assert main(argv) == 0
    printed = capfd.readouterr().out
    assert "1 interrupted one(s) run again" in printed and "trial 3/3" in printed
    assert "trial 4/3" not in printed
