"""A loss over the global batch of a data-parallel run, for any training loop (plain DDP too).

Under ``DistributedDataParallel`` each process embeds its own slice of the global batch. Pair-,
triplet- and batch-level losses must see the whole global batch, or each process mines its
negatives from ``1 / world_size`` of them. :class:`DistributedLoss` all-gathers the embeddings
and labels, computes the loss on the global batch on every process (the same value everywhere),
and lets each process back-propagate into its own items only.

Gradient bookkeeping: DDP *averages* the model's gradients over the ``W`` processes, and each
process's backward holds only its own items' share of the global loss's gradient. The gather's
backward therefore multiplies that share by ``W``, so the average DDP takes is exactly the
single-process gradient of the global loss. The loss's own parameters (class weights, OPML's
``L`` and ``R``) get the global loss's gradient on every process, identical everywhere, whether
or not DDP also averages them.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn


def _is_distributed(group: Any = None) -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


def _gather_rows(local: Tensor, group: Any) -> tuple[Tensor, list[int]]:
    """All ranks' ``(n_r, ...)`` tensors, concatenated in rank order, and every ``n_r``.

    Ranks may hold different numbers of rows (a short last batch): each is padded to the longest
    for ``all_gather`` and trimmed after.
    """
    world = dist.get_world_size(group)
    count = torch.tensor([local.shape[0]], device=local.device)
    counts = [torch.empty_like(count) for _ in range(world)]
    dist.all_gather(counts, count, group=group)
    sizes = [int(c) for c in counts]
    longest = max(sizes)
    padded = local.new_zeros((longest, *local.shape[1:]))
    padded[: local.shape[0]] = local
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded.contiguous(), group=group)
    return torch.cat([part[:size] for part, size in zip(parts, sizes, strict=True)]), sizes


class _GatherWithLocalGradient(torch.autograd.Function):
    """All-gather rows; the backward returns this rank's slice of the gradient times ``W``."""

    @staticmethod
    def forward(ctx: Any, local: Tensor, group: Any) -> Tensor:
        gathered, sizes = _gather_rows(local.detach(), group)
        rank = dist.get_rank(group)
        ctx.start, ctx.stop = sum(sizes[:rank]), sum(sizes[: rank + 1])
        ctx.world = len(sizes)
        return gathered

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        # Every process computed the same global loss: its own rows' gradient, scaled by W, is
        # what DDP's average over the W processes turns into the single-process gradient.
        return grad[ctx.start : ctx.stop] * ctx.world, None


def gather_with_local_gradient(local: Tensor, group: Any = None) -> Tensor:
    """All-gather ``(n_local, ...)`` rows into ``(n_global, ...)`` in rank order.

    Gradient flows back to this rank's rows only, multiplied by the world size (see the module
    docstring). Outside a process group of two or more, ``local`` itself.
    """
    if not _is_distributed(group):
        return local
    if not local.requires_grad:
        return _gather_rows(local, group)[0]
    return _GatherWithLocalGradient.apply(local, group)


class _MeanWithLocalGradient(torch.autograd.Function):
    """All-reduce mean of a scalar; the backward passes the gradient to the local term as is."""

    @staticmethod
    def forward(ctx: Any, local: Tensor, group: Any) -> Tensor:
        total = local.detach().clone()
        dist.all_reduce(total, group=group)
        return total / dist.get_world_size(group)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        # The data-parallel average of the processes' local gradients is the mean's gradient.
        return grad, None


def mean_with_local_gradient(local: Tensor, group: Any = None) -> Tensor:
    """The mean over processes of a scalar term computed on each process's own items.

    Its value is the global batch's when the processes hold equally many items; its gradient
    is the local term's, which DDP's average over processes turns into the mean's. Outside a
    process group of two or more, ``local`` itself.
    """
    if not _is_distributed(group):
        return local
    return _MeanWithLocalGradient.apply(local, group)


class DistributedLoss(nn.Module):
    """Wrap any loss so that, under DDP, it is the single-process loss on the global batch.

    ``DistributedLoss(loss)(embeddings, labels)`` all-gathers ``embeddings`` ``(n_local, d)`` and
    ``labels`` ``(n_local,)`` from every process (with gradient for this process's rows) and
    returns ``loss(global_embeddings, global_labels)``: the same value on every process, equal to
    the loss one process would compute on the concatenated batch. After ``backward()`` and DDP's
    gradient averaging, the model's gradient is the single-process gradient (see the module
    docstring). Outside ``torch.distributed`` it is ``loss`` itself, so one script runs both ways.

    Wrap a :class:`~clusterable.losses.CrossBatchMemory` in it (never the other way round): the
    memory then stores the global batch, the same on every process.

    Parameters
    ----------
    loss : nn.Module
        Any loss called as ``loss(embeddings, labels)``.
    group : ProcessGroup, optional
        The process group to gather over; the default group when omitted.

    Examples
    --------
    In a DDP script (``torchrun --nproc_per_node 2 train.py``), after ``init_process_group``::

        loss_fn = DistributedLoss(CrossBatchMemory(build_loss("lifted"), 8192, 128))
        loss = loss_fn(ddp_model(x), y)  # x, y: this process's slice
        loss.backward()
    """

    def __init__(self, loss: nn.Module, group: Any = None) -> None:
        super().__init__()
        self.loss = loss
        self.group = group

    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        return loss_on_global_batch(self.loss, embeddings, labels, self.group)


def loss_on_global_batch(
    loss: nn.Module, embeddings: Tensor, labels: Tensor, group: Any = None
) -> Tensor:
    """``loss`` on the all-gathered global batch, with gradient for this process's rows (the
    function behind :class:`DistributedLoss`); outside a process group, ``loss(embeddings,
    labels)``."""
    if not _is_distributed(group):
        return loss(embeddings, labels)
    if not isinstance(embeddings, Tensor) or not isinstance(labels, Tensor):
        raise TypeError("DistributedLoss needs torch.Tensor embeddings and labels")
    if embeddings.shape[:1] != labels.shape[:1]:
        raise ValueError(
            f"labels has {labels.shape[0] if labels.dim() else 0} entries but embeddings has "
            f"{embeddings.shape[0]} rows; pass one label per embedding"
        )
    labels = labels.to(embeddings.device)
    return loss(
        gather_with_local_gradient(embeddings, group),
        gather_with_local_gradient(labels, group),
    )
