"""The optimiser and the learning-rate schedule of a run (the fine-tuning recipe).

- ``adam``: Adam with L2 ``weight_decay`` on every parameter (the COREL protocol).
- ``adamw``: decoupled weight decay (Loshchilov & Hutter, ICLR 2019) on weight matrices and
  convolution kernels only: biases and normalisation scales and shifts (parameters of at most one
  dimension) get none, as DML fine-tuning recipes (Proxy-Anchor, timm) do.
- ``sgd``: SGD with Nesterov momentum.

The schedule multiplies each parameter group's own learning rate, so the head's multiplier is kept:
at optimiser step ``s`` (0-based) of ``T`` with ``W`` warm-up steps, group ``g`` trains at
``lr_g * factor(s)`` with

- warm-up, ``s < W``: ``factor = (s + 1) / W`` (linear, reaching 1 on the last warm-up step);
- after it, with progress ``p = (s - W) / (T - W)`` in [0, 1):
  ``constant``: 1; ``cosine``: ``(1 + cos(pi p)) / 2``; ``step``: 0.1 from ``p = 1/2`` and 0.01
  from ``p = 3/4``.

It is a :class:`torch.optim.lr_scheduler.LambdaLR` stepped after every optimiser step; its state
travels in the checkpoint, so a resumed run continues on the same curve. A run resumed with more
epochs (``T`` grown) continues on the new, longer curve from its first resumed step
(:func:`load_schedule_state`): at step ``s`` it trains at ``lr_g * factor(s)`` of the new ``T``,
never at the old curve's final rate (0 for cosine). The curve's earlier steps are not replayed:
a cosine run of 10 epochs resumed to 20 goes on from where the 20-epoch curve is at epoch 10, so
its rate rises again from the old end (0) to that point at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.optim.lr_scheduler import LambdaLR

OPTIMIZERS = ("adam", "adamw", "sgd")
SCHEDULES = ("constant", "cosine", "step")

#: Where the step schedule divides the learning rate by 10: these fractions of the steps after
#: warm-up.
STEP_MILESTONES = (0.5, 0.75)


def schedule_factor(schedule: str, total_steps: int, warmup_steps: int) -> Callable[[int], float]:
    """``factor(s)``: the multiplier of every group's learning rate at optimiser step ``s``
    (0-based), by the formula of the module docstring."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule {schedule!r} unknown; choose one of {', '.join(SCHEDULES)}")
    warmup = min(max(warmup_steps, 0), total_steps)
    after = max(total_steps - warmup, 1)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min((step - warmup) / after, 1.0)
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * progress))
        if schedule == "step":
            return 0.1 ** sum(progress >= m for m in STEP_MILESTONES)
        return 1.0

    return factor


def build_scheduler(
    optimizer: torch.optim.Optimizer,
    schedule: str,
    total_steps: int,
    warmup_steps: int,
) -> LambdaLR:
    """The schedule over ``optimizer``'s groups (each keeps its own base learning rate)."""
    return LambdaLR(optimizer, schedule_factor(schedule, total_steps, warmup_steps))


def load_schedule_state(scheduler: LambdaLR, state: dict[str, Any]) -> None:
    """Restore a checkpoint's schedule ``state`` into ``scheduler``, built for this run's steps,
    and set every group's learning rate to this curve's value at the restored step.

    The optimiser's state holds the learning rates of the step after the checkpoint on the curve
    the run was started with; when the run resumes with more epochs, its curve is another, and
    its first step must already be on it (the module docstring)."""
    scheduler.load_state_dict(state)
    step = scheduler.last_epoch  # optimiser steps taken: the index of the next one
    rates = [
        base * factor(step)
        for base, factor in zip(scheduler.base_lrs, scheduler.lr_lambdas, strict=True)
    ]
    for group, rate in zip(scheduler.optimizer.param_groups, rates, strict=True):
        group["lr"] = rate
    scheduler._last_lr = rates  # what get_last_lr() reports


def without_decay_on_norms_and_biases(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each group split in two: matrices and kernels as given, then parameters of at most one
    dimension (biases, BatchNorm and LayerNorm scales and shifts) with ``weight_decay`` 0."""
    split = []
    for group in groups:
        params = list(group["params"])
        decayed = [p for p in params if p.ndim > 1]
        kept = [p for p in params if p.ndim <= 1]
        split.append({**group, "params": decayed})
        split.append({**group, "params": kept, "weight_decay": 0.0})
    return [group for group in split if group["params"]]


def build_optimizer(
    name: str,
    groups: list[dict[str, Any]],
    *,
    lr: float,
    weight_decay: float,
    momentum: float,
) -> torch.optim.Optimizer:
    """``adam``, ``adamw`` or ``sgd`` over the parameter ``groups`` (each with its own lr)."""
    if name == "sgd":
        return torch.optim.SGD(
            groups, lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=momentum > 0
        )
    if name == "adamw":
        return torch.optim.AdamW(
            without_decay_on_norms_and_biases(groups), lr=lr, weight_decay=weight_decay
        )
    if name == "adam":
        return torch.optim.Adam(groups, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"optimizer {name!r} unknown; choose one of {', '.join(OPTIMIZERS)}")
