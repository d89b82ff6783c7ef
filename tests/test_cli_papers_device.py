"""``clusterable demo`` and ``clusterable reproduce`` run on the ``--device`` of the command line.

There is no ambient device: each handler hands ``--device`` down, and every training, search and
k-means of the demo and of an experiment receives it. The trainings, searches and k-means are
spied on (the device each was handed is recorded) and kept to seconds; torch is made to say it
has a GPU, so that a step that read ``"auto"`` instead of the device handed down would try CUDA.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest
import torch

from clusterable.cli import main


@pytest.fixture
def detected_gpu(monkeypatch):
    """torch says this machine has a GPU: ``"auto"`` would mean CUDA."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


def spy(monkeypatch, module: str, name: str, seen: list) -> None:
    """Replace ``module.name`` by a wrapper that records its ``device`` (None when not given)."""
    target = importlib.import_module(module)
    real = getattr(target, name)

    @functools.wraps(real)
    def recording(*args, **kwargs):
        seen.append((name, kwargs.get("device")))
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, recording)


def test_demo_trains_searches_and_clusters_on_the_device_given(
    monkeypatch, tmp_path, capsys, detected_gpu
):
    demo = importlib.import_module("clusterable.demo")
    monkeypatch.setattr(demo, "available_losses", lambda: ["contrastive"])  # one loss: seconds
    monkeypatch.setattr(demo, "plot_tsne", lambda *args, **kwargs: None)
    seen: list[tuple[str, object]] = []
    trained_on: list[torch.device] = []
    real_build = demo.build_trainer

    def build_trainer(spec, settings, *args, **kwargs):
        seen.append(("TrainConfig", settings.device))
        trainer = real_build(spec, settings, *args, **kwargs)
        trained_on.append(trainer.env.device)
        return trainer

    monkeypatch.setattr(demo, "build_trainer", build_trainer)
    for name in ("evaluate_embeddings", "knn_accuracy"):
        spy(monkeypatch, "clusterable.demo", name, seen)

    assert main(["demo", "--quick", "--device", "cpu", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "results.json").is_file()
    assert {name for name, _ in seen} == {"TrainConfig", "evaluate_embeddings", "knn_accuracy"}
    assert {device for _, device in seen} == {"cpu"}, seen
    assert len(trained_on) == 3 and set(trained_on) == {torch.device("cpu")}  # three views


def test_an_experiment_trains_searches_and_clusters_on_the_device_given(
    monkeypatch, tmp_path, capsys, detected_gpu
):
    from clusterable.data import load_dataset

    try:
        load_dataset("fashion-mnist", split="test")
    except FileNotFoundError as error:
        pytest.skip(f"Fashion-MNIST is not installed: {error}")
    subclass = importlib.import_module("clusterable.reproduce.msdnn_subclass")
    seen: list[tuple[str, object]] = []

    def train_and_embed(method, train, eval_sets, config):
        # No training: the device the run was handed, and seeded embeddings of the right shape.
        seen.append(("TrainConfig", config.device))
        rng = np.random.default_rng(config.seed)
        return [rng.standard_normal((len(ds), 8)).astype(np.float32) for ds in eval_sets]

    monkeypatch.setattr(subclass, "train_and_embed", train_and_embed)
    monkeypatch.setattr(subclass, "plot_tsne_maps", lambda *args, **kwargs: [])
    spy(monkeypatch, "clusterable.reproduce.msdnn_subclass", "knn_accuracy", seen)
    spy(monkeypatch, "clusterable.reproduce._shared", "kmeans", seen)

    out = tmp_path / "results"
    argv = ["reproduce", "msdnn-subclass", "--quick", "--device", "cpu", "--out", str(out)]
    assert main(argv) == 0
    assert (out / "msdnn-subclass" / "results.json").is_file()
    assert {name for name, _ in seen} == {"TrainConfig", "knn_accuracy", "kmeans"}
    assert {device for _, device in seen} == {"cpu"}, seen


def test_reproduce_all_hands_the_device_to_every_experiment(monkeypatch, tmp_path, capsys):
    from clusterable.reproduce import available_experiments

    reproduce = importlib.import_module("clusterable.reproduce")
    budgets = []
    monkeypatch.setattr(reproduce, "run_experiment", lambda name, budget: budgets.append(budget))
    monkeypatch.setattr(reproduce, "write_summary", lambda out: [])

    assert main(["reproduce", "all", "--device", "cpu", "--out", str(tmp_path / "all")]) == 0
    assert len(budgets) == len(available_experiments())
    assert {budget.device for budget in budgets} == {"cpu"}
    main(["reproduce", "all", "--out", str(tmp_path / "all")])
    assert budgets[-1].device == "auto"  # the flag's default, for the detection below
