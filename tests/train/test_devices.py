"""The training loop, the embedding of a set and its evaluation run on the run's device: on the
CPU, and on CUDA where torch sees a GPU (the ``device`` fixture of tests/conftest.py).

Where the work ran is asserted, not only its values: the device of the model's inputs, the device
the validation hands `evaluate_embeddings`, and the device k-means' Lloyd iterations were sent to
(spied on, and run on the CPU, so that a machine without a GPU can check a run that would send
them to one). Values on CUDA are compared with the CPU's within tolerances (other kernels, other
rounding), never exactly."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from clusterable import device as device_rule
from clusterable.cluster._lloyd import lloyd
from clusterable.data import load_dataset
from clusterable.evaluate import evaluate_embeddings
from clusterable.losses import AutoencoderLoss, build_loss
from clusterable.models import build_decoder, build_model
from clusterable.recipe import RunSpec, train_run
from clusterable.train import (
    TrainConfig,
    Trainer,
    embed_dataset,
    load_weights,
    resolve_checkpoint,
    validation,
)


@pytest.fixture(scope="module")
def digits():
    train = load_dataset("digits", split="train")
    return train.subset(np.arange(400)), load_dataset("digits", split="test")


def settings(device, **kwargs) -> TrainConfig:
    return TrainConfig(progress=False, device=str(device), **kwargs)


@pytest.fixture
def kmeans_devices(monkeypatch) -> list[torch.device]:
    """The devices k-means' Lloyd iterations were sent to; the work itself runs on the CPU."""
    seen: list[torch.device] = []

    def spy(frame, seeds, max_iter, device, **kwargs):
        seen.append(device)
        return lloyd(frame, seeds, max_iter, torch.device("cpu"), **kwargs)

    monkeypatch.setattr(importlib.import_module("clusterable.cluster.kmeans"), "lloyd", spy)
    return seen


@pytest.fixture
def table_devices(monkeypatch) -> list[object]:
    """The ``device`` each validation hands `evaluate_embeddings` (None: none given)."""
    told: list[object] = []
    table = validation.evaluate_embeddings

    def spy(*args, **kwargs):
        told.append(kwargs.get("device"))
        return table(*args, **kwargs)

    monkeypatch.setattr(validation, "evaluate_embeddings", spy)
    return told


def test_the_trainer_puts_model_loss_and_steps_on_its_device(digits, device):
    train, test = digits
    torch.manual_seed(0)
    model = build_model("mlp", train.input_shape, 8)
    loss = build_loss("gaussian-corel", num_classes=10, embedding_dim=8)
    config = settings(device, epochs=2, batch_size=40, eval_metric="recall@1")
    result = Trainer(model, loss, train, test.subset(np.arange(100)), config=config).fit()
    assert {p.device.type for p in [*model.parameters(), *loss.parameters()]} == {device.type}
    assert all(np.isfinite(r["loss"]) for r in result.history)
    assert 0.0 <= result.history[-1]["recall@1"] <= 1.0
    embeddings, labels = embed_dataset(model, test)  # the model's own device
    assert isinstance(embeddings, np.ndarray) and embeddings.shape == (len(test), 8)
    assert labels.dtype == np.int64


def test_one_step_on_the_device_equals_the_cpu_step(digits, device):
    train, _ = digits
    x, y = torch.from_numpy(np.asarray(train.x[:48])), torch.from_numpy(train.labels[:48])
    after = {}
    for where in ("cpu", device):
        torch.manual_seed(0)
        model = build_model("mlp", train.input_shape, 8)
        torch.manual_seed(1)
        decoder = build_decoder("mlp", train.input_shape, 8)
        loss = AutoencoderLoss(build_loss("msdnn", sigma=2.0), decoder, weight=0.5)
        config = settings(where, optimizer="sgd", momentum=0.0, lr=0.1, precision="32")
        value = Trainer(model, loss, train, config=config).train_step(x, y)
        after[str(where)] = (
            value,
            [p.detach().cpu() for p in [*model.parameters(), *loss.parameters()]],
        )
    (cpu_value, cpu), (value, moved) = after["cpu"], after[str(device)]
    assert value == pytest.approx(cpu_value, rel=1e-4)
    for a, b in zip(cpu, moved, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-5)


def test_a_resumed_run_on_the_device_continues_the_run(digits, device, tmp_path):
    train, test = digits
    val = test.subset(np.arange(100))

    def run(out, epochs, resume=False):
        torch.manual_seed(0)
        model = build_model("mlp", train.input_shape, 8)
        config = settings(device, epochs=epochs, batch_size=40)
        trainer = Trainer(model, build_loss("lifted"), train, val, config=config, out=out)
        return trainer.fit(resume=resume), model

    whole, model_a = run(tmp_path / "a", 3)
    run(tmp_path / "b", 2)
    resumed, model_b = run(tmp_path / "b", 3, resume=True)
    assert resumed.epochs_run == 3
    np.testing.assert_allclose(
        [r["loss"] for r in resumed.history], [r["loss"] for r in whole.history], rtol=1e-4
    )
    for a, b in zip(model_a.parameters(), model_b.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
    fresh = build_model("mlp", train.input_shape, 8)  # on the CPU: checkpoints load anywhere
    load_weights(resolve_checkpoint(tmp_path / "a"), fresh, build_loss("lifted"))
    torch.testing.assert_close(fresh.head.weight, model_a.head.weight.detach().cpu())


def test_the_trainer_validates_on_its_device(digits, device, table_devices):
    train, test = digits
    torch.manual_seed(0)
    model = build_model("mlp", train.input_shape, 8)
    loss = build_loss("gaussian-corel", num_classes=10, embedding_dim=8)  # predicts classes too
    trainer = Trainer(model, loss, train, test.subset(np.arange(100)), config=settings(device))
    inputs: list[torch.device] = []
    model.register_forward_pre_hook(lambda module, args: inputs.append(args[0].device))
    metrics = trainer.evaluate()
    assert inputs and {where.type for where in inputs} == {device.type}  # embedded there
    assert trainer.env.device.type == device.type
    assert table_devices == [trainer.env.device]  # searched and clustered there
    assert 0.0 <= metrics["recall@1"] <= 1.0 and 0.0 <= metrics["classification_accuracy"] <= 1


def test_validation_on_the_cpu_sends_nothing_to_the_gpu_the_machine_has(
    digits, monkeypatch, table_devices, kmeans_devices
):
    # A machine whose detection picks CUDA, a run told to train on the CPU: its validation
    # searches and clusters on the CPU too (it searched where "auto" pointed, before).
    monkeypatch.setattr(device_rule, "detect_device", lambda: torch.device("cuda"))
    train, test = digits
    torch.manual_seed(0)
    model = build_model("mlp", train.input_shape, 8)
    val = test.subset(np.arange(100))
    trainer = Trainer(model, build_loss("lifted"), train, val, config=settings("cpu"))
    metrics = trainer.evaluate()
    assert table_devices == [torch.device("cpu")]
    assert kmeans_devices and set(kmeans_devices) == {torch.device("cpu")}
    assert 0.0 <= metrics["nmi"] <= 1.0


def test_train_run_trains_validates_and_tests_on_its_device(
    device, tmp_path, table_devices, kmeans_devices
):
    spec = RunSpec(data="digits", model="mlp", loss="contrastive", embedding_dim=8)
    config = settings(device, epochs=1, batch_size=60, eval_every=1)
    result, metrics = train_run(spec, config, out=tmp_path / "run")
    assert result.epochs_run == 1
    assert [getattr(where, "type", where) for where in table_devices] == [device.type]
    # The validation's k-means, which runs first (the test table's: the next test).
    assert len(kmeans_devices) >= 2 and kmeans_devices[0].type == device.type
    assert 0.0 < metrics["recall@1"] <= 1.0 and 0.0 <= metrics["nmi"] <= 1.0
    assert np.isfinite(metrics["knn@1"])


def test_a_run_on_the_cpu_tests_on_the_cpu_on_a_machine_with_a_gpu(
    tmp_path, monkeypatch, table_devices, kmeans_devices
):
    monkeypatch.setattr(device_rule, "detect_device", lambda: torch.device("cuda"))
    spec = RunSpec(data="digits", model="mlp", loss="contrastive", embedding_dim=8)
    config = settings("cpu", epochs=1, batch_size=60)
    _, metrics = train_run(spec, config, out=tmp_path / "run")
    assert table_devices == [torch.device("cpu")]  # the validation's
    assert len(kmeans_devices) >= 2 and set(kmeans_devices) == {torch.device("cpu")}
    assert 0.0 <= metrics["nmi"] <= 1.0


def test_the_evaluation_table_on_the_device_equals_the_cpus(device):
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 12, 900)
    x = (rng.standard_normal((12, 32))[labels] * 3 + rng.standard_normal((900, 32))).astype(
        np.float32
    )
    on_cpu = evaluate_embeddings(x, labels, ks=(1, 4), device="cpu")
    on_device = evaluate_embeddings(x, labels, ks=(1, 4), device=device)
    for key in ("recall@1", "recall@4", "precision@1", "map@r", "r_precision"):
        assert on_device[key] == pytest.approx(on_cpu[key], abs=1e-6)
    assert on_device["nmi"] == pytest.approx(on_cpu["nmi"], abs=0.01)


def test_deep_opml_runs_its_riemannian_steps_beside_a_model_on_the_device(device):
    pytest.importorskip("pymanopt")
    from clusterable.unsupervised.deep import RiemannianOPMLLoss

    torch.manual_seed(0)
    loss = RiemannianOPMLLoss(embedding_dim=6, metric_dim=3, maxiter=2).to(device)
    rng = np.random.default_rng(0)
    labels = torch.from_numpy(np.repeat(np.arange(4), 8)).to(device)
    points = torch.from_numpy(rng.standard_normal((32, 6)).astype(np.float32)).to(device)
    points = (points + 3 * torch.eye(6, device=device)[labels % 6]).requires_grad_()
    before = loss.L.detach().clone()
    value = loss(points, labels)
    value.backward()
    assert torch.isfinite(value) and points.grad is not None
    assert loss.L.device.type == device.type and not torch.equal(loss.L.detach(), before)
