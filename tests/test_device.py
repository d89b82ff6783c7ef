"""The one device rule (clusterable.device): names, what auto picks, torchrun placement."""

from __future__ import annotations

import re

import pytest
import torch

from clusterable import device as device_rule
from clusterable.device import (
    check_device_name,
    module_device,
    process_device,
    resolve_device,
    search_device,
)


@pytest.fixture
def no_accelerator(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


def test_auto_takes_cuda_then_mps_then_the_cpu(monkeypatch, no_accelerator):
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("mps")
    assert resolve_device(None) == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")


def test_named_devices_are_checked_against_the_machine(no_accelerator):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")
    with pytest.raises(ValueError, match=r"sees no CUDA GPU.*--device cpu"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="MPS is not available"):
        resolve_device("mps")


def test_a_gpu_number_past_the_last_is_refused(two_gpus):
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match=r"2 visible GPU.*cuda:0 to cuda:1"):
        resolve_device("cuda:2")


@pytest.mark.parametrize("name", ["gpu", "cuda:", "cuda:x", "cuda1", "tpu", ""])
def test_unknown_names_say_what_is_accepted(name):
    with pytest.raises(ValueError, match="auto, cpu, cuda, cuda:N, mps"):
        resolve_device(name)
    with pytest.raises(ValueError, match="auto, cpu, cuda, cuda:N, mps"):
        check_device_name(name)


def test_a_stored_name_is_checked_without_the_device(no_accelerator):
    check_device_name("cuda:3")  # a run trained elsewhere may name a GPU this machine lacks


def test_a_named_device_is_honoured_where_auto_would_take_a_gpu(two_gpus):
    assert resolve_device("cpu") == torch.device("cpu")
    assert search_device("cpu") == torch.device("cpu")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert search_device("cuda:1") == torch.device("cuda", 1)


def test_auto_is_the_detection_whatever_was_named_before(monkeypatch, two_gpus):
    """No choice outlives its call: after "cpu" and "cuda:1" were named, "auto" is still what
    `detect_device` says, and it is asked each time."""
    resolve_device("cpu"), search_device("cpu"), resolve_device("cuda:1")
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device(None) == torch.device("cuda")
    assert search_device("auto") == torch.device("cuda")
    monkeypatch.setattr(device_rule, "detect_device", lambda: torch.device("mps"))
    assert resolve_device("auto") == torch.device("mps")
    assert search_device("auto") == torch.device("cpu")  # searches never run on MPS
    assert resolve_device("cpu") == torch.device("cpu")


def test_the_command_line_refuses_a_missing_device_before_any_work(
    monkeypatch, tmp_path, capsys, no_accelerator
):
    from clusterable.cli import main

    monkeypatch.setattr("clusterable.demo.run_demo", lambda *a, **k: pytest.fail("demo ran"))
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--quick", "--device", "cuda", "--out", str(tmp_path / "demo")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "error: --device cuda:" in err and "sees no CUDA GPU" in err and err.count("\n") == 1
    assert not (tmp_path / "demo").exists()


def test_searches_run_on_cuda_or_the_cpu_never_mps(monkeypatch, no_accelerator):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto").type == "mps"
    assert search_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert search_device("auto") == torch.device("cuda")


def test_the_model_says_where_it_is():
    assert module_device(torch.nn.Linear(2, 2)) == torch.device("cpu")
    assert module_device(torch.nn.ReLU()) == torch.device("cpu")
    with_buffer = torch.nn.BatchNorm1d(3, affine=False)
    assert module_device(with_buffer) == torch.device("cpu")


def test_each_torchrun_process_takes_the_gpu_of_its_local_rank(two_gpus):
    assert process_device("auto", 0, 2) == torch.device("cuda", 0)
    assert process_device("cuda", 1, 2) == torch.device("cuda", 1)
    assert process_device("cpu", 1, 2) == torch.device("cpu")
    assert process_device("cuda:1", 0, 1) == torch.device("cuda", 1)


def test_more_processes_than_gpus_is_refused_before_any_work(two_gpus):
    with pytest.raises(ValueError, match=r"3 processes.*2 visible GPU.*--device cpu"):
        process_device("auto", 0, 3)
    with pytest.raises(ValueError, match="names one GPU for 2 processes"):
        process_device("cuda:0", 0, 2)


def test_torchrun_on_mps_is_refused(monkeypatch, no_accelerator):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    with pytest.raises(ValueError, match="does not run on MPS"):
        process_device("auto", 0, 2)


def test_setup_distributed_refuses_more_processes_than_gpus(monkeypatch, two_gpus):
    from clusterable.train import setup_distributed

    for name, value in {"RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "2"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    with pytest.raises(ValueError, match="3 processes"):
        setup_distributed("auto")


def test_one_rule_only():
    """No module but clusterable.device picks between CUDA, MPS and the CPU by itself."""
    from pathlib import Path

    package = Path(device_rule.__file__).parent
    picks = re.compile(
        r"\"cuda\" if torch\.cuda\.is_available\(\)|mps\.is_available|device=\"cpu\""
    )
    deciders = [
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if path.name != "device.py"
        and any(
            picks.search(line)
            for line in path.read_text().splitlines()
            if not line.lstrip().startswith((">>>", "..."))  # a docstring's example call
        )
    ]
    assert deciders == [], f"these modules decide the device themselves: {deciders}"


#: What an ambient device was made of: a scope the edge entered, and the context variable it set.
AMBIENT = re.compile(r"\b(device_scope|_CHOSEN|ContextVar|contextvars)\b")


def test_there_is_no_ambient_device():
    """No library function reads a device it was not handed: no scope, no context variable,
    anywhere in the package (issue 36: the device is explicit below the edge)."""
    from pathlib import Path

    package = Path(device_rule.__file__).parent
    sources = [path for path in package.rglob("*.py") if "__pycache__" not in path.parts]
    assert len(sources) > 50  # the package itself, not an empty folder
    found = {
        path.relative_to(package).as_posix(): sorted(set(AMBIENT.findall(path.read_text())))
        for path in sources
        if AMBIENT.search(path.read_text())
    }
    assert found == {}, f"these modules keep an ambient device: {found}"


def test_setup_distributed_takes_the_device_it_is_given(two_gpus):
    from clusterable.train import setup_distributed

    assert setup_distributed("auto").device == torch.device("cuda")
    assert setup_distributed("cpu").device == torch.device("cpu")
