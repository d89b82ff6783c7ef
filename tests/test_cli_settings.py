"""The command line's flags: run flags generated from the RunSpec/TrainConfig fields, the flags of
earlier releases kept, and the settings a command names (file, then flags)."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

import pytest
import yaml

from clusterable.cli import build_parser, main
from clusterable.cli._settings import NOT_FLAGS, field_comments, given_settings, run_flags
from clusterable.recipe import RunSpec
from clusterable.train.config import TrainConfig

#: Every flag of each verb before the command line became a package (`clusterable VERB --help`),
#: hidden aliases included: none may go.
FLAGS_BEFORE = {
    "demo": "--device --seed --out --quick",
    "train": "--seed --config --data --root --label-view --image-size --channels --loss "
    "--loss-arg --model --model-arg --embedding-dim --normalize --memory-size --autoencoder "
    "--unsupervised --val-fraction --epochs --batch-size --lr --sampler --items-per-class "
    "--chunk-size --patience --device --set --out --resume --overwrite --no-progress --report "
    "--no-report",
    "tune": "--seed --config --data --root --label-view --image-size --channels --loss "
    "--loss-arg --model --model-arg --embedding-dim --normalize --memory-size --autoencoder "
    "--unsupervised --val-fraction --epochs --batch-size --lr --sampler --items-per-class "
    "--chunk-size --patience --device --set --param --trials --folds --protocol --metric --out",
    "evaluate": "--device --seed --data --root --split --clustering --n-clusters --ks --json",
    "embed": "--device --seed --data --root --split --out",
    "cluster": "--device --seed --clustering --n-clusters --method --k --labels --out --save",
    "plot": "--seed --data --root --split --out",
    "index": "--device --seed --data --split --root --out --kind --metric --target-recall",
    "search": "--device --seed -k --run --json",
    "assign": "--device --seed --out --json",
    "classify": "--device --seed --split -k --weighting --method --max-distance --run --output",
    "report": "--seed --out --embeddings --labels",
    "cache": "",
    "export": "--seed --format --out",
    "reproduce": "--device --seed --quick --full --seeds --from-json --out",
}


def verb_parsers() -> dict:
    return build_parser()._subparsers._group_actions[0].choices


def option_strings(parser) -> set[str]:
    return {name for action in parser._actions for name in action.option_strings}


def test_every_flag_of_earlier_releases_is_still_there():
    verbs = verb_parsers()
    assert list(verbs) == list(FLAGS_BEFORE)
    for verb, names in FLAGS_BEFORE.items():
        assert set(names.split()) <= option_strings(verbs[verb]), verb


@pytest.mark.parametrize("verb", ["train", "tune"])
def test_every_run_setting_is_a_flag_with_help(verb):
    parser = verb_parsers()[verb]
    by_dest = {action.dest: action for action in parser._actions}
    for cls in (RunSpec, TrainConfig):
        for f in fields(cls):
            if f.name in NOT_FLAGS:
                continue
            assert f.name in by_dest, f"{cls.__name__}.{f.name} has no flag"
            assert by_dest[f.name].help and by_dest[f.name].help != f.name.replace("_", " ")


def test_dict_fields_are_repeatable_name_value_flags():
    keywords = [flag for flag in run_flags() if flag.is_keywords]
    assert {flag.name for flag in keywords} >= {"loss_args", "model_args", "sampler_args"}
    assert {flag.flag for flag in keywords} >= {"--loss-arg", "--model-arg", "--sampler-arg"}


# fmt: off
@dataclass
class Settings:
    plain: int = 1  # a trailing comment
    wrapped: str = (
        "long"  # a comment inside the wrapping (as ruff format wraps a long line)
    )
    continued: float = 0.5  # a comment
    # that goes on below
    bare: int = 2

    lone: int = 3  # its own comment
# fmt: on


def test_field_comments_are_read_from_the_source():
    assert field_comments(Settings) == {
        "plain": "a trailing comment",
        "wrapped": "a comment inside the wrapping (as ruff format wraps a long line)",
        "continued": "a comment that goes on below",
        "lone": "its own comment",
    }


def test_help_is_the_field_comment_with_its_default_and_choices(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--val-fraction VAL_FRACTION share of each training class held out" in text
    assert "(default: 0.1)" in text
    assert "--optimizer {" in text and "--sampler {" in text and "--channels {1,3}" in text
    assert "--freeze-batchnorm, --no-freeze-batchnorm" in text


def test_the_resume_help_names_every_setting_a_resume_may_change():
    from clusterable.train.run_folder import CHANGEABLE_ON_RESUME

    train = verb_parsers()["train"]
    (resume,) = [action for action in train._actions if "--resume" in action.option_strings]
    named = set(re.findall(r"--[a-z][\w-]*", resume.help))
    changeable = {"--" + name.replace("_", "-") for name in CHANGEABLE_ON_RESUME}
    changeable &= option_strings(train)
    # --num-workers is the old name of --workers; --report is train's own output flag, and --out
    # the run resumed.
    assert changeable - {"--num-workers"} <= named
    assert named <= changeable | {"--report", "--out"}


def parsed(argv: list[str]):
    return build_parser().parse_args(argv)


def test_flags_override_the_file_and_keywords_merge(tmp_path):
    config = tmp_path / "run.yaml"
    run = {"loss": "triplet", "loss_args": {"margin": 0.2, "mining": "all"}, "train": {"lr": 0.1}}
    config.write_text(yaml.safe_dump(run))
    args = parsed(
        ["train", "--config", str(config), "--loss-arg", "margin=0.5", "--lr", "1e-2"]
        + ["--sampler-arg", "pool_size=4", "--no-progress", "--set", "epochs=3"]
    )
    spec, train = given_settings(args)
    assert spec == {"loss": "triplet", "loss_args": {"margin": 0.5, "mining": "all"}}
    assert train == {"lr": 0.01, "sampler_args": {"pool_size": 4}, "progress": False, "epochs": 3}


def test_flags_not_given_are_not_settings():
    assert given_settings(parsed(["train"])) == ({}, {})
    spec, train = given_settings(parsed(["train", "--label-view", "coarse", "--normalize"]))
    assert spec == {"labels": "coarse", "normalize": True} and train == {}


def test_a_value_of_the_wrong_type_names_its_setting(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["train", "--lr", "fast"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--lr" in err and "lr='fast' is not a float" in err


def test_a_keyword_without_a_value_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--sampler-arg", "pool_size"])
    assert "--sampler-arg takes name=value" in capsys.readouterr().err
