"""DistributedLoss with two gloo processes equals the single-process loss on the global batch.

One pair of processes runs every case (spawning costs seconds): every registered loss, and every
pair-based loss inside a CrossBatchMemory over several steps. Each process holds half of a float64
global batch as a leaf tensor; its value must equal the single-process value, its gradient must be
``world_size`` times its rows of the single-process gradient (DDP then averages it back), and the
loss's own parameters must get the single-process gradient.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from clusterable.losses import CrossBatchMemory, DistributedLoss, available_losses, build_loss
from clusterable.train import end_distributed

DIM, CLASSES, GLOBAL_BATCH, WORLD = 4, 3, 24, 2
MEMORY_STEPS = 3
PAIR_LOSSES = ["lifted", "contrastive", "triplet", "msdnn", "expected-triplet", "snn"]
CASES = [*available_losses(), *(f"memory {name}" for name in PAIR_LOSSES)]


def build(case: str) -> torch.nn.Module:
    name = case.removeprefix("memory ")
    extra = {"metric_dim": DIM} if name == "opml" else {}
    torch.manual_seed(0)
    loss = build_loss(name, num_classes=CLASSES, embedding_dim=DIM, **extra)
    if case.startswith("memory "):
        loss = CrossBatchMemory(loss, memory_size=40, embedding_dim=DIM)
    return loss.double()


def global_batches(case: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(len(case))
    steps = MEMORY_STEPS if case.startswith("memory ") else 1
    return [
        (
            torch.randn(GLOBAL_BATCH, DIM, generator=generator, dtype=torch.float64),
            torch.arange(GLOBAL_BATCH) % CLASSES,
        )
        for _ in range(steps)
    ]


def run_case(case: str, rank: int = 0, world: int = 1) -> dict[str, object]:
    """Values of every step, and the last step's gradients (embeddings, loss parameters)."""
    loss = build(case)
    wrapped = DistributedLoss(loss) if world > 1 else loss
    values = []
    for x, y in global_batches(case):
        rows = slice(rank * GLOBAL_BATCH // world, (rank + 1) * GLOBAL_BATCH // world)
        local = x[rows].clone().requires_grad_()
        value = wrapped(local, y[rows])
        loss.zero_grad()
        value.backward()
        values.append(float(value.detach()))
    parameters = [p.grad.clone() for p in loss.parameters() if p.grad is not None]
    return {"values": values, "gradient": local.grad.clone(), "parameters": parameters}


def _worker(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        results = {case: run_case(case, rank, WORLD) for case in CASES}
        torch.save(results, f"{out}.{rank}")
    finally:
        end_distributed()  # both ranks done before the group goes: no abort at exit


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory, free_port) -> list[dict[str, dict[str, object]]]:
    out = str(tmp_path_factory.mktemp("distributed") / "result")
    mp.spawn(_worker, args=(free_port(), out), nprocs=WORLD, join=True)
    return [torch.load(f"{out}.{rank}", weights_only=False) for rank in range(WORLD)]


@pytest.mark.parametrize("case", CASES)
def test_every_process_gets_the_single_process_loss_and_gradient(two_processes, case):
    expected = run_case(case)
    half = GLOBAL_BATCH // WORLD
    for rank, results in enumerate(two_processes):
        got = results[case]
        assert got["values"] == pytest.approx(expected["values"], rel=1e-12, abs=1e-15)
        own_rows = expected["gradient"][rank * half : (rank + 1) * half]
        torch.testing.assert_close(got["gradient"] / WORLD, own_rows, rtol=1e-10, atol=1e-13)
        assert len(got["parameters"]) == len(expected["parameters"])
        for mine, single in zip(got["parameters"], expected["parameters"], strict=True):
            torch.testing.assert_close(mine, single, rtol=1e-10, atol=1e-13)


def test_outside_a_process_group_it_is_the_loss_itself():
    loss = build("lifted")
    x, y = global_batches("lifted")[0]
    assert torch.equal(DistributedLoss(loss)(x, y), loss(x, y))


def readme_ddp_script() -> str:
    """The DDP script of the README's "Beyond one batch" section, as the README shows it."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    (script,) = [b for b in blocks if "DistributedLoss(CrossBatchMemory(" in b]
    return script


def test_the_readme_ddp_script_trains_with_two_processes(tmp_path):
    script = tmp_path / "train_ddp.py"
    script.write_text(readme_ddp_script())
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    command += ["--standalone", str(script)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    losses = [float(v) for v in re.findall(r"^epoch \d: loss (\S+)$", done.stdout, re.MULTILINE)]
    assert len(losses) == 3, done.stdout  # one process reports, once per epoch
    assert all(math.isfinite(v) for v in losses)
