"""Search spaces from --param flags and YAML: kinds, targets, and errors that say what to write."""

from __future__ import annotations

import pytest
import yaml
from optuna.distributions import IntDistribution
from test_cli_use import one_line_error  # tests/: one line, exit 2, no traceback
from test_study import CONFIG, SPEC, stored_trials

from clusterable.tune import Parameter, parse_parameter, parse_space, study, tune


def test_every_kind_and_target_from_the_command_line():
    assert parse_parameter("sigma=log:0.001:1000") == Parameter("sigma", "loss", "log", 1e-3, 1e3)
    assert parse_parameter("lr=float:1e-4:1e-2") == Parameter("lr", "train", "float", 1e-4, 1e-2)
    assert parse_parameter("epochs=int:5:30") == Parameter("epochs", "train", "int", 5, 30)
    assert parse_parameter("batch_size=logint:32:512") == Parameter(
        "batch_size", "train", "logint", 32, 512
    )
    assert parse_parameter("embedding_dim=choice:16,32") == Parameter(
        "embedding_dim", "run", "choice", choices=(16, 32)
    )
    # Numbers stay numbers (YAML 1.1 would read 1e-3 as text), words stay words.
    assert parse_parameter("lam=choice:1e-3,0.5,10").choices == (1e-3, 0.5, 10)
    assert parse_parameter("train.sampler=choice:random,class-balanced").choices == (
        "random",
        "class-balanced",
    )
    assert parse_parameter("loss.lr=float:1:2").target == "loss"  # the prefix decides
    assert parse_parameter("model.hidden_dims=choice:8,16").target == "model"


def test_the_yaml_form_gives_the_same_space():
    search = yaml.safe_load(
        "sigma: {log: [0.001, 1000]}\nlam: {choice: [0.1, 0.5, 1, 10]}\n"
        "batch_size: {logint: [32, 512]}\n"
    )
    assert parse_space(search) == [
        parse_parameter("sigma=log:0.001:1000"),
        parse_parameter("lam=choice:0.1,0.5,1,10"),
        parse_parameter("batch_size=logint:32:512"),
    ]


def test_a_log_integer_range_draws_whole_numbers_on_a_log_scale(tmp_path, monkeypatch):
    """There was no log-scale integer range: batch_size or embedding_dim over 32..512 searched
    as int spends most trials above 100, as log draws fractions the setting refuses."""
    monkeypatch.setattr(study, "_fold_score", lambda *a, **k: 0.5)
    space = [parse_parameter("embedding_dim=logint:4:64")]
    assert space[0].describe() == "embedding_dim logint [4, 64]"
    tune(SPEC, space, config=CONFIG, folds=2, trials=3, out=tmp_path, report=lambda line: None)
    for trial in stored_trials(tmp_path):
        assert trial.distributions == {"run.embedding_dim": IntDistribution(4, 64, log=True)}
        assert isinstance(trial.params["run.embedding_dim"], int)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sigma", "write NAME=log:LOW:HIGH"),
        ("sigma=log:0:1", "LOW > 0"),
        ("sigma=float:2:1", "LOW must be below HIGH"),
        ("sigma=float:1", "two numbers LOW and HIGH"),
        ("n=int:1.5:3", "whole numbers"),
        ("n=logint:0:8", "a logint range needs LOW >= 1"),
        ("n=logint:2:8.5", "a logint range needs whole numbers"),
        ("n=logint:8:8", "LOW must be below HIGH"),
        ("x=normal:0:1", "unknown kind 'normal'"),
        ("layers.width=choice:1,2", "train., run., loss. or model."),
    ],
)
def test_bad_parameters_say_what_to_write(text, message):
    with pytest.raises(ValueError, match=message):
        parse_parameter(text)


def test_a_yaml_entry_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match="search: sigma"):
        parse_space({"sigma": [0.1, 1]})


@pytest.mark.parametrize(
    "search", ["[lr, margin]", "3", "lr"], ids=["a-list", "a-number", "a-word"]
)
def test_a_search_that_is_no_mapping_is_a_one_line_error_naming_the_file(search, tmp_path, capsys):
    """The audit: `search: [lr, margin]` ended in an AttributeError traceback."""
    config = tmp_path / "run.yaml"
    config.write_text(f"data: digits\nloss: contrastive\nsearch: {search}\n")
    err = one_line_error(
        capsys, ["tune", "--config", str(config), "--out", str(tmp_path / "s")], "tune"
    )
    assert f"{config}: search: holds one NAME: {{KIND: [...]}} entry per searched setting" in err
    assert not (tmp_path / "s").exists()


def test_a_choice_of_lists_keeps_each_list_whole():
    """The audit: choice:[64],[128,64] was split at every comma, and "[128" ended in a YAML
    traceback."""
    parameter = parse_parameter("model.hidden_dims=choice:[64],[128,64]")
    assert parameter.choices == ([64], [128, 64])
    assert parameter.describe() == "hidden_dims in {[64], [128, 64]}"
    assert parse_parameter("model.hidden_dims=choice:[64").choices == (
        "[64",
    )  # its setting refuses it
