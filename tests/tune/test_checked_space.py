"""tune checks, before any trial, every value its space can draw: inside a range as well as at its
ends, and values that are refused together as well as alone."""

from __future__ import annotations

import itertools

import pytest
from test_cli_use import one_line_error  # tests/: one line, exit 2, no traceback

from clusterable.tune import parse_parameter, study

DIGITS = ["tune", "--data", "digits", "--loss", "contrastive", "--embedding-dim", "8"]
QUICK = ["--epochs", "1", "--folds", "2", "--batch-size", "60", "--items-per-class", "6"]


def refused(capsys, monkeypatch, tmp_path, flags):
    """The one-line error of a search of ``flags``, which trains nothing and leaves no folder."""
    monkeypatch.setattr(study, "_fold_score", lambda *a, **k: pytest.fail("trained"))
    out = tmp_path / "study"
    err = one_line_error(
        capsys, [*DIGITS, *QUICK, *flags, "--trials", "2", "--out", str(out)], "tune"
    )
    assert not out.exists()
    return err


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--param", "batch_size=int:16:32"], "batch_size=17"),
        (["--param", "batch_size=int:16:200"], "batch_size=17"),
        (["--batch-size", "16", "--param", "batch_size=int:12:400"], "batch_size=13"),
    ],
    ids=["short-range", "long-range", "long-range-from-its-low-end"],
)
def test_a_range_whose_inside_the_sampler_refuses_is_refused_before_any_trial(
    flags, words, capsys, monkeypatch, tmp_path
):
    """The audit: both ends of batch_size=int:16:32 are multiples of 4, as the
    pairs-hard-negatives sampler needs, and the search failed in the trial that drew 25."""
    err = refused(capsys, monkeypatch, tmp_path, ["--sampler", "pairs-hard-negatives", *flags])
    assert f"the search can draw {words}, which train refuses" in err, err
    assert "multiple of 4" in err


@pytest.mark.parametrize(
    ("param", "advice"),
    [
        ("batch_size=float:16:64", "search it as int:16:64 (YAML {int: [16, 64]})"),
        ("embedding_dim=log:8:64", "search it as logint:8:64 (YAML {logint: [8, 64]})"),
        ("epochs=log:1:3", "search it as logint:1:3"),
    ],
)
def test_a_float_range_of_a_whole_number_setting_says_to_search_integers(
    param, advice, capsys, monkeypatch, tmp_path
):
    """The audit: both ends are whole numbers and pass; the first trial drew 42.34 and failed
    with "--batch-size 42.34 is not a int" (a flag the user never gave), leaving study.db."""
    err = refused(capsys, monkeypatch, tmp_path, ["--param", param])
    name = param.split("=")[0]
    assert f"which {name} refuses: it takes whole numbers" in err and advice in err, err


def test_a_long_integer_range_is_checked_at_consecutive_values_of_each_end():
    values = study._checked_values(parse_parameter("batch_size=int:16:512"))
    assert values[: study._END_VALUES] == list(range(16, 16 + study._END_VALUES))
    assert values[-study._END_VALUES :] == list(range(513 - study._END_VALUES, 513))
    assert len(values) <= 2 * study._END_VALUES + study._SPREAD_VALUES
    assert study._checked_values(parse_parameter("batch_size=int:16:40")) == list(range(16, 41))


def test_a_long_log_integer_range_is_checked_on_its_log_scale():
    """Its inside is checked where it draws: as many values in each decade."""
    values = study._checked_values(parse_parameter("batch_size=logint:1:10000"))
    assert values[: study._END_VALUES] == list(range(1, 1 + study._END_VALUES))
    spread = values[study._END_VALUES : -study._END_VALUES]
    decades = [sum(low < v <= 10 * low for v in spread) for low in (10, 100, 1000)]
    assert min(decades) >= 3, values


@pytest.mark.parametrize(
    ("low", "high", "log"),
    [(16, 64, False), (1, 100, True), (3.8, 4.2, False), (4, 6, False), (0.1, 0.3, False)],
)
def test_a_float_range_is_checked_at_a_fraction_inside_it(low, high, log):
    inside = study._fraction_inside(low, high, log)
    assert low < inside < high and not inside.is_integer()


def test_pairwise_combinations_hold_every_pair_of_values_in_few_combinations():
    values = [list(range(12)), list("abcde"), [0.1, 0.5, 2.0], [True, False], ["x"]]
    combinations = study._pairwise_combinations(values)
    for i, j in itertools.combinations(range(len(values)), 2):
        held = {(c[i], c[j]) for c in combinations}
        assert held == set(itertools.product(values[i], values[j])), (i, j)
    assert len(combinations) < len(list(itertools.product(*values))) // 4


def test_values_refused_together_are_refused_in_a_space_of_many_combinations(
    capsys, monkeypatch, tmp_path
):
    """The audit: above 32 corners each value was checked alone, with the others as the command
    gave them: batch_size=8 passes beside --items-per-class 2, items_per_class=6 beside
    --batch-size 60, and the trial that drew both failed (one class of 8 items per batch)."""
    space = [
        "batch_size=choice:8,60",
        "items_per_class=int:2:6",
        "margin=log:0.1:2",
        "lr=choice:1e-3,2e-3,3e-3",
        "epochs=int:1:30",
    ]
    flags = ["--items-per-class", "2", *(f for p in space for f in ("--param", p))]
    checked = [study._checked_values(parse_parameter(p)) for p in space]
    assert len(list(itertools.product(*checked))) > study._MOST_COMBINATIONS
    err = refused(capsys, monkeypatch, tmp_path, flags)
    assert "the search can draw batch_size=8, items_per_class=" in err, err
    assert "give items_per_class at most 4" in err


@pytest.mark.parametrize(
    "flags",
    [
        ["--param", "margin=log:0.1:1", "--param", "loss.margin=float:0.2:2"],
        ["--param", "lr=log:1e-4:1e-2", "--param", "train.lr=choice:0.001,0.01"],
    ],
    ids=["kinds-differ", "prefix-and-none"],
)
def test_a_setting_searched_twice_is_refused_before_any_trial(flags, capsys, monkeypatch, tmp_path):
    """The audit: margin=log and loss.margin=float failed in the first trial ("Cannot set
    different log configuration"); lr and train.lr of one kind searched the first range alone."""
    err = refused(capsys, monkeypatch, tmp_path, flags)
    assert "is searched twice" in err and "give each setting one range or choice" in err, err


@pytest.mark.parametrize(
    ("metric", "words"),
    [
        ("knn@5000", "a fold has 629 training items; use --metric knn@629 or lower"),
        ("recall@5000", "a fold has 628 other held-out items; use --metric recall@628 or lower"),
    ],
)
def test_a_metric_of_more_neighbours_than_a_fold_holds_is_refused_before_any_trial(
    metric, words, capsys, monkeypatch, tmp_path
):
    """The audit: both failed after training the first fold ("k = 5000 but only 629 candidate
    neighbour(s) exist"), leaving a failed trial in study.db."""
    err = refused(
        capsys, monkeypatch, tmp_path, ["--param", "margin=log:0.1:2", "--metric", metric]
    )
    assert f"metric {metric} needs 5000 neighbours, but {words}" in err, err
