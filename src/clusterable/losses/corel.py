"""Attractive-repulsive (AR) loss and its instances: cross-entropy, Cosine- and Gaussian-COREL.

Kenyon-Dean, Cianflone, Page-Caccia, Rabusseau, Cheung, Precup. "Clustering-Oriented Representation
Learning with Attractive-Repulsive Loss". AAAI 2019 workshop (arXiv:1812.07627).

The loss owns a class matrix ``W`` (k x d). A similarity ``s(h, w_j)`` scores a latent vector ``h``
against every class; prediction is the most similar class; training minimises (Eq. 1)::

    L = [lam * sum_i L_att(i) + (1 - lam) * sum_i L_rep(i)] / n

``W`` is initialised like the output layer of ``torch.nn.Linear`` (what the paper's PyTorch
models use): uniform on ``[-1/sqrt(d), 1/sqrt(d)]`` from the global torch generator, so
``torch.manual_seed`` makes it reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clusterable._ranges import Bounds
from clusterable.losses._base import EmbeddingLoss, check_embeddings, host_readable
from clusterable.losses._pairs import squared_distances, unit_rows
from clusterable.losses._registry import register_loss


class AttractiveRepulsiveLoss(EmbeddingLoss):
    """The attractive-repulsive framework of COREL (Eq. 1), with a learned class matrix ``W``.

    Subclasses define :meth:`similarity`, :meth:`attractive` and :meth:`repulsive`.

    Parameters
    ----------
    num_classes : int
        Number of classes k (labels must lie in ``[0, k)``); at least 2 for a classifier.
    embedding_dim : int
        Dimension d of the embeddings, at least 1.
    lam : float
        Weight of the attractive term, in ``[0, 1]``; ``1 - lam`` weighs the repulsive term.

    Attributes
    ----------
    weight : nn.Parameter
        ``(k, d)`` class matrix ``W``, one row per class.
    """

    references_unsupported_because = (
        "COREL's losses compare each embedding with the learned class matrix W, never with other "
        "items, so a memory has no pairs to add partners to (W already summarises every past "
        "batch)"
    )

    argument_bounds: ClassVar[Mapping[str, Bounds]] = {
        "num_classes": Bounds(2, integer=True),
        "embedding_dim": Bounds(1, integer=True),
        "lam": Bounds(0, 1),
    }

    def __init__(self, num_classes: int, embedding_dim: int, lam: float = 0.5) -> None:
        self.check_arguments(num_classes=num_classes, embedding_dim=embedding_dim, lam=lam)
        super().__init__()
        self.num_classes = int(num_classes)
        self.embedding_dim = int(embedding_dim)
        self.lam = float(lam)
        bound = 1.0 / math.sqrt(self.embedding_dim)  # nn.Linear's default initialisation
        self.weight = nn.Parameter(
            torch.empty(self.num_classes, self.embedding_dim).uniform_(-bound, bound)
        )

    def similarity(self, embeddings: Tensor) -> Tensor:
        """``s(h_i, w_j)`` for every item and class: ``(n, d) -> (n, k)``."""
        raise NotImplementedError

    def attractive(self, similarity: Tensor, labels: Tensor) -> Tensor:
        """Per-item attractive term ``L_att(i)``: ``(n, k), (n,) -> (n,)``."""
        raise NotImplementedError

    def repulsive(self, similarity: Tensor, labels: Tensor) -> Tensor:
        """Per-item repulsive term ``L_rep(i)``: ``(n, k), (n,) -> (n,)``."""
        raise NotImplementedError

    def _class_weight(self, embeddings: Tensor) -> Tensor:
        if embeddings.shape[1] != self.embedding_dim:
            raise ValueError(
                f"embeddings have dimension {embeddings.shape[1]} but this loss was built with "
                f"embedding_dim={self.embedding_dim}; pass the model's output dimension"
            )
        # autocast hands float32 embeddings to a float32 W, a float64 model meets a float32 W:
        # follow the embeddings so both work without the user converting the loss.
        return self.weight.to(dtype=embeddings.dtype, device=embeddings.device)

    def _check_labels(self, labels: Tensor) -> None:
        if not host_readable(labels):  # CUDA-graph capture: the eager steps before it checked them
            return
        low, high = int(labels.min()), int(labels.max())
        if low < 0 or high >= self.num_classes:
            raise ValueError(
                f"labels must lie in [0, {self.num_classes}) for num_classes={self.num_classes}, "
                f"got values from {low} to {high}; remap the labels to 0..k-1 or raise num_classes"
            )

    def compute(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        self._check_labels(labels)
        similarity = self.similarity(embeddings)  # (n, k)
        attractive = self.attractive(similarity, labels)  # (n,)
        repulsive = self.repulsive(similarity, labels)  # (n,)
        return (self.lam * attractive.sum() + (1.0 - self.lam) * repulsive.sum()) / len(labels)

    @torch.no_grad()
    def predict(self, embeddings: Tensor) -> Tensor:
        """Most similar class of each embedding: ``(n, d) -> (n,)`` long, checked as the loss
        checks them (`check_embeddings`)."""
        check_embeddings(embeddings)
        if embeddings.dtype in (torch.float16, torch.bfloat16):
            embeddings = embeddings.float()
        return self.similarity(embeddings).argmax(dim=1)


@register_loss("cross-entropy")
class CrossEntropyLoss(AttractiveRepulsiveLoss):
    """Softmax cross-entropy written as an attractive-repulsive loss (COREL Eq. 2).

    Dot-product similarity ``s(h, w) = <h, w>``; ``L_att = -<h, w_y>``,
    ``L_rep = log sum_j exp(<h, w_j>)``. With the default ``lam = 0.5`` the value is **half** of the
    usual cross-entropy, ``0.5 * torch.nn.functional.cross_entropy(h @ W.T, y)``, because Eq. 1
    weighs both terms by 1/2; the gradient direction is the same, the scale is a learning-rate
    factor. Other values of ``lam`` weigh the two halves of cross-entropy unequally.

    Parameters
    ----------
    num_classes, embedding_dim, lam
        See :class:`AttractiveRepulsiveLoss`.

    Examples
    --------
    >>> import torch
    >>> loss = CrossEntropyLoss(num_classes=3, embedding_dim=4)
    >>> value = loss(torch.randn(6, 4), torch.tensor([0, 0, 1, 1, 2, 2]))
    >>> loss.predict(torch.randn(6, 4)).shape
    torch.Size([6])
    """

    def similarity(self, embeddings: Tensor) -> Tensor:
        return embeddings @ self._class_weight(embeddings).T  # (n, k)

    def attractive(self, similarity: Tensor, labels: Tensor) -> Tensor:
        return -similarity.gather(1, labels[:, None]).squeeze(1)

    def repulsive(self, similarity: Tensor, labels: Tensor) -> Tensor:
        return similarity.logsumexp(dim=1)


@register_loss("cosine-corel")
class CosineCORELLoss(AttractiveRepulsiveLoss):
    """Cosine-COREL (COREL Eq. 3 and 5).

    ``L_att = -cos(h, w_y)`` and ``L_rep = (max_{j != y} cos(h, w_j))^2``: the most similar wrong
    class is pushed towards orthogonality (the square makes an anti-aligned class as bad as an
    aligned one, which is the paper's stated reason for squaring).

    We square the **signed** maximum, as Eq. 5 is written. The authors' code zeroes the target
    column before taking the maximum, which computes ``max(0, max_{j != y} cos)^2`` and lets all
    wrong classes sit at negative cosine for free; we do not copy that, so a sample whose nearest
    wrong class has cosine -0.5 still pays 0.25.

    A zero embedding has cosine 0 with every class (``unit_rows`` guards the division).

    Parameters
    ----------
    num_classes, embedding_dim, lam
        See :class:`AttractiveRepulsiveLoss`.
    """

    def similarity(self, embeddings: Tensor) -> Tensor:
        weight = unit_rows(self._class_weight(embeddings))  # (k, d)
        return unit_rows(embeddings) @ weight.T  # (n, k)

    def attractive(self, similarity: Tensor, labels: Tensor) -> Tensor:
        return -similarity.gather(1, labels[:, None]).squeeze(1)

    def repulsive(self, similarity: Tensor, labels: Tensor) -> Tensor:
        is_target = F.one_hot(labels, self.num_classes).bool()  # (n, k)
        hardest_wrong = similarity.masked_fill(is_target, float("-inf")).amax(dim=1)  # (n,)
        return hardest_wrong.square()


@register_loss("gaussian-corel")
class GaussianCORELLoss(AttractiveRepulsiveLoss):
    """Gaussian-COREL (COREL Eq. 4 and 6).

    Similarity ``s(h, w) = -gamma ||h - w||^2`` with ``gamma = 1 / (2 sigma^2)``;
    ``L_att = gamma ||h - w_y||^2`` and ``L_rep = logsumexp_j s(h, w_j)``. At ``lam = 0.5`` this is
    half the softmax cross-entropy on Gaussian logits. ``sigma`` is fixed (the paper keeps
    sigma = 1; its code learns gamma, which we do not). ``lam`` multiplies the terms once, as Eq. 1
    says; the authors' code squares the lambda weights, which we do not copy.

    Parameters
    ----------
    num_classes, embedding_dim, lam
        See :class:`AttractiveRepulsiveLoss`.
    sigma : float
        Kernel width, > 0.
    """

    argument_bounds: ClassVar[Mapping[str, Bounds]] = {
        **AttractiveRepulsiveLoss.argument_bounds,
        "sigma": Bounds(0, low_open=True),
    }

    def __init__(
        self, num_classes: int, embedding_dim: int, lam: float = 0.5, sigma: float = 1.0
    ) -> None:
        self.check_arguments(sigma=sigma)
        super().__init__(num_classes, embedding_dim, lam)
        self.sigma = float(sigma)
        # sigma * sigma, not sigma**2: the power raises OverflowError from sigma = 1.4e154, where
        # the product is inf and gamma 0 (a flat kernel), as the limit is.
        self.gamma = 0.5 / (self.sigma * self.sigma)

    def similarity(self, embeddings: Tensor) -> Tensor:
        return -self.gamma * squared_distances(embeddings, self._class_weight(embeddings))

    def compute(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        """Eq. 1 on each item's similarities measured from its similarity to a fixed origin ``o``,
        the class centres' mean: ``s(h, w_j) = c + r_j`` with ``c = -gamma ||h - o||^2`` and
        ``r_j = -gamma (||w_j - o||^2 - 2 (h - o).(w_j - o))``. Shifting a row of similarities
        by ``-c`` moves ``L_att`` by ``+c`` and ``L_rep`` by ``-c``, so

            L = [lam sum_i L_att(r_i) + (1 - lam) sum_i L_rep(r_i) + (1 - 2 lam) sum_i c_i] / n.

        Far from the centres ``s`` is near ``-gamma ||h||^2``, which float32 holds to a step
        above the gaps between the classes' similarities: the softmax of ``L_rep`` lost them, and
        with them the cancellation of ``h`` in the gradient (140 % off at ``||h|| = 480``).
        ``r`` holds the gaps at the scale of ``||h - o|| ||w - o||``; at ``lam = 0.5`` the loss is
        the cross-entropy of ``r`` alone.
        """
        self._check_labels(labels)
        weight = self._class_weight(embeddings)  # (k, d)
        origin = weight.detach().mean(0)  # (d,), a constant: the identity holds for any point
        centred = embeddings - origin  # (n, d)
        centred_weight = weight - origin  # (k, d)
        relative = torch.addmm(
            centred_weight.square().sum(1), centred, centred_weight.T, alpha=-2
        ).mul(-self.gamma)  # (n, k), r
        attractive = self.attractive(relative, labels)  # (n,)
        repulsive = self.repulsive(relative, labels)  # (n,)
        total = self.lam * attractive.sum() + (1.0 - self.lam) * repulsive.sum()
        if self.lam != 0.5:  # the c term; left out where its weight is 0 (c overflows first)
            total = total - (1.0 - 2.0 * self.lam) * self.gamma * centred.square().sum()
        return total / len(labels)

    def attractive(self, similarity: Tensor, labels: Tensor) -> Tensor:
        return -similarity.gather(1, labels[:, None]).squeeze(1)

    def repulsive(self, similarity: Tensor, labels: Tensor) -> Tensor:
        return similarity.logsumexp(dim=1)
