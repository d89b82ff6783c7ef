"""The trainer's declared hooks: each is called at its point of the loop, with what it says."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from clusterable.data import load_dataset
from clusterable.losses import build_loss
from clusterable.models import build_model
from clusterable.train import TrainConfig, Trainer, TrainerCallback, embed_dataset


class Recorder(TrainerCallback):
    """Writes down every hook call with the trainer's counters at that moment."""

    metrics = ("recorded_metric",)

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def on_epoch_start(self, trainer: Trainer) -> None:
        self.calls.append(("epoch_start", trainer.epoch, trainer.step, None))

    def after_step(self, trainer: Trainer, loss: float) -> None:
        self.calls.append(("after_step", trainer.epoch, trainer.step, loss))

    def on_evaluate(self, trainer, embeddings, labels) -> dict[str, float]:
        self.calls.append(("evaluate", trainer.epoch, embeddings.copy(), labels.copy()))
        return {"recorded_metric": 0.5 + trainer.epoch / 10}


@pytest.fixture(scope="module")
def data():
    train = load_dataset("digits", split="train").subset(np.arange(200))
    val = load_dataset("digits", split="test").subset(np.arange(60))
    return train, val


def train_with(callbacks, data, out=None, **config):
    train, val = data
    torch.manual_seed(0)
    model = build_model("mlp", train.input_shape, 8)
    settings = {"epochs": 2, "batch_size": 40, "progress": False, **config}
    trainer = Trainer(
        model,
        build_loss("contrastive"),
        train,
        val,
        config=TrainConfig(**settings),
        out=out,
        callbacks=callbacks,
    )
    return trainer, trainer.fit()


def test_each_hook_is_called_at_its_point(data, tmp_path):
    recorder = Recorder()
    trainer, _ = train_with([recorder], data, out=tmp_path)
    steps_per_epoch = len(trainer.sampler)
    kinds = [call[0] for call in recorder.calls]
    one_epoch = ["epoch_start"] + ["after_step"] * steps_per_epoch + ["evaluate"]
    assert kinds == one_epoch * 2
    starts = [call for call in recorder.calls if call[0] == "epoch_start"]
    assert [(epoch, step) for _, epoch, step, _ in starts] == [(0, 0), (1, steps_per_epoch)]
    steps = [call for call in recorder.calls if call[0] == "after_step"]
    assert [step for _, _, step, _ in steps] == list(range(1, 2 * steps_per_epoch + 1))
    logged = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    step_losses = [record["loss"] for record in logged if record["event"] == "step"]
    assert [loss for *_, loss in steps] == step_losses  # the step's own loss value
    evaluations = [call for call in recorder.calls if call[0] == "evaluate"]
    assert [epoch for _, epoch, _, _ in evaluations] == [1, 2]  # after the epoch is counted


def test_evaluate_hook_sees_the_validation_embeddings_and_its_metrics_join_the_record(data):
    recorder = Recorder()
    trainer, result = train_with([recorder], data, epochs=1, eval_metric="recorded_metric")
    (_, _, embeddings, labels) = next(c for c in recorder.calls if c[0] == "evaluate")
    expected, expected_labels = embed_dataset(trainer.model, data[1])
    np.testing.assert_array_equal(labels, expected_labels)
    np.testing.assert_allclose(embeddings, expected, rtol=0, atol=0)
    assert result.history[0]["recorded_metric"] == pytest.approx(0.6)
    assert result.best_metric == pytest.approx(0.6)  # eval_metric may name a hook's metric


def test_callbacks_run_in_the_order_given(data):
    order = []

    class Named(TrainerCallback):
        def __init__(self, name: str) -> None:
            self.name = name

        def on_epoch_start(self, trainer: Trainer) -> None:
            order.append(self.name)

    train_with([Named("first"), Named("second")], data, epochs=1, eval_every=0)
    assert order == ["first", "second"]


def test_a_callback_that_replaces_the_train_set_gets_a_new_sampler(data):
    train, _ = data

    class KeepHalf(TrainerCallback):
        def on_epoch_start(self, trainer: Trainer) -> None:
            if trainer.epoch == 1:
                trainer.replace_train_set(train.subset(np.arange(100)))

    trainer, _ = train_with([KeepHalf()], data, eval_every=0)
    assert len(trainer.train_set) == 100
    assert np.isin(np.concatenate(list(trainer.sampler)), np.arange(100)).all()


def test_the_loop_takes_only_an_embedding_loss(data):
    train, _ = data
    model = build_model("mlp", train.input_shape, 8)
    with pytest.raises(TypeError, match="must be an EmbeddingLoss"):
        Trainer(model, torch.nn.MSELoss(), train)  # type: ignore[arg-type]
