"""Losses of the five papers, one module each, all called as ``loss(embeddings, labels)``.

Build one by name with :func:`build_loss`, or import its class. Beyond one batch:
:class:`CrossBatchMemory` (past batches as extra partners of a pair-based loss) and
:class:`DistributedLoss` (the global batch of a DDP run). :class:`AutoencoderLoss` adds MsDNN-AE's
reconstruction term to any loss. A loss of one's own subclasses :class:`EmbeddingLoss`, or
:class:`PairLoss` when it is a function of the distances and label masks between the batch items
(and a memory's references).
"""

from clusterable.losses._base import EmbeddingLoss, NonFiniteEmbeddings
from clusterable.losses._registry import (
    available_losses,
    build_loss,
    loss_class,
    register_loss,
)
from clusterable.losses.autoencoder import AutoencoderLoss, msdnn_autoencoder_loss
from clusterable.losses.center import CenterLoss
from clusterable.losses.contrastive import ContrastiveLoss
from clusterable.losses.corel import (
    AttractiveRepulsiveLoss,
    CosineCORELLoss,
    CrossEntropyLoss,
    GaussianCORELLoss,
)
from clusterable.losses.distributed import DistributedLoss
from clusterable.losses.expected_triplet import ExpectedTripletLoss
from clusterable.losses.lifted import LiftedStructureLoss
from clusterable.losses.memory import CrossBatchMemory
from clusterable.losses.msdnn import MsDNNLoss
from clusterable.losses.opml import OPMLLoss
from clusterable.losses.pair_loss import PairLoss, Pairs
from clusterable.losses.snn import SoftNearestNeighborLoss
from clusterable.losses.spectral import SpectralClusteringLoss
from clusterable.losses.triplet import TripletMarginLoss

__all__ = [
    "AttractiveRepulsiveLoss",
    "AutoencoderLoss",
    "CenterLoss",
    "ContrastiveLoss",
    "CosineCORELLoss",
    "CrossBatchMemory",
    "CrossEntropyLoss",
    "DistributedLoss",
    "EmbeddingLoss",
    "ExpectedTripletLoss",
    "GaussianCORELLoss",
    "LiftedStructureLoss",
    "MsDNNLoss",
    "NonFiniteEmbeddings",
    "OPMLLoss",
    "PairLoss",
    "Pairs",
    "SoftNearestNeighborLoss",
    "SpectralClusteringLoss",
    "TripletMarginLoss",
    "available_losses",
    "build_loss",
    "loss_class",
    "msdnn_autoencoder_loss",
    "register_loss",
]
