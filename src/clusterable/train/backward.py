"""How a training step back-propagates the loss: the whole batch at once, or in chunks (DSCL).

The trainer chooses one once, from ``TrainConfig.chunk_size``; both leave the same gradients in
the parameters (up to rounding) and return the loss value.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor, nn


def full_precision(t: Tensor) -> Tensor:
    """Half-precision autocast outputs in float32; float32 and float64 as they are."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


@dataclass(frozen=True)
class StepParts:
    """What a backward pass uses of the trainer, fixed for the whole run."""

    network: nn.Module  # the model (DistributedDataParallel under torchrun)
    loss: Callable[[Tensor, Tensor, Tensor], Tensor]  # (embeddings, labels, inputs) -> scalar
    autocast: Callable[[], AbstractContextManager]  # mixed precision on CUDA, else nothing
    scale: Callable[[Tensor], Tensor]  # the AMP GradScaler's scale (identity without AMP)
    defer_sync: Callable[[], AbstractContextManager]  # DDP's no_sync, else nothing


def whole_batch_backward(parts: StepParts, x: Tensor, y: Tensor) -> Tensor:
    """Embed the batch, take the loss, back-propagate it: the ordinary step."""
    with parts.autocast():
        embeddings = parts.network(x)  # (n_local, d)
        value = parts.loss(embeddings, y, x)
    parts.scale(value).backward()
    return value


@dataclass(frozen=True)
class ChunkedBackward:
    """DSCL's large-batch trick (Law et al., ICML 2017, Sec. 4.1): the loss of a batch too large
    to embed with gradient at once, with the same gradient.

    Embed the batch in chunks without gradient, take the loss and its gradient with respect to
    the embeddings on the whole batch, then re-embed each chunk with gradient and back-propagate
    that gradient into it: the network's gradient is the whole batch's (the chain rule), while
    activations are held for one chunk at a time. The loss's own parameters (and a decoder that
    :class:`~clusterable.losses.AutoencoderLoss` holds) get theirs from the whole-batch loss.
    Under DDP the gradients are reduced once, on the last chunk.

    Parameters
    ----------
    chunk_size : int
        Items embedded with gradient at once.
    """

    chunk_size: int

    def __call__(self, parts: StepParts, x: Tensor, y: Tensor) -> Tensor:
        chunks = x.split(self.chunk_size)
        with torch.no_grad(), parts.autocast():
            local = full_precision(torch.cat([parts.network(c) for c in chunks]))  # (n_local, d)
        local.requires_grad_()  # (n_local, d) leaf: the loss's gradient for its rows
        with parts.autocast():
            value = parts.loss(local, y, x)
        parts.scale(value).backward()
        assert local.grad is not None  # a leaf that requires grad, after backward
        local_grad = local.grad.split(self.chunk_size)
        for i, (chunk, grad) in enumerate(zip(chunks, local_grad, strict=True)):
            sync = nullcontext() if i == len(chunks) - 1 else parts.defer_sync()
            with sync:
                with parts.autocast():
                    embeddings = parts.network(chunk)  # (chunk, d)
                (full_precision(embeddings) * grad).sum().backward()  # d/d(embeddings) = grad
        return value


#: A backward pass: ``(parts, x, y) -> loss value``, gradients left in the parameters.
Backward = Callable[[StepParts, Tensor, Tensor], Tensor]
