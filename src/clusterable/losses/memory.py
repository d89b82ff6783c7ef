"""Cross-batch memory: the embeddings of past batches as extra partners of a pair-based loss.

Wang, Zhang, Huang, Scott. "Cross-Batch Memory for Embedding Learning". CVPR 2020 (XBM).

A pair- or triplet-based loss learns from the negatives its batch holds, and on one device a batch
is small. Embeddings drift slowly once training has warmed up (XBM Sec. 3), so the embeddings of
recent batches, kept without gradient, are nearly what the current model would give: a FIFO queue
of them adds thousands of partners to every anchor at the price of one ``(n, m)`` distance block.

What the memory means for each loss (a loss says so with ``accepts_references``):

- lifted, contrastive, triplet (every mining mode), msdnn, expected-triplet, snn: the anchors are
  the batch, and their positives and negatives are the other batch items plus the memory (see
  :mod:`clusterable.losses._base`). Gradient reaches the batch only.
- spectral (DSCL): the loss is a function of the batch matrix as a whole (the projection
  ``F F^+``), not of pairs; stale rows would move the projection without gradient. DSCL's answer
  to small batches is its large-batch trick (``TrainConfig.chunk_size``). Rejected.
- cross-entropy, cosine-corel, gaussian-corel (COREL) and center: each embedding meets the learned
  class matrix (and centres), never another item, so there are no partners to add; the class
  weights already carry every past batch. Rejected.
- opml: its metric and weights are fitted to the batch's triplets by the paper's alternating
  scheme, and its pseudo-labels are refreshed between epochs. Rejected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import torch
from torch import Tensor, nn

from clusterable._ranges import Bounds
from clusterable.losses._base import EmbeddingLoss
from clusterable.losses.distributed import DistributedLoss


class CrossBatchMemory(EmbeddingLoss):
    """A FIFO queue of past embeddings and labels that a loss sees as reference partners (XBM).

    ``memory(embeddings, labels)`` returns ``loss(embeddings, labels, stored, stored_labels)``
    and then, in training mode (the default; ``memory.eval()`` switches it off), enqueues the
    batch, detached, dropping the oldest items once ``memory_size`` are stored. The queue is made
    of buffers, so it is part of ``state_dict()``: a checkpoint saves it and resuming continues
    with the same memory.

    Parameters
    ----------
    loss : nn.Module
        A loss that takes references (``loss.accepts_references``): lifted, contrastive, triplet,
        msdnn, expected-triplet, snn. Its own parameters are this module's parameters.
    memory_size : int
        Most past embeddings kept, ``m >= 1``; XBM uses a few thousand up to the whole training
        set.
    embedding_dim : int
        Dimension ``d`` of the embeddings.

    Notes
    -----
    XBM starts the memory after a warm-up of some iterations, when embeddings drift slowly; with a
    fresh network the first epochs' memory is staler. Under DDP wrap the memory in
    :class:`~clusterable.losses.DistributedLoss`, not the other way round, so that it stores the
    global batch and every process holds the same queue.

    Examples
    --------
    >>> import torch
    >>> from clusterable.losses import build_loss
    >>> memory = CrossBatchMemory(build_loss("contrastive"), memory_size=64, embedding_dim=4)
    >>> labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    >>> first = memory(torch.randn(8, 4), labels)  # no partners stored yet
    >>> second = memory(torch.randn(8, 4), labels)  # the first batch is now a reference set
    >>> len(memory)
    16
    """

    argument_bounds: ClassVar[Mapping[str, Bounds]] = {
        "memory_size": Bounds(1, integer=True),
        "embedding_dim": Bounds(1, integer=True),
    }

    # The queue's buffers (register_buffer), typed for the checker.
    embeddings: Tensor  # (memory_size, embedding_dim)
    labels: Tensor  # (memory_size,) int64
    enqueued: Tensor  # () int64

    def __init__(self, loss: nn.Module, memory_size: int, embedding_dim: int) -> None:
        super().__init__()
        if isinstance(loss, DistributedLoss):
            raise ValueError(
                "wrap the memory in DistributedLoss, not the other way round: "
                "DistributedLoss(CrossBatchMemory(loss, ...)) stores the global batch, the same "
                "on every process"
            )
        if not getattr(loss, "accepts_references", False):
            reason = getattr(
                loss,
                "references_unsupported_because",
                "it does not declare accepts_references = True (a loss that takes "
                "ref_embeddings and ref_labels sets it)",
            )
            raise ValueError(f"CrossBatchMemory cannot serve {type(loss).__name__}: {reason}")
        self.check_arguments(memory_size=memory_size, embedding_dim=embedding_dim)
        self.loss = loss
        self.memory_size = int(memory_size)
        self.embedding_dim = int(embedding_dim)
        self.register_buffer("embeddings", torch.zeros(self.memory_size, self.embedding_dim))
        self.register_buffer("labels", torch.zeros(self.memory_size, dtype=torch.long))
        # Items ever enqueued: the next slot is enqueued % memory_size.
        self.register_buffer("enqueued", torch.zeros((), dtype=torch.long))

    def __len__(self) -> int:
        """Items stored now, at most ``memory_size``."""
        return min(int(self.enqueued), self.memory_size)

    def stored(self) -> tuple[Tensor, Tensor]:
        """The stored embeddings ``(k, d)`` and labels ``(k,)``, ``k = len(self)``, by slot."""
        count = len(self)
        return self.embeddings[:count], self.labels[:count]

    @torch.no_grad()
    def enqueue(self, embeddings: Tensor, labels: Tensor) -> None:
        """Store a batch, detached, in place of the oldest items once the queue is full."""
        embeddings, labels = embeddings[-self.memory_size :], labels[-self.memory_size :]
        start = int(self.enqueued)
        slots = (start + torch.arange(len(labels), device=self.labels.device)) % self.memory_size
        self.embeddings[slots] = embeddings.detach().to(self.embeddings)
        self.labels[slots] = labels.to(self.labels)
        self.enqueued += len(labels)

    def reset(self) -> None:
        """Empty the queue."""
        self.enqueued.zero_()

    def forward(
        self,
        embeddings: Tensor,
        labels: Tensor,
        ref_embeddings: Tensor | None = None,
        ref_labels: Tensor | None = None,
    ) -> Tensor:
        """The wrapped loss of the batch against the stored items; then, in training mode, the
        batch is enqueued.

        Parameters
        ----------
        embeddings : Tensor
            ``(n, d)`` the batch.
        labels : Tensor
            ``(n,)`` its labels.
        ref_embeddings, ref_labels : None
            Refused: the memory is what supplies the references (the signature is
            `EmbeddingLoss.forward`'s, so that the memory stands wherever a loss does).

        Returns
        -------
        Tensor
            The wrapped loss's value.
        """
        if ref_embeddings is not None or ref_labels is not None:
            raise ValueError(
                "CrossBatchMemory supplies the references itself (the stored batches); call it "
                "with (embeddings, labels), or pass references to the wrapped loss directly"
            )
        if not isinstance(embeddings, Tensor) or embeddings.dim() != 2:
            raise ValueError(
                "embeddings must be a 2-D (n, d) tensor, got "
                f"{tuple(embeddings.shape) if isinstance(embeddings, Tensor) else type(embeddings)}"
            )
        if embeddings.shape[1] != self.embedding_dim:
            raise ValueError(
                f"embeddings have dimension {embeddings.shape[1]} but the memory stores "
                f"embedding_dim={self.embedding_dim}; build it with the model's output dimension"
            )
        references, reference_labels = self.stored()
        value = self.loss(embeddings, labels, references, reference_labels)
        if self.training:
            self.enqueue(embeddings, torch.as_tensor(labels, device=self.labels.device))
        return value

    def extra_repr(self) -> str:
        return f"memory_size={self.memory_size}, embedding_dim={self.embedding_dim}"
