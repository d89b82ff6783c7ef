"""The user's audit of `clusterable tune`: a searched batch setting says the batches a
class-balanced sampler trained, a search sets only the run settings it may, a searched device is
checked before any trial, a refused resume names the settings that differ, and a choice of
mappings keeps each whole."""

from __future__ import annotations

import pytest
import torch
import yaml
from test_cli_use import one_line_error  # tests/: one line, exit 2, no traceback
from test_study import CONFIG, SPEC

from clusterable.cli import main
from clusterable.tune import parse_parameter, study, tune


def unscored(monkeypatch):
    """Folds scored without training: the batch size trained, as a score."""

    def fold_score(spec, config, train, fit_rows, held_rows, metric, seed):
        return float(config.batch_sampler(train.labels[fit_rows]).batch_size)

    monkeypatch.setattr(study, "_fold_score", fold_score)


def test_a_searched_batch_size_says_the_batches_the_sampler_trained(tmp_path, monkeypatch):
    """The audit: `batch_size=77` was reported, searched and written while the class-balanced
    sampler trained digits' 10 classes x 7 items, 70 (77 and 78 trained alike)."""
    unscored(monkeypatch)
    lines: list[str] = []
    space = [parse_parameter("batch_size=choice:77")]
    result = tune(SPEC, space, config=CONFIG, folds=2, trials=1, out=tmp_path, report=lines.append)
    assert "batch_size=77 (trained batches of 10 classes x 7 items, 70) -> map@r 70" in lines[1]
    assert result.batches == "10 classes x 7 items, 70" and result.best_score == 70
    written = (tmp_path / study.BEST_FILE).read_text()
    assert "batches of 10 classes x 7 items, 70" in written.splitlines()[2]
    assert yaml.safe_load(written)["train"]["batch_size"] == 77  # trains the same 70


def test_a_search_of_batches_the_sampler_keeps_says_nothing_more(tmp_path, monkeypatch):
    unscored(monkeypatch)
    lines: list[str] = []
    space = [parse_parameter("batch_size=choice:60")]  # 10 classes x 6 items
    result = tune(SPEC, space, config=CONFIG, folds=2, trials=1, report=lines.append)
    assert "batch_size=60 -> " in lines[1] and result.batches is None


def test_the_summary_says_the_batches_trained(tmp_path, capsys, monkeypatch):
    unscored(monkeypatch)
    argv = ["tune", "--data", "digits", "--loss", "contrastive", "--embedding-dim", "8"]
    flags = ["--items-per-class", "6", "--param", "batch_size=choice:77", "--folds", "2"]
    assert main([*argv, *flags, "--trials", "1", "--out", str(tmp_path / "s")]) == 0
    best = capsys.readouterr().out.splitlines()[-2]
    assert best.startswith("best: batch_size=77 (batches of 10 classes x 7 items, 70) (map@r")


@pytest.mark.parametrize("name", ["run.data", "run.loss", "run.model", "run.unsupervised"])
def test_a_search_of_the_runs_pieces_is_refused(name):
    """The audit: `--param run.loss=choice:lifted` searched another loss with the given loss's
    arguments, `run.data` wrote other data into best.yaml than the folds scored."""
    with pytest.raises(ValueError, match=f"^{name}: a search sets only the run settings"):
        parse_parameter(f"{name}=choice:x")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_searched_device_this_machine_lacks_is_refused_before_any_trial(
    tmp_path, capsys, monkeypatch
):
    """The audit: `--param device=choice:cpu,cuda` ran trials until one drew cuda and failed."""
    unscored(monkeypatch)
    argv = ["tune", "--data", "digits", "--loss", "contrastive", "--embedding-dim", "8"]
    out = tmp_path / "s"
    err = one_line_error(
        capsys, [*argv, "--param", "device=choice:cpu,cuda", "--out", str(out)], "tune"
    )
    assert "the search can draw device=cuda, which train refuses: device 'cuda'" in err
    assert not out.exists()


def test_a_resume_with_other_settings_names_them(tmp_path, monkeypatch):
    """The audit: `holds a search with other settings (config differ)` named no flag."""
    unscored(monkeypatch)
    space = [parse_parameter("margin=log:0.1:2")]
    tune(SPEC, space, config=CONFIG, folds=2, trials=1, out=tmp_path, report=lambda line: None)
    other = CONFIG.__class__(**{**CONFIG.to_dict(), "lr": 0.01})
    with pytest.raises(ValueError, match=r"lr 0\.001 in the search, 0\.01 given\): give the same"):
        tune(SPEC, space, config=other, folds=2, trials=1, out=tmp_path, report=lambda line: None)
    with pytest.raises(ValueError, match=r"\(metric differ\)"):
        tune(SPEC, space, config=CONFIG, folds=2, trials=1, out=tmp_path, metric="nmi")


def test_a_choice_of_mappings_keeps_each_whole():
    parameter = parse_parameter("train.sampler_args=choice:{pool_size: 6, a: 1},{}")
    assert parameter.choices == ({"pool_size": 6, "a": 1}, {})
