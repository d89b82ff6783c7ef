"""Deep stochastic OPML (sOPML, Algorithm 1): a backbone trained on pseudo-labels.

Dutta, Harandi, Sekhar, "Unsupervised Deep Metric Learning via Orthogonality based Probabilistic
Loss", IEEE TAI 2020, Sec. IV-B, Algorithm 1. For every mini-batch: embed it (line 7), mine
semi-hard triplets from the pseudo-labels (line 8), run ``maxiter`` RCGD steps on ``(R, L)`` from
the previous batch's values with the embeddings fixed (lines 9-10), then back-propagate the loss
to the backbone (lines 11-12).

This fits the ordinary :class:`~clusterable.train.Trainer`: :class:`RiemannianOPMLLoss` does lines
8-11 inside its forward and returns the loss with ``R`` and ``L`` frozen, so the trainer's own
optimiser step is line 12. Two trainer hooks add the rest: :class:`PseudoLabelRefresh`, the
optional recomputation of the pseudo-labels every E epochs, and :class:`OPMLDiagnostics`, the
loss's per-step diagnostics in the log.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clusterable._ranges import Bounds
from clusterable.data import LabelledDataset
from clusterable.device import DeviceSpec, resolve_device
from clusterable.losses import OPMLLoss
from clusterable.losses._pairs import partner_masks, squared_distances
from clusterable.losses._triplets import semi_hard_triplet_list
from clusterable.train.callbacks import TrainerCallback
from clusterable.train.embed import embed_dataset
from clusterable.unsupervised.opml import Triplets, riemannian_steps
from clusterable.unsupervised.pseudo_labels import PseudoLabelMethod, pseudo_labels

if TYPE_CHECKING:
    from clusterable.train import Trainer


def pseudo_label_triplets(distances: Tensor, labels: Tensor, margin: float) -> Triplets:
    """Semi-hard triplets of a batch (FaceNet), with noise items (label < 0) left out entirely.

    Listed by :class:`~clusterable.losses.OPMLLoss`'s lister (`semi_hard_triplet_list`), in
    ``O(n^2 + t)`` memory where a mask of every positive pair against every item would take
    ``O(|P| n)`` (14 MB at n = 192 in two classes, gigabytes on a GPU batch of thousands). The
    triplets are put in index order (anchor, positive, negative), so the mean over them is summed
    in the order it always was.

    Parameters
    ----------
    distances : Tensor
        ``(n, n)`` squared metric distances of the batch.
    labels : Tensor
        ``(n,)`` pseudo-labels; -1 is AAS noise.
    margin : float
        Semi-hard window.

    Returns
    -------
    tuple of Tensor
        ``(anchor, positive, negative)`` indices into the batch, each ``(t,)``.
    """
    labelled = labels >= 0  # (n,)
    both = labelled[:, None] & labelled[None, :]  # (n, n)
    is_positive, is_negative = partner_masks(labels)  # (n, n) each
    anchor, positive, negative = semi_hard_triplet_list(
        distances, is_positive & both, is_negative & both, margin
    )  # (t,) each
    n = distances.shape[1]
    order = torch.argsort((anchor * n + positive) * n + negative)  # (t,)
    return anchor[order], positive[order], negative[order]


class RiemannianOPMLLoss(OPMLLoss):
    """OPML loss of Algorithm 1: RCGD on ``(R, L)`` inside the forward, then Eq. 5 with them frozen.

    ``R`` and ``L`` do not require gradient: the Riemannian steps move them (Euclidean x
    Grassmann, :func:`~clusterable.unsupervised.opml.riemannian_steps`, warm-started from the
    previous batch), and the returned loss back-propagates into the embeddings only. The state
    dict is :class:`~clusterable.losses.OPMLLoss`'s, so a checkpoint loads into either.

    Parameters
    ----------
    *args
        The arguments of :class:`~clusterable.losses.OPMLLoss` (``embedding_dim``,
        ``metric_dim``, ``alpha_deg``, ``orthogonal``, ``weighted``, ``margin``, ``seed``),
        declared there only; the signature that ``inspect`` and ``typing`` read here is theirs
        followed by ``maxiter``.
    maxiter : int
        RCGD iterations per mini-batch (the paper: 10).
    **kwargs
        :class:`~clusterable.losses.OPMLLoss`'s arguments by keyword, as ``*args``.

    Attributes
    ----------
    last_rcgd_cost : tuple of float or None
        Mean objective of the last batch before and after its RCGD steps.
    last_mean_margin_term, last_mean_weight : float or None
        Mean ``m_i`` and ``w_i`` of the last batch's triplets after its RCGD steps.
    """

    argument_bounds: ClassVar[Mapping[str, Bounds]] = {
        **OPMLLoss.argument_bounds,
        "maxiter": Bounds(1, integer=True),
    }

    def __init__(self, *args: Any, maxiter: int = 10, **kwargs: Any) -> None:
        self.check_arguments(maxiter=maxiter)
        super().__init__(*args, **kwargs)
        self.maxiter = int(maxiter)
        self.R.requires_grad_(False)
        self.L.requires_grad_(False)
        self.last_rcgd_cost: tuple[float, float] | None = None

    def compute(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        metric = self.metric().to(embeddings.dtype)  # (d, l)
        distances = squared_distances(embeddings.detach() @ metric)  # (n, n), mining only
        triplets = pseudo_label_triplets(distances, labels, self.margin)  # Algorithm 1, line 8
        self.last_num_triplets = int(triplets[0].numel())
        if self.last_num_triplets == 0:
            self.last_rcgd_cost = None
            self.last_mean_margin_term = None
            self.last_mean_weight = None
            return 0.0 * embeddings.sum()  # finite, and backward() still reaches the model
        # Lines 9-10: RCGD on (R, L) with the embeddings held fixed; warm start = current values.
        self.last_rcgd_cost = riemannian_steps(self, embeddings, triplets, self.maxiter)
        # Line 11: the loss at the new (R, L), which stay frozen for the backbone's step.
        margin_term, weight = self.triplet_terms(
            embeddings,
            triplets,
            self.metric().to(embeddings.dtype),
            self.R.to(embeddings.dtype),
        )
        self.last_mean_margin_term = float(margin_term.detach().mean())
        self.last_mean_weight = float(weight.detach().mean())
        return F.softplus(weight * margin_term).mean()


def _declare_opml_arguments(constructor: Any) -> None:
    """Give ``constructor`` (``__init__(self, *args, <keyword-only>, **kwargs)``) the signature and
    annotations of `OPMLLoss.__init__` followed by its own keyword-only arguments: what the
    registry's keyword check and the run settings' types read, the seven arguments declared where
    OPMLLoss declares them."""
    parent = inspect.signature(OPMLLoss.__init__)
    own = [
        p for p in inspect.signature(constructor).parameters.values() if p.kind is p.KEYWORD_ONLY
    ]
    constructor.__signature__ = parent.replace(parameters=[*parent.parameters.values(), *own])
    constructor.__annotations__ = {
        **OPMLLoss.__init__.__annotations__,
        **{p.name: constructor.__annotations__[p.name] for p in own},
    }


_declare_opml_arguments(RiemannianOPMLLoss.__init__)


def flat_features(ds: LabelledDataset) -> np.ndarray:
    """``(n, prod(input_shape))`` float32 items of ``ds``, each row l2-normalised.

    The paper's representation for Fashion-MNIST: raw pixels, concatenated, l2-normalised.
    """
    return _unit_rows(ds.features(flat=True)[0])


def backbone_features(
    backbone: nn.Module, ds: LabelledDataset, device: DeviceSpec, progress: str | None = None
) -> np.ndarray:
    """``(n, feature_dim)`` float32 features of ``ds`` from an image backbone, each row
    l2-normalised, in the evaluation view of its images.

    The paper's representation for its deep experiments on photos (Sec. V-D, CUB-200, Cars-196,
    SOP): features of the ImageNet-pretrained backbone before training (there the R-MAC of
    GoogLeNet's last convolutions over three input scales, after MOM); here the backbone's own
    pooled output at one scale. ``progress``: a progress bar with this description.
    """
    backbone.to(resolve_device(device))
    features, _ = embed_dataset(backbone, ds, progress=progress)  # (n, feature_dim)
    return _unit_rows(features)


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """``(n, d)`` rows divided by their l2 norms (a zero row stays zero)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)  # (n, 1)
    return x / np.maximum(norms, np.finfo(np.float32).tiny)


def with_pseudo_labels(
    ds: LabelledDataset,
    features: np.ndarray | None = None,
    method: PseudoLabelMethod = "aas",
    seed: int = 0,
    **kwargs: Any,
) -> LabelledDataset:
    """A copy of ``ds`` whose training ``labels`` are pseudo-labels (Algorithm 1, line 2).

    ``fine_labels`` keep the original classes, for evaluation only. Noise items get -1, which
    every sampler of :mod:`clusterable.mining` skips.

    Parameters
    ----------
    ds : LabelledDataset
        The training items; their labels are not read.
    features : np.ndarray, optional
        ``(n, d)`` features to cluster; by default :func:`flat_features` (raw inputs); for an
        image backbone, :func:`backbone_features`.
    method, seed, **kwargs
        As :func:`~clusterable.unsupervised.pseudo_labels`.
    """
    features = flat_features(ds) if features is None else features
    labels = pseudo_labels(features, method, seed=seed, **kwargs)
    names = [f"cluster {c}" for c in range(int(labels.max(initial=-1)) + 1)]
    return ds.replace(labels=labels, class_names=names, fine_labels=ds.fine_labels)


class PseudoLabelRefresh(TrainerCallback):
    """Algorithm 1's outer loop as a trainer hook: new pseudo-labels every ``every`` epochs.

    Before epochs ``every + 1``, ``2 * every + 1``, ... the train set's labels are recomputed
    from the model's embeddings of it (the paper computes them once, from the raw inputs:
    :func:`with_pseudo_labels`; leave this hook out for that). Each refresh is logged
    (``event: "pseudo_labels"`` in ``log.jsonl``). On ``resume`` the labels restart from the train
    set given, until the next refresh.

    Parameters
    ----------
    every : int
        Epochs between refreshes, >= 1.
    method : {"aas", "kmeans"}
        Clustering of the refresh; ``"kmeans"`` keeps the current number of clusters.
    """

    def __init__(self, every: int, method: PseudoLabelMethod = "aas") -> None:
        if int(every) < 1:
            raise ValueError(f"pseudo-labels are refreshed every E >= 1 epochs, got {every}")
        self.every = int(every)
        self.method = method

    def on_epoch_start(self, trainer: Trainer) -> None:
        if trainer.epoch == 0 or trainer.epoch % self.every:
            return
        embeddings, _ = embed_dataset(trainer.model, trainer.train_set, device=trainer.env.device)
        current = trainer.train_set.labels
        n_clusters = len(np.unique(current[current >= 0]))
        options = {"n_clusters": n_clusters} if self.method == "kmeans" else {}
        trainer.replace_train_set(
            with_pseudo_labels(
                trainer.train_set,
                embeddings,
                self.method,
                trainer.config.seed,
                device=trainer.env.device,  # k-means where the model trains
                **options,
            )
        )
        labels = trainer.train_set.labels
        trainer.log(
            {
                "event": "pseudo_labels",
                "epoch": trainer.epoch,
                "clusters": len(np.unique(labels[labels >= 0])),
                "noise": int((labels < 0).sum()),
            }
        )


class OPMLDiagnostics(TrainerCallback):
    """Log OPML's mean margin term and mean weight after every step (``event: "opml"``).

    The loss alone cannot tell satisfied constraints (m_i -> 0) from switched-off weights
    (w -> 0); these two can.

    Parameters
    ----------
    loss : OPMLLoss
        The trainer's loss (or :class:`RiemannianOPMLLoss`), read after each step.
    """

    def __init__(self, loss: OPMLLoss) -> None:
        self.loss = loss

    def after_step(self, trainer: Trainer, loss: float) -> None:
        if self.loss.last_mean_margin_term is None:
            return
        trainer.log(
            {
                "event": "opml",
                "step": trainer.step,
                "mean_margin_term": self.loss.last_mean_margin_term,
                "mean_weight": self.loss.last_mean_weight,
            }
        )
