"""Settings for the whole test session."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from clusterable.data.locate import SYSTEM_DATA_DIR

CUDA = torch.cuda.is_available()

# A verb's unforeseen error reaches the test as itself, traceback and all, not as the one line
# and exit status 1 a user sees (`clusterable.cli._crash`, whose tests unset this).
os.environ["CLUSTERABLE_TRACEBACK"] = "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if CUDA:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine (make gpu-check runs these)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def device(request: pytest.FixtureRequest) -> torch.device:
    """Each test that asks for it runs on the CPU, and on CUDA where torch sees a GPU."""
    return torch.device(request.param)


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """One intra-op torch thread for every test.

    `make test` runs pytest with `-n 2` (two xdist workers) on a 2-core machine: with torch's
    default of a thread per core, each worker's threads compete with the other worker's for the
    same cores, and the tests' tiny tensors spend their time starting and syncing threads rather
    than computing (~50x slower measured). Spawned DDP workers are fresh processes: unaffected.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def fashion_mnist() -> Path:
    """Debian's Fashion-MNIST files; a test that needs them skips where they are not installed."""
    folder = SYSTEM_DATA_DIR / "fashion-mnist"
    if not folder.is_dir():
        pytest.skip("Fashion-MNIST not installed (as root: apt-get install dataset-fashion-mnist)")
    return folder


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    """A function giving a free TCP port on 127.0.0.1, for a torch.distributed rendezvous."""

    def find() -> int:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]

    return find


@pytest.fixture
def search_with_a_failure() -> Callable[[dict], object]:
    """A function giving the :class:`~clusterable.tune.TuneResult` of a finished search whose
    best values are the ones given, with one pruned and one failed trial: what the command line
    and the paper reproductions say of a search, without running one."""
    from clusterable.recipe import RunSpec
    from clusterable.train import TrainConfig
    from clusterable.tune import TuneResult

    def finished(best_values: dict) -> TuneResult:
        failed = [({"train.lr": 0.5}, "RuntimeError: CUDA out of memory.")]
        return TuneResult(
            best_values, 0.5, RunSpec(), TrainConfig(), 3, 1, folder=None, failed=failed
        )

    return finished
