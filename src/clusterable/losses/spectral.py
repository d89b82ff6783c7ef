"""Deep Spectral Clustering Learning (DSCL) loss, with its closed-form O(n d^2) gradient.

Law, Urtasun, Zemel. Deep Spectral Clustering Learning. ICML 2017, Eq. (9)-(10).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from clusterable.losses._base import LOW_PRECISION, EmbeddingLoss, wide_dtype
from clusterable.losses._registry import register_loss


def _thin_svd(embeddings: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """Singular triplets of ``F`` at numerical rank ``r``: ``U (n, r)``, ``s (r,)``, ``V^T (r, d)``.

    Singular values below the tolerance are rounding noise, and inverting them would blow the
    pseudo-inverse up. With ``eps`` the machine epsilon of the precision the caller gave ``F`` in,
    the tolerance is the larger of two:

    - ``max(s) * max(n, d) * eps``, ``numpy.linalg.matrix_rank``'s, for the rounding of the
      decomposition, which starts from float32 at most (float16 and bfloat16 arrive upcast): its
      ``eps`` is float32's below float32;
    - ``eps * ||F||_F``, for the rounding of ``F`` itself: rounding each entry moves every singular
      value by at most ``||E||_2 <= ||E||_F <= eps / 2 * ||F||_F`` (Weyl), so a singular value
      below twice that bound may be rounding alone (a rank-3 ``F`` rounded to float16 has 3 more)
      and one above it is the matrix's. numpy's rule at bfloat16's ``eps = 2^-7`` would cut every
      singular value from ``max(n, d) = 128`` up: a loss of ``k`` and no gradient.

    At float32 and float64 the first is the larger (``||F||_F <= sqrt(min(n, d)) max(s)``).

    ``F`` in float64 is decomposed by SVD. Below float64 (float32, or float16 upcast), the
    triplets come in float64 from the eigendecomposition of the float64 Gram matrix of the thin
    side (``F^T F``, ``d x d``, or ``F F^T`` when ``n < d``): its eigenvalues ``s^2`` carry an
    absolute error near ``1e-16 max(s)^2``, so every singular value above the tolerance
    (``1.2e-7 max(n, d) max(s)`` at float32, against the Gram's resolution near ``1e-8 max(s)``)
    is resolved better than a float32 SVD resolves it, and so are the vectors, ``U = F V / s`` or
    ``V^T = U^T F / s``. On a GPU this is several times faster than a
    float32 SVD (cuSOLVER's Jacobi SVD took 7-20 ms at ``d = 512``; a float64 ``512 x 512``
    ``eigh`` about 5 ms on an H200).
    """
    if embeddings.dtype == torch.float64 or wide_dtype(embeddings) != torch.float64:
        # float64 input, or no float64 on the device (MPS): the SVD in the input's precision.
        left, singular, right_t = torch.linalg.svd(embeddings, full_matrices=False)
    else:
        left, singular, right_t = _triplets_from_gram(embeddings.double())
    decomposition_eps = min(eps, torch.finfo(torch.float32).eps)
    tolerance = torch.maximum(
        singular.max() * max(embeddings.shape) * decomposition_eps,
        singular.norm() * eps,  # ||F||_F eps
    )
    rank = int((singular > tolerance).sum())
    return left[:, :rank], singular[:rank], right_t[:rank]


def _triplets_from_gram(features: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """All ``min(n, d)`` singular triplets of a float64 ``F`` from its thin-side Gram matrix.

    A zero singular value gives a zero (not NaN) vector: it is cut by the rank tolerance.
    """
    wide = features.shape[0] < features.shape[1]
    gram = features @ features.T if wide else features.T @ features  # (k, k), k = min(n, d)
    eigenvalues, eigenvectors = torch.linalg.eigh(gram)  # ascending
    singular = eigenvalues.flip(0).clamp_min(0).sqrt()  # (k,), descending
    vectors = eigenvectors.flip(1)  # (k, k)
    inverse = torch.where(singular > 0, 1 / singular, 0.0)  # (k,)
    if wide:  # vectors are U: V^T = S^-1 U^T F
        return vectors, singular, inverse[:, None] * (vectors.T @ features)
    return (features @ vectors) * inverse, singular, vectors.T  # U = F V S^-1


class _SpectralLossFunction(torch.autograd.Function):
    """``k - tr(C F F^+)`` forward, exact ``-2 (I - F F^+) C (F^+)^T`` backward (DSCL Eq. 8-10).

    Autograd through ``torch.linalg.pinv`` agrees at full column rank but differentiates the
    singular-value cut-off when the rank changes; this closed form assumes the rank constant, as
    the paper does, and never builds an ``n x n`` matrix: ``Y`` (one-hot, ``n x k``) is applied by
    indexing and ``index_add``, so even ``k = n`` (all labels distinct) costs ``O(n d r)``.
    """

    @staticmethod
    def forward(
        ctx: FunctionCtx, embeddings: Tensor, classes: Tensor, counts: Tensor, eps: float
    ) -> Tensor:
        left, singular, right_t = _thin_svd(embeddings, eps)  # (n, r), (r,), (r, d)
        counts = counts.to(left.dtype)  # float64 below float64, see _thin_svd
        # U^T y_c for every class c: the class sums of the rows of U.
        class_sums = torch.zeros(
            counts.shape[0], left.shape[1], dtype=left.dtype, device=left.device
        ).index_add_(0, classes, left)  # (k, r)
        # tr(C F F^+) = tr(Y Y^+ U U^T) = sum_c ||U^T y_c||^2 / n_c.
        trace = (class_sums.square().sum(1) / counts).sum()
        ctx.save_for_backward(left, singular, right_t, classes, counts, class_sums)
        return (counts.shape[0] - trace).to(embeddings.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor, None, None, None]:
        left, singular, right_t, classes, counts, class_sums = ctx.saved_tensors
        # Eq. (9): G = (Y - F[F^+ Y]) [F^+ (Y^+)^T]^T, with F = U S V^T, F^+ = V S^-1 U^T and
        # F F^+ Y = U (U^T Y): both brackets are thin (d x k), so nothing n x n (or n x k) appears.
        projected_labels = class_sums.T  # (r, k)  U^T Y
        pinv_label_means_t = (
            projected_labels / singular[:, None] / counts
        ).T @ right_t  # (k, d)  [F^+ (Y^+)^T]^T
        half_gradient = pinv_label_means_t[classes] - left @ (
            projected_labels @ pinv_label_means_t
        )  # (n, d)  G
        # Loss = k - trace, and d trace / dF = 2 G: the paper's "rescaled gradient" drops the 2.
        gradient = -2 * grad_output.to(half_gradient.dtype) * half_gradient
        return gradient.to(grad_output.dtype), None, None, None


@register_loss("spectral")
class SpectralClusteringLoss(EmbeddingLoss):
    r"""Deep Spectral Clustering Learning loss (Law, Urtasun, Zemel, ICML 2017, Eq. 10).

    .. math:: \mathrm{Loss}(F) = k - \operatorname{tr}(C F F^{+}), \qquad C = Y Y^{+},

    where ``F`` is the ``(n, d)`` batch of embeddings, ``Y`` the ``(n, k)`` one-hot assignment of
    the ``k`` classes present in the batch, and ``F^+`` the Moore-Penrose pseudo-inverse.
    ``F F^+`` is the relaxed k-means partition of the batch (the projection on the column space of
    ``F``) and ``C`` the true one, so the loss is ``||C - F F^+||^2 / 2`` up to a rank term.

    Value convention: ``k - trace``, in ``[0, k]`` (not averaged over items or classes). It is 0
    when the column space of ``F`` contains every class indicator (e.g. each class collapsed to
    its own point with the class points linearly independent), and ``k`` when ``F`` is orthogonal
    to all of them. With ``r = rank(F) < k`` it cannot go below ``k - r``: pick ``d >= k``, as the
    paper does (``d = k``). A batch of one class gives ``1 - ||P_F 1||^2 / n``, which still pulls
    the class together; a batch of distinct labels gives ``n - rank(F)``, with zero gradient. So
    does a batch of no more items than dimensions (``n <= d``): ``F`` then has rank ``n``,
    ``F F^+`` is the identity and the loss is 0 whatever the embeddings, so a run needs
    ``batch_size > embedding_dim`` (:attr:`needs_more_items_than_dimensions`; the paper: 1,260
    items a batch, ``d = k``).

    The gradient is the paper's closed form, ``-2 (I - F F^+) C (F^+)^T`` (Eq. 8; the paper's
    rescaled gradient ``G`` of Eq. 9 and Algorithm 1 is half of it, a learning-rate constant),
    computed from a thin SVD in ``O(n d^2)`` time and ``O(n d)`` memory. The pseudo-inverse uses the
    numerical rank (numpy's tolerance ``max(s) * max(n, d) * eps``, or that of the rounding of
    ``F`` to the dtype it is passed in, ``eps ||F||_F``, where larger: float16 and bfloat16), so
    rank-deficient ``F`` (duplicate dimensions, ``d > n``) gives a finite loss and gradient; the
    gradient is exact wherever the rank is locally constant, which holds almost everywhere.

    Takes no arguments.

    Examples
    --------
    >>> import torch
    >>> loss = SpectralClusteringLoss()
    >>> labels = torch.tensor([0, 0, 1, 1, 2, 2])
    >>> value = loss(torch.nn.functional.one_hot(labels).double(), labels)  # F = Y
    >>> abs(float(value)) < 1e-12
    True
    """

    # The rank is decided at the precision the caller's F is in: after an upcast of float16, its
    # rounding (1e-3 relative) would count as rank at float32's tolerance.
    upcasts_half_precision = False

    # F F^+ is the identity on a batch of n <= d items: the loss is 0 with a zero gradient.
    needs_more_items_than_dimensions = True

    references_unsupported_because = (
        "DSCL's loss is a function of the batch matrix F as a whole (its projection F F^+, "
        "Eq. 10), not a sum over pairs, and past embeddings in F would carry no gradient; the "
        "paper's answer to small batches is its large-batch trick: set TrainConfig.chunk_size "
        "(--chunk-size) and a larger batch_size (Sec. 4.1)"
    )

    def compute(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        eps = torch.finfo(embeddings.dtype).eps
        if embeddings.dtype in LOW_PRECISION:
            embeddings = embeddings.float()
        _, classes, counts = torch.unique(labels, return_inverse=True, return_counts=True)
        return _SpectralLossFunction.apply(embeddings, classes, counts.to(embeddings.dtype), eps)
