"""Every clusterer that can use a GPU takes its device as an argument: ``"auto"`` is the detection,
and a device named is the device used, whatever torch detects.

This machine may have no GPU: torch is made to say it has one where a test needs the name
accepted, and k-means' Lloyd iterations are spied on (the device they were sent to is recorded)
and run on the CPU."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from clusterable.cluster import (
    Clusterer,
    available_clusterings,
    clusterer_info,
    fit,
    register_clusterer,
    run_clustering,
    spectral,
)
from clusterable.cluster._lloyd import lloyd
from clusterable.cluster.registry import CLUSTERERS

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
POINTS = np.concatenate(
    [np.random.default_rng(0).normal(c, 0.2, (12, 3)) for c in (0.0, 6.0, 12.0)]
)

#: The registered clusterers that can use a GPU: k-means and DSCL spectral (its k-means step).
ON_A_DEVICE = ["kmeans", "spectral"]


@pytest.fixture
def detected_gpu(monkeypatch):
    """torch says this machine has two GPUs: ``"auto"`` detects CUDA, ``"cuda:1"`` is accepted."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


@pytest.fixture
def lloyd_devices(monkeypatch) -> list[torch.device]:
    """The devices k-means' Lloyd iterations were sent to; the work itself runs on the CPU."""
    seen: list[torch.device] = []

    def spy(frame, seeds, max_iter, device, **kwargs):
        seen.append(device)
        return lloyd(frame, seeds, max_iter, CPU, **kwargs)

    monkeypatch.setattr(importlib.import_module("clusterable.cluster.kmeans"), "lloyd", spy)
    return seen


def test_the_registry_knows_which_clusterers_take_a_device():
    taking = [name for name in available_clusterings() if clusterer_info(name).takes_device]
    assert taking == ON_A_DEVICE


@pytest.mark.parametrize("method", ON_A_DEVICE)
def test_an_explicit_cpu_is_kept_where_auto_would_take_a_gpu(method, detected_gpu, lloyd_devices):
    labels = fit(POINTS, method, 3, device="cpu").labels_
    assert lloyd_devices and set(lloyd_devices) == {CPU}
    assert len(set(labels.tolist())) == 3


@pytest.mark.parametrize("method", ON_A_DEVICE)
def test_auto_is_the_detection_whatever_ran_before(method, detected_gpu, lloyd_devices):
    # torch sees a GPU; a CPU run just before leaves nothing behind: "auto" is the detection.
    run_clustering(POINTS, method, 3, device="cpu")
    before = len(lloyd_devices)
    run_clustering(POINTS, method, 3)  # the clusterer's default, "auto"
    run_clustering(POINTS, method, 3, device="auto")
    assert set(lloyd_devices[:before]) == {CPU}
    assert len(lloyd_devices) > before and set(lloyd_devices[before:]) == {CUDA}


@pytest.mark.parametrize("method", ON_A_DEVICE)
def test_the_device_argument_reaches_the_kmeans_step(method, detected_gpu, lloyd_devices):
    run_clustering(POINTS, method, 3, device="cuda:1")
    fit(POINTS, method, 3, device=torch.device("cuda", 1))
    assert lloyd_devices and set(lloyd_devices) == {torch.device("cuda", 1)}


def test_spectral_takes_its_device(detected_gpu, lloyd_devices):
    labels = spectral(POINTS, 3, device="cuda:1")
    assert set(lloyd_devices) == {torch.device("cuda", 1)}
    assert len(set(labels.tolist())) == 3


def test_a_partition_records_the_device_by_name():
    partition = fit(POINTS, "kmeans", 3, device=torch.device("cpu"))
    assert partition.options["device"] == "cpu"
    assert "device" not in fit(POINTS, "kmeans", 3).options  # the clusterer's own "auto"


def test_a_clusterer_on_the_cpu_is_not_given_the_device():
    # gmm runs on the CPU whatever the device: the caller may hand every clusterer its device.
    np.testing.assert_array_equal(
        run_clustering(POINTS, "gmm", 3, device="cpu"), run_clustering(POINTS, "gmm", 3)
    )
    assert "device" not in fit(POINTS, "gmm", 3, device="cpu").options


@pytest.mark.parametrize("name", ["gpu", "cuda:x"])
@pytest.mark.parametrize("method", ON_A_DEVICE)
def test_an_unknown_device_name_is_refused_before_any_work(method, name, lloyd_devices):
    with pytest.raises(ValueError, match="auto, cpu, cuda, cuda:N, mps"):
        fit(POINTS, method, 3, device=name)
    assert lloyd_devices == []


def test_a_missing_gpu_is_refused_with_the_device_rules_message(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="sees no CUDA GPU"):
        run_clustering(POINTS, "kmeans", 3, device="cuda")


@pytest.fixture
def registry(monkeypatch):
    """The clusterer registry, restored after the test."""
    monkeypatch.setattr(CLUSTERERS, "_entries", dict(CLUSTERERS._entries))
    return CLUSTERERS


class Placed(Clusterer):
    """A toy estimator that can use a GPU: it records the device it was given."""

    def __init__(self, n_clusters=None, seed=0, *, device="auto"):
        super().__init__(n_clusters, seed)
        self.device = device
        Placed.given = device

    def cluster(self, points):
        return np.zeros(points.shape[0], dtype=np.int64)


def placed(x, n_clusters, seed=0, *, device="auto"):
    """A toy function clusterer that can use a GPU: it records the device it was given."""
    placed.given = device
    return np.zeros(len(x), dtype=np.int64)


@pytest.mark.parametrize("target", [Placed, placed], ids=["class", "function"])
def test_a_users_clusterer_that_takes_a_device_is_handed_it(registry, target):
    register_clusterer("placed")(target)
    assert clusterer_info("placed").takes_device
    run_clustering(POINTS, "placed", 3, device="cpu")
    assert target.given == "cpu"
    run_clustering(POINTS, "placed", 3)
    assert target.given == "auto"  # its own default, for it to detect


@pytest.mark.cuda
@pytest.mark.parametrize("method", ON_A_DEVICE)
def test_on_a_gpu_the_argument_decides_where_kmeans_runs(method, monkeypatch):
    seen: list[torch.device] = []

    def passed_through(frame, seeds, max_iter, device, **kwargs):
        seen.append(device)
        return lloyd(frame, seeds, max_iter, device, **kwargs)

    kmeans_module = importlib.import_module("clusterable.cluster.kmeans")
    monkeypatch.setattr(kmeans_module, "lloyd", passed_through)
    on_gpu = fit(POINTS, method, 3, device="cuda").labels_
    on_cpu = fit(POINTS, method, 3, device="cpu").labels_
    assert {where.type for where in seen} == {"cuda", "cpu"}
    assert seen[0].type == "cuda" and seen[-1].type == "cpu"
    np.testing.assert_array_equal(on_gpu, on_cpu)  # three groups far apart: one partition
