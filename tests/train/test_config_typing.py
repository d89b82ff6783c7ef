"""Settings are typed against what receives them, and checked before anything trains."""

from __future__ import annotations

import json

import pytest

from clusterable.cli import main
from clusterable.train import TrainConfig

QUICK = ["--data", "digits", "--embedding-dim", "8", "--batch-size", "60", "--no-progress"]


def test_exponent_notation_is_a_float_in_loss_args_set_and_yaml(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("loss: contrastive\ntrain:\n  lr: 1e-3\n  weight_decay: 1e-5\n")
    out = tmp_path / "run"
    argv = ["train", "--config", str(config), *QUICK, "--epochs", "1", "--out", str(out)]
    argv += ["--loss-arg", "margin=1e-1", "--set", "momentum=9e-1"]
    assert main(argv) == 0
    record = json.loads((out / "run.json").read_text())
    assert record["spec"]["loss_args"] == {"margin": 0.1}
    assert record["config"]["lr"] == 1e-3 and record["config"]["weight_decay"] == 1e-5
    assert record["config"]["momentum"] == 0.9


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--set", "lr=fast"], ["--set lr=fast", "float"]),
        (["--set", "epochs=2.5"], ["--set epochs=2.5", "int"]),
        (["--set", "grad_clip=often"], ["--set grad_clip=often", "float"]),
        (["--loss-arg", "margin=wide"], ["--loss-arg margin=wide", "float"]),
    ],
    ids=["lr-text", "epochs-fraction", "optional-float", "loss-arg"],
)
def test_a_setting_of_the_wrong_type_fails_before_the_run_folder_is_written(
    tmp_path, capsys, extra, words
):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *QUICK, "--loss", "contrastive", "--out", str(out), *extra])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert all(word in err for word in words) and err.count("\n") == 1, err
    assert not out.exists() or not any(out.iterdir())


def test_train_config_types_its_fields_whoever_builds_it():
    config = TrainConfig(lr="1e-3", epochs="4", grad_clip="none", amp="false")
    assert (config.lr, config.epochs, config.grad_clip, config.amp) == (1e-3, 4, None, False)
    with pytest.raises(ValueError, match="batch_size"):
        TrainConfig(batch_size=True)


def test_sampler_args_are_typed_and_checked_when_the_config_is_made(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("sampler: pairs-hard-negatives\nsampler_args:\n  pool_size: none\n")
    assert TrainConfig.from_yaml(path).sampler_args == {"pool_size": None}
    assert TrainConfig(sampler="random", sampler_args={"drop_last": "yes"}).sampler_args == {
        "drop_last": True
    }
    with pytest.raises(
        ValueError,
        match="sampler 'random' takes no argument pool_size; its arguments are: drop_last",
    ):
        TrainConfig(sampler="random", sampler_args={"pool_size": 8})
    with pytest.raises(
        ValueError, match="sampler 'pairs-hard-negatives' argument pool_size='many'"
    ):
        TrainConfig(sampler="pairs-hard-negatives", sampler_args={"pool_size": "many"})
    with pytest.raises(ValueError, match="gets batch_size from the training run"):
        TrainConfig(sampler_args={"batch_size": 8})
    with pytest.raises(ValueError, match="sampler='hard' is not one of random"):
        TrainConfig(sampler="hard")


def test_a_value_outside_a_settings_choices_names_the_choices():
    with pytest.raises(
        ValueError, match="cache_images='bogus' is not one of 'auto', 'none', 'ram'"
    ):
        TrainConfig(cache_images="bogus")
    assert TrainConfig(cache_images="ram").cache_images == "ram"
