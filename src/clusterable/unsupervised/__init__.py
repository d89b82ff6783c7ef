"""Unsupervised metric learning (OPML): pseudo-labels from t-SNE + AAS, a metric learned on them.

Dutta, Harandi, Sekhar, "Unsupervised Deep Metric Learning via Orthogonality based Probabilistic
Loss", IEEE TAI 2020.

- :func:`pseudo_labels`: t-SNE map then AAS (or k-means), -1 for noise.
- :class:`OPML`: the standalone linear metric ``L`` on fixed features (RCGD on Euclidean x
  Grassmann); ``OPML().fit(x, pseudo_labels).transform(x)``.
- :class:`RiemannianOPMLLoss` with the trainer hooks :class:`PseudoLabelRefresh` and
  :class:`OPMLDiagnostics`: deep sOPML (Algorithm 1) in the ordinary trainer;
  ``clusterable train --loss opml --unsupervised`` runs it.

The paper's Fashion-MNIST experiment is ``clusterable reproduce opml-fashion``
(:mod:`clusterable.reproduce.opml_fashion`).
"""

from clusterable.unsupervised.deep import (
    OPMLDiagnostics,
    PseudoLabelRefresh,
    RiemannianOPMLLoss,
    backbone_features,
    flat_features,
    pseudo_label_triplets,
    with_pseudo_labels,
)
from clusterable.unsupervised.opml import OPML, riemannian_steps, sample_semi_hard_triplets
from clusterable.unsupervised.pseudo_labels import pseudo_labels

__all__ = [
    "OPML",
    "OPMLDiagnostics",
    "PseudoLabelRefresh",
    "RiemannianOPMLLoss",
    "backbone_features",
    "flat_features",
    "pseudo_label_triplets",
    "pseudo_labels",
    "riemannian_steps",
    "sample_semi_hard_triplets",
    "with_pseudo_labels",
]
