"""OPML: orthogonality-based probabilistic triplet loss with a learned metric L and weights R.

Dutta, Harandi, Sekhar. "Unsupervised Deep Metric Learning via Orthogonality based Probabilistic
Loss". IEEE Transactions on Artificial Intelligence, 2020 (arXiv:2008.09880), Sec. III-A, Eq. 3-5.

Per semi-hard triplet (a, p, n) with ``m = (a + p) / 2``::

    z     = ||L^T (a - p)||^2 - 4 tan^2(alpha) ||L^T (n - m)||^2      angular constraint (Eq. 3)
    m_i   = softplus(z)
    w     = (sigmoid(a^T R R^T p) + 1 - sigmoid(m^T R R^T n)) / 2
    -log p_i = -log sigmoid(-w m_i) = softplus(w m_i)                   (Eq. 4, 5)

The loss is never below ln 2. It reaches ln 2 when the constraints hold (m_i -> 0, the goal) or
when ``R`` switches the weights off (w -> 0, degenerate): ``OPMLLoss.last_mean_margin_term``
and ``OPMLLoss.last_mean_weight`` tell the two apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from clusterable._ranges import Bounds
from clusterable.losses._base import LOW_PRECISION, EmbeddingLoss
from clusterable.losses._pairs import centred, partner_masks, squared_distances
from clusterable.losses._registry import register_loss
from clusterable.losses._triplets import semi_hard_triplet_list

#: Elements of each ``(b, l)`` block of triplet rows built at once (32 MiB in float32).
TRIPLET_BLOCK = 1 << 23


def _triplet_blocks(count: int, width: int) -> range:
    """Starts of the blocks of at most ``TRIPLET_BLOCK // width`` triplets."""
    return range(0, count, max(1, TRIPLET_BLOCK // max(width, 1)))


class _AngularConstraint(torch.autograd.Function):
    """``z = ||a - p||^2 - k ||n - (a + p) / 2||^2`` per triplet (Eq. 3), in blocks of triplets.

    Autograd through the gathered rows keeps ``(t, l)`` tensors for the backward pass (t is
    hundreds of thousands at n = 4096); this recomputes each block's differences instead, from
    the ``(n, l)`` points, with the closed-form gradient ``dz/da = 2 (a - p) + k (n - m)``,
    ``dz/dp = -2 (a - p) + k (n - m)``, ``dz/dn = -2 k (n - m)``, ``m = (a + p) / 2``.
    """

    @staticmethod
    def forward(
        ctx: Any,
        projected: Tensor,
        anchor: Tensor,
        positive: Tensor,
        negative: Tensor,
        angle_factor: float,
    ) -> Tensor:
        z = projected.new_empty(anchor.shape[0])  # (t,)
        step = _triplet_blocks(anchor.shape[0], projected.shape[1]).step
        for start in _triplet_blocks(anchor.shape[0], projected.shape[1]):
            block = slice(start, start + step)
            a, p = projected[anchor[block]], projected[positive[block]]  # (b, l) each
            middle = (a + p) / 2  # (b, l)
            z[block] = (a - p).square().sum(1) - angle_factor * (
                projected[negative[block]] - middle
            ).square().sum(1)
        ctx.angle_factor = angle_factor
        ctx.save_for_backward(projected, anchor, positive, negative)
        return z

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_z: Tensor) -> tuple[Tensor, None, None, None, None]:
        projected, anchor, positive, negative = ctx.saved_tensors
        k = ctx.angle_factor
        grad = torch.zeros_like(projected)  # (n, l)
        step = _triplet_blocks(anchor.shape[0], projected.shape[1]).step
        for start in _triplet_blocks(anchor.shape[0], projected.shape[1]):
            block = slice(start, start + step)
            a, p = projected[anchor[block]], projected[positive[block]]  # (b, l) each
            weight = grad_z[block, None]  # (b, 1)
            to_positive = 2 * weight * (a - p)  # (b, l)
            to_middle = k * weight * (projected[negative[block]] - (a + p) / 2)  # (b, l)
            grad.index_add_(0, anchor[block], to_positive + to_middle)
            grad.index_add_(0, positive[block], to_middle - to_positive)
            grad.index_add_(0, negative[block], -2 * to_middle)
        return grad, None, None, None, None


def _orthonormal_basis(matrix: Tensor) -> Tensor:
    """Orthonormal basis ``Q`` (d x l) of the column span of ``matrix``, by reduced QR.

    A float16 or bfloat16 ``matrix`` (``L`` of a loss converted with ``.bfloat16()``) is
    decomposed in float32, and ``Q`` comes out in float32: torch has no QR in those dtypes
    (``geqrf``), and the loss computes in float32 anyway (:mod:`clusterable.losses._base`).
    """
    if matrix.dtype in LOW_PRECISION:
        matrix = matrix.float()  # (d, l)
    basis, _ = torch.linalg.qr(matrix, mode="reduced")
    return basis


@register_loss("opml")
class OPMLLoss(EmbeddingLoss):
    """OPML loss (Eq. 5) on semi-hard triplets of the (pseudo-)labels, mean over the triplets.

    The paper sums over the triplets; we divide by their number (the library's convention). A
    batch with no semi-hard triplet gives 0, connected to the embeddings, ``R`` and ``L``.

    Triplets are mined with FaceNet's semi-hard rule (the paper cites FaceNet [13]) on squared
    metric distances ``||L^T (x_i - x_j)||^2``, the distance the loss itself uses:
    ``D_ap < D_an < D_ap + margin``, without gradient. Items with a negative label (the noise,
    -1, of :func:`~clusterable.unsupervised.pseudo_labels`) are in no triplet, as anchor,
    positive or negative: the loss is that of the batch without them.

    ``orthogonal=True`` evaluates the loss on the orthonormal basis ``Q`` of ``span(L)`` (reduced
    QR, differentiable), so the loss depends only on the subspace, a point of the Grassmann manifold
    (Sec. III-A); gradient descent on ``L`` then moves along the Grassmann tangent space, and
    :meth:`orthonormalize_` writes ``Q`` back into ``L`` (call it after optimiser steps to keep
    ``L`` well conditioned; Riemannian optimisers that keep ``L^T L = I`` need nothing else).
    ``orthogonal=False`` uses ``L`` as it is (the paper's ablation without orthogonality).

    ``L`` starts orthonormal (QR of a seeded Gaussian). ``R`` starts equal to ``L``, so the weights
    begin as the bilinear similarities of the initial metric that the paper motivates them with
    ("a separate parametric matrix R ... to represent L"); ``w`` stays differentiable in ``R``
    (a public precursor detaches it, which freezes ``R``).

    Parameters
    ----------
    embedding_dim : int
        Dimension d of the embeddings, at least 1.
    metric_dim : int, optional
        Dimension l of the metric, ``1 <= l <= d``; ``min(128, d)`` by default (the paper uses
        128).
    alpha_deg : float
        Angle alpha of the constraint, in degrees, in (0, 90) (the paper uses 45).
    orthogonal : bool
        Constrain ``L`` to orthonormal columns (see above).
    weighted : bool
        Use the weight ``w``; False sets ``w = 1`` (the paper's ablation, Fig. 6).
    margin : float
        Semi-hard mining window on squared metric distances, > 0 (an empty window mines
        nothing); 0.2, FaceNet's value for unit-norm embeddings (the paper's features are
        l2-normalised). Scale it with your embeddings.
    seed : int
        Seed of the initialisation of ``L`` and ``R``, in ``[0, 2**64 - 1]``.

    Attributes
    ----------
    L : nn.Parameter
        ``(d, l)`` metric.
    R : nn.Parameter
        ``(d, l)`` weight matrix.
    last_mean_margin_term : float or None
        Mean of ``m_i`` over the last forward's triplets (None before any, or with no triplet).
    last_mean_weight : float or None
        Mean of ``w`` over the last forward's triplets (1.0 when ``weighted=False``).
    last_num_triplets : int
        Number of triplets mined in the last forward.
    """

    references_unsupported_because = (
        "OPML learns its metric L and weights R from the batch's semi-hard triplets by the "
        "paper's alternating scheme (Sec. III, Algorithm 1), and its unsupervised pseudo-labels "
        "are refreshed between epochs, which would leave a memory's labels stale; train it on "
        "larger batches instead"
    )

    argument_bounds: ClassVar[Mapping[str, Bounds]] = {
        "embedding_dim": Bounds(1, integer=True),
        "metric_dim": Bounds(1, none="min(128, embedding_dim)", integer=True),
        "alpha_deg": Bounds(0, 90, low_open=True, high_open=True),
        "margin": Bounds(0, low_open=True),
        # What torch.Generator.manual_seed takes, as every seed.
        "seed": Bounds(0, 2**64 - 1, integer=True),
    }

    def __init__(
        self,
        embedding_dim: int,
        metric_dim: int | None = None,
        alpha_deg: float = 45.0,
        orthogonal: bool = True,
        weighted: bool = True,
        margin: float = 0.2,
        seed: int = 0,
    ) -> None:
        self.check_arguments(
            embedding_dim=embedding_dim,
            metric_dim=metric_dim,
            alpha_deg=alpha_deg,
            margin=margin,
            seed=seed,
        )
        self.check_flags(orthogonal=orthogonal, weighted=weighted)
        super().__init__()
        metric_dim = min(128, int(embedding_dim)) if metric_dim is None else metric_dim
        if int(metric_dim) > int(embedding_dim):
            raise ValueError(
                f"metric_dim={metric_dim} exceeds embedding_dim={embedding_dim}: L (d x l) cannot "
                "have more orthonormal columns than rows; pass metric_dim <= embedding_dim"
            )
        self.embedding_dim = int(embedding_dim)
        self.metric_dim = int(metric_dim)
        self.alpha_deg = float(alpha_deg)
        self.orthogonal = bool(orthogonal)
        self.weighted = bool(weighted)
        self.margin = float(margin)
        # 4 tan^2(alpha) of Eq. 3
        self.angle_factor = 4.0 * math.tan(math.radians(self.alpha_deg)) ** 2
        generator = torch.Generator().manual_seed(int(seed))
        gaussian = torch.randn(self.embedding_dim, self.metric_dim, generator=generator)
        start = _orthonormal_basis(gaussian)  # (d, l)
        self.L = nn.Parameter(start.clone())
        self.R = nn.Parameter(start.clone())
        self.last_mean_margin_term: float | None = None
        self.last_mean_weight: float | None = None
        self.last_num_triplets = 0

    def metric(self) -> Tensor:
        """The ``(d, l)`` matrix the distances use: ``Q`` of ``span(L)`` or ``L`` itself."""
        return _orthonormal_basis(self.L) if self.orthogonal else self.L

    @torch.no_grad()
    def orthonormalize_(self) -> OPMLLoss:
        """Replace ``L`` in place by an orthonormal basis of its span (QR retraction)."""
        self.L.copy_(_orthonormal_basis(self.L))
        return self

    def compute(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        if embeddings.shape[1] != self.embedding_dim:
            raise ValueError(
                f"embeddings have dimension {embeddings.shape[1]} but this loss was built with "
                f"embedding_dim={self.embedding_dim}; pass the model's output dimension"
            )
        metric = self.metric().to(embeddings.dtype)  # (d, l)
        weight_matrix = self.R.to(embeddings.dtype)  # (d, l)
        mining_view = centred(embeddings.detach()) @ metric.detach()  # (n, l)
        distances = squared_distances(mining_view)  # (n, n), mining only
        is_positive, is_negative = partner_masks(labels)  # (n, n) each
        # Noise (label < 0, AAS's -1) is in no triplet, as in clusterable.unsupervised's
        # Algorithm 1: as a class of its own its items would be pulled together.
        labelled = labels >= 0  # (n,)
        both = labelled[:, None] & labelled[None, :]  # (n, n)
        # The rule of clusterable.mining.semi_hard_triplets, listed from sorted rows: O(n^2 + t)
        # memory, not its (|P|, n) mask (448 MB at n = 4096 with classes of 8).
        anchor, positive, negative = semi_hard_triplet_list(
            distances, is_positive & both, is_negative & both, self.margin
        )  # (t,) each
        self.last_num_triplets = int(anchor.numel())
        if anchor.numel() == 0:
            self.last_mean_margin_term = None
            self.last_mean_weight = None
            # 0 with a graph through every input, so backward() and optimisers still run.
            return embeddings.new_zeros(()) + 0.0 * (
                (embeddings @ metric).sum() + weight_matrix.sum()
            )

        margin_term, weight = self.triplet_terms(
            embeddings, (anchor, positive, negative), metric, weight_matrix
        )
        self.last_mean_margin_term = float(margin_term.detach().mean())
        self.last_mean_weight = float(weight.detach().mean())
        return F.softplus(weight * margin_term).mean()

    def triplet_terms(
        self,
        embeddings: Tensor,
        triplets: tuple[Tensor, Tensor, Tensor],
        metric: Tensor,
        weight_matrix: Tensor,
    ) -> tuple[Tensor, Tensor]:
        """``m_i`` (smoothed Eq. 3) and ``w_i`` of given triplets under a given ``L`` and ``R``.

        The loss of Eq. 5 is ``softplus(w * m)``. Taking ``L`` and ``R`` as arguments lets a
        Riemannian optimiser (``clusterable.unsupervised``) evaluate the objective at its own
        iterates on a fixed triplet set.

        Parameters
        ----------
        embeddings : Tensor
            ``(n, d)`` points.
        triplets : tuple of Tensor
            ``(anchor, positive, negative)`` index tensors, each ``(t,)``.
        metric : Tensor
            ``(d, l)`` metric ``L`` (used as given: pass ``metric()`` for the orthogonal basis).
        weight_matrix : Tensor
            ``(d, l)`` weight matrix ``R``.

        Returns
        -------
        margin_term, weight : Tensor
            ``(t,)`` each; ``weight`` is all ones when ``weighted=False``.
        """
        anchor, positive, negative = triplets
        # z depends on differences only: centring keeps them exact far from the origin.
        projected = centred(embeddings) @ metric  # (n, l)
        z = _AngularConstraint.apply(projected, anchor, positive, negative, self.angle_factor)
        margin_term = F.softplus(z)  # (t,), m_i
        if not self.weighted:
            return margin_term, torch.ones_like(margin_term)
        weighted_view = embeddings @ weight_matrix  # (n, l), R^T x
        # x_i^T R R^T x_j for every pair, read at the triplets: O(n^2) memory, where gathering
        # the (t, l) rows of a, p and n kept several of them for the backward pass.
        similarities = weighted_view @ weighted_view.T  # (n, n)
        weight_positive = torch.sigmoid(similarities[anchor, positive])  # (t,), w+
        # m^T R R^T n with m = (a + p) / 2; w- = 1 - sigmoid(.)
        weight_negative = torch.sigmoid(
            -(similarities[anchor, negative] + similarities[positive, negative]) / 2
        )  # (t,)
        return margin_term, (weight_positive + weight_negative) / 2  # (t,) each
