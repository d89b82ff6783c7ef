"""The fine-tuning recipe's settings: schedules, AdamW's groups, frozen BatchNorm, precision, the
learning rate in the log and on resume, an evaluation failure that keeps its epoch, workers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from test_trainer import assert_resume_is_exact  # tests/train: resume tests
from torch import nn

from clusterable.data import LabelledDataset, load_dataset
from clusterable.losses import build_loss
from clusterable.models import EmbeddingNet, build_model
from clusterable.train import TrainConfig, Trainer, TrainerCallback, resolve_checkpoint
from clusterable.train.optim import build_optimizer, build_scheduler, schedule_factor
from clusterable.train.precision import resolve_precision

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def digits():
    train = load_dataset("digits", split="train")
    return train.subset(np.arange(320)), load_dataset("digits", split="test").subset(np.arange(80))


def quiet(**kwargs) -> TrainConfig:
    return TrainConfig(progress=False, device="cpu", **kwargs)


def test_warmup_then_cosine_step_and_constant_follow_their_formulas():
    cosine = schedule_factor("cosine", total_steps=14, warmup_steps=4)
    assert [cosine(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert cosine(4) == 1.0
    assert cosine(9) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.5)))
    assert cosine(13) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.9)))
    step = schedule_factor("step", total_steps=10, warmup_steps=0)
    assert [step(s) for s in (0, 4, 5, 7, 8, 9)] == pytest.approx([1, 1, 0.1, 0.1, 0.01, 0.01])
    constant = schedule_factor("constant", total_steps=10, warmup_steps=2)
    assert [constant(s) for s in (0, 1, 2, 9)] == [0.5, 1.0, 1.0, 1.0]


def test_the_schedule_scales_each_group_and_keeps_the_head_multiplier():
    model = build_model("mlp", (4,), 2)
    groups = model.parameter_groups(0.1, head_lr_multiplier=10.0)
    optimizer = build_optimizer("sgd", groups, lr=0.1, weight_decay=0.0, momentum=0.9)
    scheduler = build_scheduler(optimizer, "cosine", total_steps=10, warmup_steps=2)
    seen = []
    for _ in range(10):
        seen.append([group["lr"] for group in optimizer.param_groups])
        optimizer.step()
        scheduler.step()
    factor = schedule_factor("cosine", 10, 2)
    for s, (backbone, head) in enumerate(seen):
        assert backbone == pytest.approx(0.1 * factor(s))
        assert head == pytest.approx(10 * backbone)
    assert optimizer.param_groups[0]["nesterov"]


def test_adamw_puts_no_decay_on_norms_and_biases():
    backbone = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.LayerNorm(16))
    model = EmbeddingNet(backbone, 16, 2)
    groups = model.parameter_groups(1e-3, 10.0)
    optimizer = build_optimizer("adamw", groups, lr=1e-3, weight_decay=0.05, momentum=0.9)
    assert isinstance(optimizer, torch.optim.AdamW)
    for group in optimizer.param_groups:
        ndims = {p.ndim for p in group["params"]}
        assert group["weight_decay"] == (0.05 if ndims != {1} else 0.0), ndims
    decayed = {id(p) for g in optimizer.param_groups if g["weight_decay"] for p in g["params"]}
    assert decayed == {id(backbone[0].weight), id(model.head.weight)}
    assert {g["lr"] for g in optimizer.param_groups} == {1e-3, 1e-2}


def bn_net(shape, seed=0):
    torch.manual_seed(seed)
    backbone = nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(shape)), 16), nn.BatchNorm1d(16))
    return EmbeddingNet(backbone, 16, 8)


def test_frozen_batchnorm_keeps_statistics_and_parameters_through_an_epoch(digits):
    train, _ = digits
    model = bn_net(train.input_shape)
    bn = model.backbone[2]
    with torch.no_grad():
        bn.running_mean.fill_(0.3)
        bn.weight.fill_(1.5)
    before = {k: v.clone() for k, v in bn.state_dict().items()}
    linear = model.backbone[1].weight.clone()
    config = quiet(epochs=1, batch_size=32, eval_every=0, freeze_batchnorm=True)
    Trainer(model, build_loss("contrastive"), train, config=config).fit()
    for key, value in bn.state_dict().items():
        torch.testing.assert_close(value, before[key], rtol=0, atol=0)
    assert not torch.equal(linear, model.backbone[1].weight), "the rest trains"
    assert not bn.training
    trained = bn_net(train.input_shape)
    Trainer(
        trained,
        build_loss("contrastive"),
        train,
        config=quiet(epochs=1, batch_size=32, eval_every=0),
    ).fit()
    assert not torch.equal(trained.backbone[2].running_mean, torch.zeros(16))


def test_freezing_batchnorm_of_a_model_without_any_is_refused(digits):
    train, _ = digits
    with pytest.raises(ValueError, match="no BatchNorm"):
        Trainer(
            build_model("mlp", train.input_shape, 8),
            build_loss("contrastive"),
            train,
            config=quiet(freeze_batchnorm=True),
        )


def test_precision_resolves_per_device_and_refuses_fp16_on_the_cpu():
    assert resolve_precision("auto", CPU) == "32"
    assert resolve_precision("bf16", CPU) == "bf16"
    assert resolve_precision("auto", CPU, amp=False) == "32"
    with pytest.raises(ValueError, match="precision='fp16' needs a CUDA device"):
        resolve_precision("fp16", CPU)
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(precision="fp8")


def test_bf16_autocast_trains_on_the_cpu(digits):
    train, _ = digits
    model = build_model("mlp", train.input_shape, 8)
    trainer = Trainer(
        model,
        build_loss("lifted"),
        train,
        config=quiet(epochs=1, batch_size=32, eval_every=0, precision="bf16"),
    )
    assert trainer.autocast_dtype == torch.bfloat16 and not trainer.scaler.is_enabled()
    result = trainer.fit()
    assert math.isfinite(result.history[-1]["loss"])


def test_the_old_names_amp_and_num_workers_still_read():
    config = TrainConfig.from_dict({"amp": False, "num_workers": 2})
    assert config.workers == 2 and not config.amp
    with pytest.raises(ValueError, match="old name"):
        TrainConfig(workers=1, num_workers=2)


def test_lr_is_in_every_step_record_and_resume_continues_the_schedule_bit_exactly(digits, tmp_path):
    train, val = digits

    def run(out, resume=False, callbacks=()):
        torch.manual_seed(0)
        model = build_model("mlp", train.input_shape, 8)
        config = quiet(
            epochs=4,
            batch_size=32,
            optimizer="adamw",
            weight_decay=0.05,
            schedule="cosine",
            warmup_epochs=0.5,
            head_lr_multiplier=10.0,
        )
        trainer = Trainer(
            model, build_loss("triplet"), train, val, config=config, out=out, callbacks=callbacks
        )
        return trainer.fit(resume=resume), model

    assert_resume_is_exact(run, tmp_path, kill_at=2)

    def lrs(out):
        records = [json.loads(line) for line in (out / "log.jsonl").open()]
        return {r["step"]: r["lr"] for r in records if r["event"] == "step"}

    steps = len(train) // 32
    a, b = lrs(tmp_path / "a"), lrs(tmp_path / "b")
    assert len(a) == 4 * steps and a == b
    factor = schedule_factor("cosine", 4 * steps, round(0.5 * steps))
    assert [a[s + 1] for s in range(4 * steps)] == pytest.approx(
        [1e-3 * factor(s) for s in range(4 * steps)]
    )


class FailingEvaluation(TrainerCallback):
    def on_evaluate(self, trainer, embeddings, labels):
        raise RuntimeError("the evaluation broke")


def test_a_failing_evaluation_keeps_the_trained_epoch(digits, tmp_path):
    train, val = digits
    trainer = Trainer(
        build_model("mlp", train.input_shape, 8),
        build_loss("contrastive"),
        train,
        val,
        config=quiet(epochs=2, batch_size=32),
        out=tmp_path,
        callbacks=[FailingEvaluation()],
    )
    with pytest.raises(RuntimeError, match="evaluation broke"):
        trainer.fit()
    assert resolve_checkpoint(tmp_path).name == "epoch-0001"


def test_image_files_load_in_workers_and_memory_in_the_main_process(digits):
    from clusterable.train.loading import default_workers

    train, _ = digits
    assert default_workers(train, None) == 0
    assert default_workers(train, 3) == 3


def test_an_unreadable_image_is_named_by_the_error_from_a_worker(tmp_path):
    from PIL import Image

    from clusterable.data import ImageFiles

    paths = []
    for i in range(4):
        path = tmp_path / f"{i}.png"
        Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(path)
        paths.append(path)
    paths[2].write_bytes(b"not an image")
    data = LabelledDataset("broken", ImageFiles(paths, 8), [0, 0, 1, 1])
    config = quiet(epochs=1, batch_size=4, items_per_class=2, eval_every=0, workers=1)
    trainer = Trainer(
        build_model("mlp", data.input_shape, 4), build_loss("contrastive"), data, config=config
    )
    with pytest.raises(ValueError, match=r"2\.png"):
        trainer.fit()
