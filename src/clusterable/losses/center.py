"""Center loss: softmax cross-entropy plus a pull of each embedding towards its class centre.

Wen, Zhang, Li, Qiao. "A Discriminative Feature Learning Approach for Deep Face Recognition".
ECCV 2016. The COREL paper (Kenyon-Dean et al., 2019, Eq. 8) uses it as its strongest baseline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from clusterable._ranges import Bounds
from clusterable.losses._base import EmbeddingLoss
from clusterable.losses._registry import register_loss
from clusterable.losses.corel import CrossEntropyLoss


@register_loss("center")
class CenterLoss(EmbeddingLoss):
    """Softmax cross-entropy plus ``(lam / 2) ||h_i - c_{y_i}||^2``, averaged over the batch.

    ``L = mean_i CE(W h_i, y_i) + (lam / 2) mean_i ||h_i - c_{y_i}||^2`` (Wen et al. Eq. 5, with the
    batch sums of both terms divided by n, which keeps their ratio). The cross-entropy is the full
    softmax cross-entropy (not the ``lam = 0.5`` attractive-repulsive half of
    :class:`~clusterable.losses.CrossEntropyLoss`); its class matrix lives in ``classifier``.

    The centres ``c_j`` are a buffer, not a parameter: after every forward pass in training mode
    (``loss.train()``, the default) they move by Wen et al.'s rule (Eq. 4 and Algorithm 1), using
    the centres before the step for the loss value::

        c_j <- c_j - alpha * sum_{i: y_i = j} (c_j - h_i) / (1 + n_j)

    with the embeddings detached, ``n_j`` the count of class j in the batch; absent classes stay.
    ``loss.eval()`` freezes them (for validation batches). They start at zero.

    Parameters
    ----------
    num_classes : int
        Number of classes k (labels in ``[0, k)``), at least 2.
    embedding_dim : int
        Dimension d of the embeddings.
    lam : float
        Weight of the centre term, >= 0. Default 0.003, Wen et al.'s value for their face
        experiments (the COREL paper tunes it per data set).
    alpha : float
        Learning rate of the centres, in ``(0, 1]``. Default 0.5, Wen et al.'s value.

    Attributes
    ----------
    classifier : CrossEntropyLoss
        Holds the softmax class matrix ``classifier.weight`` (k, d).
    centers : Tensor
        ``(k, d)`` buffer of class centres.
    """

    centers: Tensor  # (num_classes, embedding_dim): a buffer (register_buffer), typed here

    references_unsupported_because = (
        "the centre loss compares each embedding with its class centre and the softmax class "
        "matrix, never with other items (the centres already average past batches)"
    )

    argument_bounds: ClassVar[Mapping[str, Bounds]] = {
        **CrossEntropyLoss.argument_bounds,
        "lam": Bounds(0),
        "alpha": Bounds(0, 1, low_open=True),
    }

    def __init__(
        self, num_classes: int, embedding_dim: int, lam: float = 0.003, alpha: float = 0.5
    ) -> None:
        self.check_arguments(
            num_classes=num_classes, embedding_dim=embedding_dim, lam=lam, alpha=alpha
        )
        super().__init__()
        self.classifier = CrossEntropyLoss(num_classes, embedding_dim)
        self.num_classes = self.classifier.num_classes
        self.embedding_dim = self.classifier.embedding_dim
        self.lam = float(lam)
        self.alpha = float(alpha)
        self.register_buffer("centers", torch.zeros(self.num_classes, self.embedding_dim))

    def compute(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        self.classifier._check_labels(labels)
        logits = self.classifier.similarity(embeddings)  # (n, k)
        softmax_term = F.cross_entropy(logits, labels)
        # The centres before the update below (which makes a new tensor, never writes to these).
        own_centers = self.centers[labels].to(embeddings.dtype)  # (n, d)
        center_term = (embeddings - own_centers).square().sum(dim=1).mean()
        if self.training:
            self.update_centers(embeddings, labels)
        return softmax_term + 0.5 * self.lam * center_term

    @torch.no_grad()
    def update_centers(self, embeddings: Tensor, labels: Tensor) -> None:
        """One step of Wen et al.'s centre update (Eq. 4); every training-mode forward calls it."""
        embeddings = embeddings.detach().to(self.centers.dtype)
        counts = torch.bincount(labels, minlength=self.num_classes).to(self.centers.dtype)  # (k,)
        sums = torch.zeros_like(self.centers).index_add_(0, labels, embeddings)  # (k, d)
        # sum_{i: y_i = j} (c_j - h_i) = n_j c_j - sum_i h_i
        delta = (counts[:, None] * self.centers - sums) / (1.0 + counts[:, None])  # (k, d)
        # A new tensor, not sub_: a compiled loss's backward may recompute from the centres it
        # was given (torch.compile saves inputs, not intermediates), which must stay unchanged.
        self.centers = self.centers - self.alpha * delta

    @torch.no_grad()
    def predict(self, embeddings: Tensor) -> Tensor:
        """Class of largest softmax logit: ``(n, d) -> (n,)`` long."""
        return self.classifier.predict(embeddings)
