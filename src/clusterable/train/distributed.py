"""torchrun support: process-group set-up and the all-gather that keeps the local gradient.

Batch-level losses (DSCL, lifted, MsDNN, ...) must see the whole global batch, not one process's
slice of it. :func:`gather_with_grad` all-gathers the embeddings and puts the local slice back as
the autograd-tracked tensor, so each process back-propagates through its own items only. Every
process computes the same global loss; scaling it by the world size before backward makes DDP's
gradient averaging give exactly the single-process gradient (see ``Trainer._backward``).

Recipe::

    torchrun --nproc_per_node 2 -m clusterable train --data digits --loss lifted
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

CPU = torch.device("cpu")


@dataclass(frozen=True)
class Distributed:
    """Where this process stands: ``world_size`` processes, this one is ``rank``."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = CPU

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup_distributed() -> Distributed:
    """Join the process group torchrun describes in the environment; single process otherwise.

    gloo on CPU, NCCL when CUDA is available (one GPU per local rank).
    """
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return Distributed(device=device)
    use_cuda = torch.cuda.is_available()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    if use_cuda:
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    return Distributed(rank=dist.get_rank(), world_size=dist.get_world_size(), device=device)


def gather_with_grad(local: Tensor, env: Distributed) -> Tensor:
    """All-gather ``(n_local, ...)`` tensors into ``(n_global, ...)`` in rank order.

    The slice of this rank is ``local`` itself (with its gradient); the other slices are constants.
    Every rank must pass the same number of rows.
    """
    if not env.enabled:
        return local
    parts = [torch.empty_like(local) for _ in range(env.world_size)]
    dist.all_gather(parts, local.detach().contiguous())
    parts[env.rank] = local
    return torch.cat(parts)


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
