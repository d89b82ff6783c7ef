"""The Trainer with a cross-batch memory: the queue is in every checkpoint, so a killed and
resumed run ends where the uninterrupted run ends; ``train --memory-size`` builds it."""

from __future__ import annotations

import json

import numpy as np
import torch
from test_trainer import assert_same_weights  # tests/train: resume tests

from clusterable.cli import main
from clusterable.data import load_dataset
from clusterable.losses import CrossBatchMemory, build_loss
from clusterable.models import build_model
from clusterable.recipe import load_trained
from clusterable.train import TrainConfig, Trainer, TrainerCallback, resolve_checkpoint
from clusterable.train.checkpoint import load_state

DIM = 8


class Killed(RuntimeError):
    pass


class KilledAfterTwoEpochs(TrainerCallback):
    def on_epoch_start(self, trainer: Trainer) -> None:
        if trainer.epoch == 2:
            raise Killed


def run(trainer_class, train, val, out, resume=False, callbacks=()):
    torch.manual_seed(0)
    model = build_model("mlp", train.input_shape, DIM)
    loss = CrossBatchMemory(build_loss("lifted", num_classes=10, embedding_dim=DIM), 200, DIM)
    config = TrainConfig(epochs=4, batch_size=32, eval_every=1, progress=False)
    trainer = trainer_class(model, loss, train, val, config=config, out=out, callbacks=callbacks)
    return trainer.fit(resume=resume), model, loss


def test_resume_with_memory_continues_to_the_uninterrupted_result(tmp_path):
    train = load_dataset("digits", split="train").subset(np.arange(0, 480))
    val = load_dataset("digits", split="test").subset(np.arange(0, 160))
    whole, model_a, memory_a = run(Trainer, train, val, tmp_path / "a")
    try:
        run(Trainer, train, val, tmp_path / "b", callbacks=[KilledAfterTwoEpochs()])
    except Killed:
        pass
    assert load_state(resolve_checkpoint(tmp_path / "b"))["epoch"] == 2
    resumed, model_b, memory_b = run(Trainer, train, val, tmp_path / "b", resume=True)
    assert len(memory_a) == 200
    assert_same_weights(model_a, model_b)
    assert_same_weights(memory_a, memory_b)
    assert [r["loss"] for r in whole.history] == [r["loss"] for r in resumed.history]


def test_resume_without_the_saved_queue_would_differ(tmp_path):
    """The check above can fail: an emptied queue after the kill changes the resumed run."""

    class EmptiedOnResume(Trainer):
        def _resume(self) -> None:
            super()._resume()
            self.loss.reset()

    train = load_dataset("digits", split="train").subset(np.arange(0, 480))
    val = load_dataset("digits", split="test").subset(np.arange(0, 160))
    whole, _, _ = run(Trainer, train, val, tmp_path / "a")
    try:
        run(Trainer, train, val, tmp_path / "b", callbacks=[KilledAfterTwoEpochs()])
    except Killed:
        pass
    resumed, _, _ = run(EmptiedOnResume, train, val, tmp_path / "b", resume=True)
    assert [r["loss"] for r in whole.history] != [r["loss"] for r in resumed.history]


def test_train_memory_size_flag_builds_and_saves_the_memory(tmp_path):
    out = tmp_path / "run"
    arguments = ["train", "--data", "digits", "--loss", "contrastive", "--embedding-dim", "8"]
    arguments += ["--memory-size", "96", "--epochs", "1", "--batch-size", "32"]
    assert main([*arguments, "--no-progress", "--out", str(out)]) == 0
    assert json.loads((out / "run.json").read_text())["spec"]["memory_size"] == 96
    _, loss, spec, *_ = load_trained(out)
    assert isinstance(loss, CrossBatchMemory) and spec.memory_size == 96
    assert len(loss) == 96  # the saved queue came back full


def test_memory_size_in_a_yaml_run_file(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        "data: digits\nloss: snn\nembedding_dim: 8\nmemory_size: 64\n"
        "train:\n  epochs: 1\n  batch_size: 32\n  progress: false\n"
    )
    out = tmp_path / "run"
    assert main(["train", "--config", str(config), "--out", str(out)]) == 0
    _, loss, *_ = load_trained(out)
    assert isinstance(loss, CrossBatchMemory) and loss.memory_size == 64
