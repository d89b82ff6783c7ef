"""The trainer: it learns, it resumes to the same result, it writes checkpoints atomically, the
large-batch trick gives the same step as the plain backward, and what it reads from its pieces
(the sampler's embeddings, the head's learning rate, an autoencoder loss's inputs) is declared."""

from __future__ import annotations

import json
from typing import ClassVar

import numpy as np
import pytest
import torch

from clusterable.data import LabelledDataset, load_dataset
from clusterable.evaluate import recall_at_k
from clusterable.losses import AutoencoderLoss, build_loss
from clusterable.mining import SAMPLERS, RandomBatchSampler, register_sampler
from clusterable.models import build_decoder, build_model
from clusterable.train import (
    TrainConfig,
    Trainer,
    TrainerCallback,
    embed_dataset,
    load_weights,
    resolve_checkpoint,
)
from clusterable.train.checkpoint import load_meta, load_state


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", split="train"), load_dataset("digits", split="test")


def make_model(dataset, dim=8, seed=0):
    torch.manual_seed(seed)
    return build_model("mlp", dataset.input_shape, dim)


def quiet(**kwargs) -> TrainConfig:
    """Quiet settings on the CPU, where these tests compare exact values with CPU references
    (tests/train/test_devices.py runs the loop on every device)."""
    return TrainConfig(progress=False, **{"device": "cpu", **kwargs})


def test_training_beats_the_untrained_model(digits):
    train, test = digits
    model = make_model(train)
    before = recall_at_k(*embed_dataset(model, test), ks=(1,))[1]
    config = quiet(epochs=4, batch_size=64, eval_every=0)
    Trainer(
        model, build_loss("lifted", num_classes=10, embedding_dim=8), train, config=config
    ).fit()
    after = recall_at_k(*embed_dataset(model, test), ks=(1,))[1]
    assert after > before + 0.1, (before, after)
    assert after > 0.85


class Killed(RuntimeError):
    pass


class KilledAfter(TrainerCallback):
    """The process dies at the start of epoch ``kill_at + 1``."""

    def __init__(self, kill_at: int) -> None:
        self.kill_at = kill_at

    def on_epoch_start(self, trainer: Trainer) -> None:
        if trainer.epoch == self.kill_at:
            raise Killed


def assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    """Every parameter and buffer of ``a`` and ``b`` equal bit for bit (a resumed run's test)."""
    for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def assert_resume_is_exact(run, out, kill_at: int):
    """``run(out, resume=False, callbacks=())`` -> ``(TrainResult, model)``: a run killed after
    epoch ``kill_at`` and resumed ends with the uninterrupted run's weights and losses; returns
    the uninterrupted ``(result, model)``."""
    whole, model_a = run(out / "a")
    with pytest.raises(Killed):
        run(out / "b", callbacks=[KilledAfter(kill_at)])
    resumed, model_b = run(out / "b", resume=True)
    assert_same_weights(model_a, model_b)
    assert [r["loss"] for r in whole.history] == [r["loss"] for r in resumed.history]
    return whole, model_a


@pytest.mark.parametrize("loss_name", ["cross-entropy", "triplet"])
def test_resume_continues_to_the_uninterrupted_result(digits, tmp_path, loss_name):
    train, test = digits
    train, val = train.subset(np.arange(0, 600)), test.subset(np.arange(0, 200))

    def run(out, resume=False, callbacks=()):
        model = make_model(train)
        loss = build_loss(loss_name, num_classes=10, embedding_dim=8)
        config = quiet(epochs=4, batch_size=32, eval_every=1)
        trainer = Trainer(model, loss, train, val, config=config, out=out, callbacks=callbacks)
        return trainer.fit(resume=resume), model, loss

    whole, model_a, loss_a = run(tmp_path / "a")
    with pytest.raises(Killed):
        run(tmp_path / "b", callbacks=[KilledAfter(2)])
    assert load_state(resolve_checkpoint(tmp_path / "b"))["epoch"] == 2
    resumed, model_b, loss_b = run(tmp_path / "b", resume=True)
    assert_same_weights(model_a, model_b)
    assert_same_weights(loss_a, loss_b)
    assert [r["loss"] for r in whole.history] == [r["loss"] for r in resumed.history]
    assert resumed.best_epoch == whole.best_epoch
    events = [json.loads(line)["event"] for line in (tmp_path / "b" / "log.jsonl").open()]
    assert "resume" in events


def test_checkpoints_are_complete_and_pruned(digits, tmp_path):
    train, test = digits
    config = quiet(epochs=4, batch_size=64, keep_checkpoints=1, eval_every=1, patience=None)
    trainer = Trainer(
        make_model(train),
        build_loss("contrastive", num_classes=10, embedding_dim=8),
        train,
        test.subset(np.arange(100)),
        config=config,
        out=tmp_path,
    )
    result = trainer.fit()
    root = tmp_path / "checkpoints"
    latest = resolve_checkpoint(tmp_path)
    assert latest.name == "epoch-0004"
    assert {p.name for p in latest.iterdir()} == {"weights.safetensors", "state.pt", "meta.json"}
    best = (root / "best").read_text().strip()
    kept = {p.name for p in root.iterdir() if p.is_dir()}
    assert kept == {"epoch-0004", best}, "old checkpoints must be pruned, best and latest kept"
    assert not [p for p in root.iterdir() if p.name.startswith(".")], "no temporary leftovers"
    assert result.checkpoint == root / best
    summary = json.loads((tmp_path / "result.json").read_text())
    assert summary["epochs_run"] == 4 and len(summary["history"]) == 4


def test_early_stopping_stops_after_patience(digits):
    train, test = digits
    trainer = Trainer(
        make_model(train),
        build_loss("contrastive", num_classes=10, embedding_dim=8),
        train.subset(np.arange(200)),
        test.subset(np.arange(100)),
        # lr 0 is refused (a run that trains nothing); 1e-30 moves no float32 weight either.
        config=quiet(epochs=50, batch_size=32, lr=1e-30, patience=2),
    )
    result = trainer.fit()
    assert result.epochs_run == 3, "an unchanged model never improves after the first evaluation"
    assert result.best_epoch == 1


def one_step_parameters(dataset, loss_name, chunk_size):
    model = make_model(dataset)
    loss = build_loss(loss_name, num_classes=10, embedding_dim=8).double()
    model = model.double()
    config = quiet(epochs=1, optimizer="sgd", momentum=0.0, lr=0.1, chunk_size=chunk_size)
    trainer = Trainer(model, loss, dataset, config=config)
    x = torch.from_numpy(np.asarray(dataset.x[:48])).double()
    y = torch.from_numpy(dataset.labels[:48])
    trainer.train_step(x, y)
    return [p.detach().clone() for p in [*model.parameters(), *loss.parameters()]]


@pytest.mark.parametrize("loss_name", ["spectral", "lifted", "cross-entropy"])
def test_large_batch_trick_gives_the_plain_step(digits, loss_name):
    train, _ = digits
    plain = one_step_parameters(train, loss_name, chunk_size=None)
    chunked = one_step_parameters(train, loss_name, chunk_size=7)
    for a, b in zip(plain, chunked, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_config_rejects_unknown_settings(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("epochs: 3\nlearning_rate: 0.1\n")
    with pytest.raises(ValueError, match=r"unknown training setting.*learning_rate"):
        TrainConfig.from_yaml(path)
    path.write_text("epochs: 3\nlr: 0.1\n")
    assert TrainConfig.from_yaml(path).lr == 0.1


def test_validation_can_be_the_classification_accuracy_alone():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 20)
    x = (rng.normal(size=(60, 4)) + 4.0 * np.eye(4)[labels]).astype(np.float32)
    data = LabelledDataset("blobs", x, labels)
    torch.manual_seed(0)
    model = build_model("mlp", (4,), 8)
    loss = build_loss("gaussian-corel", num_classes=3, embedding_dim=8)
    config = quiet(
        epochs=2,
        sampler="random",
        batch_size=16,
        eval_metric="classification_accuracy",
        eval_embeddings=False,
    )
    result = Trainer(model, loss, data, data, config=config).fit()
    assert set(result.history[-1]) == {"epoch", "loss", "classification_accuracy"}
    predicted = loss.predict(model(torch.from_numpy(x))).numpy()
    assert result.history[-1]["classification_accuracy"] == (predicted == labels).mean()


class EmbeddingsWatcher(RandomBatchSampler):
    """Random batches that declare they need embeddings and keep each set they are given."""

    requires_embeddings = True
    received: ClassVar[list[np.ndarray]] = []

    @classmethod
    def for_training(cls, labels, settings):
        return cls(len(labels), settings.batch_size, settings.seed)

    def update_embeddings(self, embeddings) -> None:
        type(self).received.append(np.array(embeddings))


class NeverGivenEmbeddings(EmbeddingsWatcher):
    requires_embeddings = False

    def update_embeddings(self, embeddings) -> None:
        raise AssertionError("a sampler that does not declare requires_embeddings got them")


class EmbeddingsAtEpochStart(TrainerCallback):
    """What the model embeds the train set to when each epoch starts."""

    def __init__(self) -> None:
        self.seen: list[np.ndarray] = []

    def on_epoch_start(self, trainer: Trainer) -> None:
        self.seen.append(embed_dataset(trainer.model, trainer.train_set)[0])


@pytest.mark.parametrize("sampler", [EmbeddingsWatcher, NeverGivenEmbeddings])
def test_a_sampler_gets_embeddings_before_each_epoch_only_if_it_declares_it(
    digits, monkeypatch, sampler
):
    monkeypatch.setattr(EmbeddingsWatcher, "received", [])
    train = digits[0].subset(np.arange(120))
    watch = EmbeddingsAtEpochStart()
    loss = build_loss("contrastive")
    with SAMPLERS.scratch():
        register_sampler("watcher")(sampler)
        config = quiet(epochs=3, batch_size=40, sampler="watcher", eval_every=0)
        Trainer(make_model(train), loss, train, config=config, callbacks=[watch]).fit()
    if sampler.requires_embeddings:
        assert len(EmbeddingsWatcher.received) == 3
        for given, current in zip(EmbeddingsWatcher.received, watch.seen, strict=True):
            np.testing.assert_array_equal(given, current)  # the model as the epoch starts
        assert not np.array_equal(EmbeddingsWatcher.received[0], EmbeddingsWatcher.received[2])
    else:
        assert EmbeddingsWatcher.received == []


def test_sampler_args_reach_the_sampler_and_survive_checkpoint_and_resume(digits, tmp_path):
    train = digits[0].subset(np.arange(400))

    def run(out, config, resume=False, callbacks=()):
        loss = build_loss("contrastive")
        trainer = Trainer(
            make_model(train), loss, train, config=config, out=out, callbacks=callbacks
        )
        return trainer, trainer.fit(resume=resume)

    config = quiet(
        epochs=3,
        batch_size=32,
        eval_every=0,
        sampler="pairs-hard-negatives",
        sampler_args={"pool_size": "24"},
    )
    assert config.sampler_args == {"pool_size": 24}  # typed against the sampler's constructor
    whole, whole_result = run(tmp_path / "a", config)
    assert whole.sampler.pool_size == 24
    with pytest.raises(Killed):
        run(tmp_path / "b", config, callbacks=[KilledAfter(2)])
    stored = load_meta(resolve_checkpoint(tmp_path / "b"))["config"]
    assert stored["sampler_args"] == {"pool_size": 24}
    resumed, resumed_result = run(tmp_path / "b", TrainConfig.from_dict(stored), resume=True)
    assert resumed.sampler.pool_size == 24
    assert [r["loss"] for r in resumed_result.history] == [r["loss"] for r in whole_result.history]


def one_sgd_step_deltas(dataset, head_lr_multiplier):
    model = make_model(dataset).double()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    config = quiet(optimizer="sgd", momentum=0.0, lr=0.01, head_lr_multiplier=head_lr_multiplier)
    trainer = Trainer(model, build_loss("lifted"), dataset, config=config)
    x = torch.from_numpy(np.asarray(dataset.x[:48])).double()
    trainer.train_step(x, torch.from_numpy(dataset.labels[:48]))
    return {name: p.detach() - before[name] for name, p in model.named_parameters()}


def test_the_head_gets_its_learning_rate_multiplier_through_the_declared_groups(digits):
    train, _ = digits
    plain = one_sgd_step_deltas(train, 1.0)
    lifted = one_sgd_step_deltas(train, 10.0)
    for name, delta in plain.items():
        factor = 10.0 if name.startswith("head.") else 1.0
        torch.testing.assert_close(lifted[name], factor * delta, rtol=1e-9, atol=1e-15)
    model = make_model(train)
    groups = model.parameter_groups(0.5, head_lr_multiplier=4.0)
    assert [g["lr"] for g in groups] == [0.5, 2.0]
    assert groups[1]["params"] == list(model.head.parameters())


def test_a_head_multiplier_without_a_declared_head_is_refused(digits):
    train, _ = digits
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 8))
    with pytest.raises(ValueError, match=r"head_lr_multiplier=10 needs .* EmbeddingNet"):
        Trainer(model, build_loss("lifted"), train, config=quiet(head_lr_multiplier=10.0))
    trainer = Trainer(model, build_loss("lifted"), train, config=quiet())
    assert [len(g["params"]) for g in trainer.optimizer.param_groups] == [2]


def autoencoder_loss(dataset, weight=0.5):
    torch.manual_seed(1)
    decoder = build_decoder("mlp", dataset.input_shape, 8)
    return AutoencoderLoss(build_loss("msdnn", sigma=2.0), decoder, weight=weight)


def test_large_batch_trick_gives_the_plain_step_with_an_autoencoder(digits):
    train, _ = digits
    steps = []
    for chunk_size in (None, 7):
        model = make_model(train).double()
        loss = autoencoder_loss(train).double()
        config = quiet(optimizer="sgd", momentum=0.0, lr=0.1, chunk_size=chunk_size)
        trainer = Trainer(model, loss, train, config=config)
        x = torch.from_numpy(np.asarray(train.x[:48])).double()
        value = trainer.train_step(x, torch.from_numpy(train.labels[:48]))
        steps.append(
            (value, [p.detach().clone() for p in [*model.parameters(), *loss.parameters()]])
        )
    (plain_value, plain), (chunked_value, chunked) = steps
    assert chunked_value == pytest.approx(plain_value, rel=1e-12)
    for a, b in zip(plain, chunked, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_the_autoencoder_step_trains_the_decoder_on_the_loss_plus_reconstruction(digits):
    train, _ = digits
    model, loss = make_model(train), autoencoder_loss(train)
    decoder_before = [p.detach().clone() for p in loss.decoder.parameters()]
    x, y = torch.from_numpy(np.asarray(train.x[:48])), torch.from_numpy(train.labels[:48])
    with torch.no_grad():
        embeddings = model(x)
        expected = loss.loss(embeddings, y) + 0.5 * ((loss.decoder(embeddings) - x) ** 2).mean()
    value = Trainer(model, loss, train, config=quiet()).train_step(x, y)
    assert value == pytest.approx(float(expected), rel=1e-6)
    for before, after in zip(decoder_before, loss.decoder.parameters(), strict=True):
        assert not torch.equal(before, after), "the decoder is in the optimiser"


def test_decoder_weights_survive_checkpoint_and_resume(digits, tmp_path):
    train, test = digits
    train, val = train.subset(np.arange(0, 400)), test.subset(np.arange(0, 100))

    def run(out, resume=False, callbacks=()):
        model, loss = make_model(train), autoencoder_loss(train)
        config = quiet(epochs=3, batch_size=40)
        trainer = Trainer(model, loss, train, val, config=config, out=out, callbacks=callbacks)
        return trainer.fit(resume=resume), model, loss

    whole, _, loss_a = run(tmp_path / "a")
    with pytest.raises(Killed):
        run(tmp_path / "b", callbacks=[KilledAfter(2)])
    resumed, _, loss_b = run(tmp_path / "b", resume=True)
    trained = list(loss_a.decoder.state_dict().values())
    for a, b in zip(trained, loss_b.decoder.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert [r["loss"] for r in whole.history] == [r["loss"] for r in resumed.history]
    fresh = autoencoder_loss(train)
    assert not torch.equal(fresh.decoder.state_dict()["0.weight"], trained[0])
    load_weights(resolve_checkpoint(tmp_path / "a"), make_model(train), fresh)
    for a, b in zip(trained, fresh.decoder.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_validation_set_with_query_and_gallery_roles_is_scored_by_them(digits):
    from clusterable.evaluate import evaluate_embeddings

    train, test = digits
    roles = test.replace(is_query=np.arange(len(test)) % 2 == 0)
    model = make_model(train)
    trainer = Trainer(model, build_loss("lifted"), train, roles, config=quiet(epochs=1))
    metrics = trainer.evaluate()
    emb, labels = embed_dataset(model, test)
    want = evaluate_embeddings(emb, labels, ks=(1, 2, 4, 8), queries=roles.is_query, seed=0)
    assert metrics == pytest.approx(want, abs=1e-12)
    assert metrics["map@r"] != pytest.approx(evaluate_embeddings(emb, labels)["map@r"], abs=1e-6)


@pytest.mark.parametrize("rank", [0, 1])
def test_only_the_main_process_shows_the_image_decoding_bar(digits, rank, monkeypatch):
    """Under torchrun every process decodes its training images; one bar shows, the main
    process's, as for the training's own bar."""
    from clusterable.train.distributed import Distributed

    monkeypatch.setattr(Trainer, "_distribute", lambda self, module: module)  # no group here
    train, _ = digits
    env = Distributed(rank=rank, world_size=2, device=torch.device("cpu"))
    config = TrainConfig(progress=True, device="cpu", epochs=1)
    loss = build_loss("lifted", num_classes=10, embedding_dim=8)
    trainer = Trainer(make_model(train), loss, train, config=config, env=env)
    assert trainer.batches.progress is (rank == 0)
    quiet_trainer = Trainer(make_model(train), loss, train, config=quiet(epochs=1), env=env)
    assert quiet_trainer.batches.progress is False


def test_a_diverging_run_stops_naming_lr_the_epoch_and_the_step(digits, tmp_path):
    """Embeddings gone NaN or inf after a step too large: a setting error of lr with where it
    happened, and the epochs before kept; items that hold NaN are named as the cause instead."""
    from clusterable._ranges import SettingError

    train, _ = digits
    config = quiet(epochs=2, batch_size=64, eval_every=0, lr=1e30, optimizer="sgd")
    loss = build_loss("lifted", num_classes=10, embedding_dim=8)
    with pytest.raises(SettingError, match=r"diverge at epoch 1, step \d+ \(the model gave") as e:
        Trainer(make_model(train), loss, train, config=config, out=tmp_path / "run").fit()
    assert (e.value.setting, e.value.value) == ("lr", 1e30)
    x = train.x.copy()
    x[:, 0] = np.nan
    poisoned = LabelledDataset("nan", x, train.labels)
    with pytest.raises(ValueError, match="step 1 holds NaN or inf items") as e:
        Trainer(make_model(train), loss, poisoned, config=quiet(epochs=1, eval_every=0)).fit()
    assert not isinstance(e.value, SettingError)
