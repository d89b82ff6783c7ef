"""Standalone OPML: a linear metric on fixed features, learned from pseudo-labels by RCGD.

Dutta, Harandi, Sekhar, "Unsupervised Deep Metric Learning via Orthogonality based Probabilistic
Loss", IEEE TAI 2020, Sec. IV-A: minimise Eq. 5 over ``(R, L)`` on the product manifold
``R^{d x l} x G(l, d)`` (Euclidean x Grassmann) with Riemannian conjugate gradient (Manopt, Sec.
V-B.2; here pymanopt, its Python port, with the torch backend). The loss formula itself is
:class:`clusterable.losses.OPMLLoss` (:meth:`~clusterable.losses.OPMLLoss.triplet_terms`).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from clusterable._arrays import as_embeddings, label_kind, label_values
from clusterable._optional import require
from clusterable._ranges import Bounds, check_bounds
from clusterable.losses import OPMLLoss
from clusterable.losses._pairs import squared_distances
from clusterable.mining import positive_pairs

Triplets = tuple[Tensor, Tensor, Tensor]

#: Positive pairs scored against all n items at once when sampling triplets: bounds memory to
#: ``PAIR_CHUNK * n`` floats.
PAIR_CHUNK = 2048

#: The ranges of `OPML`'s counts, checked when it fits.
FIT_BOUNDS = {"maxiter": Bounds(1, integer=True), "max_triplets": Bounds(1, integer=True)}


def riemannian_steps(
    loss: OPMLLoss, embeddings: Tensor, triplets: Triplets, maxiter: int
) -> tuple[float, float]:
    """Run ``maxiter`` RCGD iterations on ``(R, L)`` of ``loss``, from its current values.

    The embeddings are held fixed (detached) and so are the triplets, so the objective is the
    smooth Eq. 5 that conjugate gradient and its line search need. ``L`` lives on the Grassmann
    manifold when ``loss.orthogonal`` (the polar retraction keeps ``L^T L = I`` to rounding), on
    ``R^{d x l}`` otherwise (the paper's ablation); ``R`` is always Euclidean. The result is
    written back into ``loss.R`` and ``loss.L``, which is the warm start of Algorithm 1, line 10.

    pymanopt's default conjugate gradient is used (Hestenes-Stiefel beta, adaptive line search),
    as the paper kept Manopt's defaults; the objective is the mean over triplets (the library's
    convention; the paper's sum differs by a constant factor the line search absorbs).

    Parameters
    ----------
    loss : OPMLLoss
        Holds ``R``, ``L`` (updated in place), ``alpha`` and the ``weighted`` switch.
    embeddings : Tensor
        ``(n, d)`` points the triplets index.
    triplets : tuple of Tensor
        ``(anchor, positive, negative)``, each ``(t,)``, ``t >= 1``.
    maxiter : int
        RCGD iterations (Manopt's ``maxiter``).

    Returns
    -------
    cost_before, cost_after : float
        Mean Eq. 5 objective at the starting point and at the result.
    """
    pymanopt = require("pymanopt", "OPML's Riemannian conjugate gradient")
    require("pymanopt.function", "OPML's Riemannian conjugate gradient")  # the torch backend
    euclidean, grassmann = pymanopt.manifolds.Euclidean, pymanopt.manifolds.Grassmann
    d, rank = loss.embedding_dim, loss.metric_dim
    metric_space = grassmann(d, rank) if loss.orthogonal else euclidean(d, rank)
    manifold = pymanopt.manifolds.Product([euclidean(d, rank), metric_space])
    # pymanopt works in float64 numpy, handing its torch backend CPU tensors: the fixed points
    # and triplets join them there, wherever the model runs.
    points = embeddings.detach().to("cpu", torch.float64)  # (n, d)
    anchor, positive, negative = triplets
    triplets = (anchor.cpu(), positive.cpu(), negative.cpu())  # (t,) each

    @pymanopt.function.pytorch(manifold)
    def cost(weight_matrix: Tensor, metric: Tensor) -> Tensor:
        # On the Grassmann manifold L is orthonormal already, so it is its own metric().
        margin_term, weight = loss.triplet_terms(points, triplets, metric, weight_matrix)
        return F.softplus(weight * margin_term).mean()

    start = [
        loss.R.detach().to(torch.float64).cpu().numpy(),
        loss.metric().detach().to(torch.float64).cpu().numpy(),
    ]
    problem = pymanopt.Problem(manifold, cost)
    cost_before = float(problem.cost(start))
    optimizer = pymanopt.optimizers.ConjugateGradient(max_iterations=maxiter, verbosity=0)
    result = optimizer.run(problem, initial_point=start)
    weight_matrix, metric = result.point
    with torch.no_grad():
        loss.R.copy_(torch.as_tensor(weight_matrix, dtype=loss.R.dtype, device=loss.R.device))
        loss.L.copy_(torch.as_tensor(metric, dtype=loss.L.dtype, device=loss.L.device))
    return cost_before, float(result.cost)


def sample_semi_hard_triplets(
    projected: Tensor, labels: Tensor, margin: float, max_triplets: int, seed: int
) -> Triplets:
    """FaceNet semi-hard triplets over a whole set, one random negative per positive pair.

    In-batch mining (:func:`clusterable.mining.semi_hard_triplets`) lists every semi-hard
    triplet, ``O(|P| n)`` of them; over a whole training set (3,500 items, ~10 clusters) that is
    ~10^8. Here at most ``max_triplets`` positive pairs are drawn uniformly (seeded), and each
    keeps one semi-hard negative (``D_ap < D_an < D_ap + margin`` on squared metric distances),
    drawn uniformly; pairs without one are dropped. Items with a negative label (AAS noise) are
    never an anchor, a positive or a negative.

    Parameters
    ----------
    projected : Tensor
        ``(n, l)`` items in the metric used for mining.
    labels : Tensor
        ``(n,)`` pseudo-labels; -1 is noise.
    margin : float
        Semi-hard window on squared distances.
    max_triplets : int
        Most positive pairs drawn, hence most triplets returned.
    seed : int
        Seed of both draws.

    Returns
    -------
    tuple of Tensor
        ``(anchor, positive, negative)`` indices into ``projected``, each ``(t,)``.
    """
    generator = torch.Generator().manual_seed(int(seed))
    labels = labels.to(torch.long)
    clean = labels >= 0
    # Noise gets a distinct label per item, so it forms no pair; then it is masked as a negative.
    pair_labels = torch.where(clean, labels, -1 - torch.arange(labels.numel()))
    anchor, positive = positive_pairs(pair_labels)
    if anchor.numel() > max_triplets:
        keep = torch.randperm(anchor.numel(), generator=generator)[:max_triplets]
        anchor, positive = anchor[keep], positive[keep]
    chosen = []
    for start in range(0, anchor.numel(), PAIR_CHUNK):
        a, p = anchor[start : start + PAIR_CHUNK], positive[start : start + PAIR_CHUNK]
        d_ap = (projected[a] - projected[p]).square().sum(1)[:, None]  # (c, 1)
        d_an = squared_distances(projected[a], projected)  # (c, n)
        semi_hard = ((labels[None, :] != labels[a][:, None]) & clean[None, :] & (d_an > d_ap)) & (
            d_an < d_ap + margin
        )  # (c, n)
        # Uniform choice among the semi-hard negatives: the largest of i.i.d. uniform scores.
        scores = torch.rand(semi_hard.shape, generator=generator).masked_fill(~semi_hard, -1.0)
        best, negative = scores.max(1)
        found = best >= 0
        chosen.append((a[found], p[found], negative[found]))
    if not chosen:
        empty = torch.zeros(0, dtype=torch.long)
        return empty, empty, empty
    return tuple(torch.cat(part) for part in zip(*chosen, strict=True))  # type: ignore[return-value]


class OPML:
    """Orthogonality-based Probabilistic Metric Learning on fixed features (the paper's OPML).

    ``fit`` learns ``L`` (d x l, orthonormal) and ``R`` (d x l) from pseudo-labels; ``transform``
    maps features to ``x L``. Algorithm:

    1. Drop noise items (pseudo-label -1).
    2. Initialise ``L`` orthonormal and ``R = L`` (seeded; :class:`~clusterable.losses.OPMLLoss`).
    3. Form the triplet set T once (Sec. IV: T is formed from ``c(.)`` and fixed, then Eq. 5 is
       minimised over it): semi-hard triplets under the initial metric,
       :func:`sample_semi_hard_triplets`.
    4. ``maxiter`` RCGD iterations on Euclidean x Grassmann over the whole T,
       :func:`riemannian_steps`.

    Full batch, not mini-batches: the paper's standalone OPML ran Manopt's RCGD with default
    settings except "the maximum number of epochs of RCGD, which we set as 30" (Sec. V-B.2), and
    Manopt's only iteration limit is ``maxiter``; with the whole objective evaluated at every
    iteration, one iteration is one epoch. Mini-batches are the stochastic version,
    :mod:`clusterable.unsupervised.deep` (Algorithm 1).

    Parameters
    ----------
    metric_dim : int
        l, columns of ``L`` (paper: 128).
    alpha_deg : float
        Angle of the constraint, Eq. 3 (paper: 45).
    maxiter : int
        RCGD iterations over the whole triplet set (paper: 30 "epochs").
    orthogonal : bool
        ``L`` on the Grassmann manifold; False optimises it in ``R^{d x l}`` (ablation, Tab. IX).
    weighted : bool
        Use the weight function ``w`` (False: ``w = 1``, the ablation of Fig. 6).
    seed : int
        Seed of the initialisation and of the triplet draw.
    margin : float
        Semi-hard mining window on squared metric distances (FaceNet's 0.2 for unit-norm inputs;
        the paper gives none).
    max_triplets : int
        Size cap of T (positive pairs drawn); the paper gives none.

    Attributes
    ----------
    L_ : np.ndarray
        ``(d, l)`` learned metric.
    R_ : np.ndarray
        ``(d, l)`` learned weight matrix.
    n_triplets_ : int
        Size of T.
    cost_history_ : tuple of float
        Mean objective before and after RCGD.
    mean_margin_term_, mean_weight_ : tuple of float
        Mean ``m_i`` and ``w_i`` over T before and after RCGD: the loss can also fall by
        ``w -> 0`` (degenerate: Eq. 5's weight function can switch a triplet off), so both are
        kept.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(60, 8)); y = np.repeat([0, 1, 2], 20)
    >>> model = OPML(metric_dim=4, maxiter=5).fit(x, y)
    >>> model.transform(x).shape
    (60, 4)
    """

    def __init__(
        self,
        metric_dim: int = 128,
        alpha_deg: float = 45.0,
        maxiter: int = 30,
        orthogonal: bool = True,
        weighted: bool = True,
        seed: int = 0,
        *,
        margin: float = 0.2,
        max_triplets: int = 50_000,
    ) -> None:
        self.metric_dim = metric_dim
        self.alpha_deg = alpha_deg
        self.maxiter = maxiter
        self.orthogonal = orthogonal
        self.weighted = weighted
        self.seed = seed
        self.margin = margin
        self.max_triplets = max_triplets

    def fit(self, features: np.ndarray, pseudo_labels: np.ndarray) -> OPML:
        """Learn ``L`` and ``R`` from ``(n, d)`` features and their ``(n,)`` pseudo-labels.

        Parameters
        ----------
        features : array-like
            ``(n, d)`` finite features, numpy or torch (the package's embedding rule,
            `clusterable._arrays.as_embeddings`).
        pseudo_labels : array-like
            ``(n,)`` cluster ids: integers, -1 for noise (:func:`pseudo_labels`), or strings.

        Raises
        ------
        ValueError
            If the features are not ``(n, d)`` and finite, the pseudo-labels are not one id
            per item, ``maxiter`` or ``max_triplets`` is not a count of at least 1, or no
            semi-hard triplet can be formed.
        """
        check_bounds(
            {"maxiter": self.maxiter, "max_triplets": self.max_triplets},
            FIT_BOUNDS,
            "OPML argument",
            none_allowed=False,
        )
        points = as_embeddings(features, "features")
        ids = label_values(pseudo_labels, points.shape[0], "pseudo_labels", what="pseudo-label")
        if label_kind(ids) == "strings":  # cluster names: numbered, none of them noise
            ids = np.unique(ids, return_inverse=True)[1].astype(np.int64)
        x = torch.from_numpy(points.astype(np.float64))  # (n, d)
        y = torch.from_numpy(ids)  # (n,) int64
        keep = y >= 0
        x, y = x[keep], y[keep]  # (n', d), (n',)
        loss = OPMLLoss(
            x.shape[1],
            metric_dim=self.metric_dim,
            alpha_deg=self.alpha_deg,
            orthogonal=self.orthogonal,
            weighted=self.weighted,
            margin=self.margin,
            seed=self.seed,
        ).double()
        with torch.no_grad():
            triplets = sample_semi_hard_triplets(
                x @ loss.metric(), y, self.margin, self.max_triplets, self.seed
            )
        if triplets[0].numel() == 0:
            raise ValueError(
                "no semi-hard triplet could be formed: the pseudo-labels need at least two "
                "clusters with two items each (noise, -1, does not count)"
            )
        before = self._means(loss, x, triplets)
        self.cost_history_ = riemannian_steps(loss, x, triplets, self.maxiter)
        after = self._means(loss, x, triplets)
        self.mean_margin_term_ = (before[0], after[0])
        self.mean_weight_ = (before[1], after[1])
        self.n_triplets_ = int(triplets[0].numel())
        self.L_ = loss.metric().detach().numpy()
        self.R_ = loss.R.detach().numpy()
        return self

    @staticmethod
    @torch.no_grad()
    def _means(loss: OPMLLoss, x: Tensor, triplets: Triplets) -> tuple[float, float]:
        margin_term, weight = loss.triplet_terms(x, triplets, loss.metric(), loss.R)
        return float(margin_term.mean()), float(weight.mean())

    def transform(self, x: np.ndarray) -> np.ndarray:
        """``(n, d)`` features -> ``(n, l)`` embeddings ``x L``.

        Raises
        ------
        ValueError
            If the model is not fitted, or ``x`` is not ``(n, d)`` finite features of the
            dimension it was fitted on.
        """
        if not hasattr(self, "L_"):
            raise ValueError("this OPML is not fitted yet: call fit(features, pseudo_labels)")
        points = as_embeddings(x, "x")
        if points.shape[1] != self.L_.shape[0]:
            raise ValueError(
                f"x has dimension {points.shape[1]} but this OPML was fitted on "
                f"{self.L_.shape[0]}-dimensional features; transform features of the same kind"
            )
        return points.astype(np.float64) @ self.L_  # (n, l)
