"""The run files of configs/: each, read as ``clusterable train --config FILE --root DIR
--model-arg weights=PATH`` reads it, is a valid RunSpec and TrainConfig holding the standard
fine-tuning recipe (nothing is trained: the backbones need torchvision or timm and weights)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

from clusterable.cli._settings import add_run_flags, given_settings
from clusterable.data import available_datasets
from clusterable.data.transforms import backbone_preprocessing
from clusterable.losses import build_loss
from clusterable.recipe import RunSpec
from clusterable.train import TrainConfig

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


def read_run_file(path: Path, *flags: str) -> tuple[RunSpec, TrainConfig]:
    """The settings ``clusterable train --config path *flags`` trains with."""
    parser = add_run_flags(argparse.ArgumentParser())
    spec, train = given_settings(parser.parse_args(["--config", str(path), *flags]))
    return RunSpec.from_dict(spec), TrainConfig.from_dict(train)


def a_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """16 embeddings of 512 dimensions, 4 classes of 4."""
    generator = torch.Generator().manual_seed(0)
    return torch.randn(16, 512, generator=generator), torch.arange(4).repeat_interleave(4)


def test_there_is_a_run_file_for_each_retrieval_benchmark():
    assert {path.stem for path in CONFIGS} >= {"cub200", "cars196", "sop", "inshop"}


@pytest.mark.parametrize("path", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_a_run_file_is_the_standard_recipe_given_root_and_weights(path, tmp_path):
    weights = tmp_path / "backbone.safetensors"
    spec, config = read_run_file(path, "--root", str(tmp_path), "--model-arg", f"weights={weights}")
    assert spec.data in available_datasets() and spec.root == str(tmp_path)
    assert spec.val_fraction == 0.0  # the zero-shot protocol trains on every training class
    assert spec.model.partition(":")[0] in ("torchvision", "timm")
    assert spec.model_args == {"weights": str(weights)}  # the flag overrides the file's path
    assert (spec.image_size or backbone_preprocessing(spec.model).size) == 224
    assert spec.augment == "standard" and spec.embedding_dim == 512 and spec.normalize
    loss = build_loss(spec.loss, num_classes=100, embedding_dim=512, **spec.loss_args)
    assert loss(*a_batch()).isfinite()
    assert (config.optimizer, config.schedule, config.sampler) == (
        "adamw",
        "cosine",
        "class-balanced",
    )
    assert config.warmup_epochs > 0 and 0 < config.lr <= 1e-4 and config.weight_decay > 0
    assert config.batch_size % config.items_per_class == 0 and config.epochs >= 30


@pytest.mark.parametrize("path", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_without_the_flag_a_run_file_names_a_weights_file(path):
    spec, _ = read_run_file(path)
    assert Path(spec.model_args["weights"]).suffix in (".pth", ".safetensors")


def test_a_relative_weights_path_is_kept_absolute_so_a_later_resume_or_evaluation_finds_it(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    spec = RunSpec(model="torchvision:resnet50", model_args={"weights": "weights/r50.pth"})
    assert spec.model_args == {"weights": str(tmp_path / "weights" / "r50.pth")}
    assert RunSpec(model="mlp").model_args == {}  # nothing added where none was named
