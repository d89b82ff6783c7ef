"""torchrun support for the Trainer: process-group set-up, barriers, logged means.

Losses see the whole global batch through :class:`clusterable.losses.DistributedLoss`, which any
training loop can use; this module only places the process.

Recipe::

    torchrun --nproc_per_node 2 -m clusterable train --data digits --loss lifted

A script of one's own builds its `Trainer` the same way under torchrun (the Trainer joins the
group) and calls `end_distributed` once every process is done with it.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from clusterable.device import DeviceSpec, process_device, resolve_device

CPU = torch.device("cpu")


@dataclass(frozen=True)
class Distributed:
    """Where this process stands: ``world_size`` processes, this one is ``rank``."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = CPU

    @property
    def enabled(self) -> bool:
        """Whether more than one process trains."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Whether this is the process of rank 0, which writes the files."""
        return self.rank == 0


def setup_distributed(device: DeviceSpec = "auto") -> Distributed:
    """Join the process group torchrun describes in the environment; single process otherwise.

    ``device`` follows the package's rule (:mod:`clusterable.device`; ``"auto"``: the
    detection). Under torchrun each process takes the GPU of its local rank and joins with NCCL,
    or with gloo on the CPU; more processes on a machine than it has GPUs is refused here, before
    any work.
    """
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return Distributed(device=resolve_device(device))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    placed = process_device(device, local_rank, local_world)
    if placed.type == "cuda":
        torch.cuda.set_device(placed)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if placed.type == "cuda" else "gloo")
    return Distributed(rank=dist.get_rank(), world_size=dist.get_world_size(), device=placed)


def end_distributed() -> None:
    """Leave the process group, if any, once every process has finished: wait for all, then
    destroy it.

    A group left for the interpreter's exit to tear down can abort a process there (gloo:
    "terminate called without an active exception", seen with a DDP model still alive), and NCCL
    warns that it was not destroyed. A DDP model keeps the group in use through its reducer, and
    one held by a Trainer (whose parts refer back to it) is freed only by the cycle collector:
    collected here first.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def barrier(env: Distributed) -> None:
    """Wait for every process (e.g. until the main one has written a checkpoint)."""
    if env.enabled:
        dist.barrier()


def all_reduce_mean(value: float, env: Distributed) -> float:
    """Mean of a Python number over all processes (for logging)."""
    if not env.enabled:
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=env.device)
    dist.all_reduce(tensor)
    return float(tensor.item()) / env.world_size


def average_gradients(parameters: Iterable[torch.nn.Parameter], env: Distributed) -> None:
    """Replace each parameter's gradient by its mean over all processes, as DDP does the model's
    (parameters without a gradient are skipped, on every process alike)."""
    if not env.enabled:
        return
    for parameter in parameters:
        if parameter.grad is not None:
            dist.all_reduce(parameter.grad)
            parameter.grad.div_(env.world_size)
