"""What the training-based reproductions share: one recipe per method, trained and embedded.

``msdnn-subclass`` (MsDNN Tables I and III) and ``zero-shot-fashion`` (the lifted-structure and
DSCL zero-shot protocol) both train one backbone with several losses on Fashion-MNIST and compare
the embeddings; this module holds the recipe type, the backbone each budget uses, and the one
function that trains a recipe and embeds the evaluation sets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from clusterable.data import LabelledDataset
from clusterable.losses import AutoencoderLoss, build_loss
from clusterable.models import build_decoder, build_model
from clusterable.reproduce.experiment import Budget
from clusterable.train import TrainConfig, Trainer, embed_dataset

#: MsDNN Sec. IV-D gives six convolutions for (F-)MNIST and "fewer filters" for USPS; the default
#: budget uses the fewer-filters widths, 3.5x faster per step on two loaded CPU cores.
SMALL_CHANNELS: tuple[int, ...] = (16, 16, 32, 32, 64, 64)
PAPER_CHANNELS: tuple[int, ...] = (32, 32, 64, 64, 128, 128)


@dataclass(frozen=True)
class Backbone:
    """The network every method of an experiment shares (MsDNN: "the same backbone")."""

    name: str = "msdnn-cnn"
    kwargs: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        widths = self.kwargs.get("channels")
        return f"`{self.name}`" + (f" with filters {'-'.join(map(str, widths))}" if widths else "")


def backbone_for(budget: Budget) -> Backbone:
    """MsDNN's six-convolution CNN: the paper's widths under ``--full``, fewer filters else."""
    return Backbone(
        "msdnn-cnn", {"channels": budget.pick(SMALL_CHANNELS, SMALL_CHANNELS, PAPER_CHANNELS)}
    )


@dataclass(frozen=True)
class Method:
    """One row of a table: a loss with its settings, the embedding it trains, and how.

    Attributes
    ----------
    label : str
        Row name in the report.
    loss : str
        Registry name of :func:`clusterable.losses.build_loss`.
    loss_kwargs : dict
        The loss's constructor keywords (``sigma``, ``temperature``, ``margin``, ...).
    embedding_dim : int
        Width of the embedding layer.
    normalize : bool
        l2-normalise the model's output, for losses defined on the unit sphere (FaceNet triplet),
        so that what is evaluated is the geometry the loss saw.
    reconstruction_weight : float
        MsDNN-AE's lambda; above 0 a mirrored decoder is trained with the encoder.
    """

    label: str
    loss: str
    loss_kwargs: dict[str, Any] = field(default_factory=dict)
    embedding_dim: int = 128
    normalize: bool = False
    reconstruction_weight: float = 0.0

    def with_kwargs(self, **kwargs: Any) -> Method:
        """The same method with some loss keywords changed (a grid point of a search)."""
        return replace(self, loss_kwargs={**self.loss_kwargs, **kwargs})


def train_and_embed(
    method: Method,
    train_set: LabelledDataset,
    eval_sets: Sequence[LabelledDataset],
    backbone: Backbone,
    config: TrainConfig,
) -> list[np.ndarray]:
    """Train ``backbone`` with ``method`` on ``train_set`` and embed each of ``eval_sets``.

    Parameters
    ----------
    method : Method
        The loss and its settings.
    train_set : LabelledDataset
        Labels ``0 .. k-1`` (a classification loss builds ``k`` class weights).
    eval_sets : sequence of LabelledDataset
        Sets embedded with the trained model, in order.
    backbone : Backbone
        The architecture shared by all methods.
    config : TrainConfig
        Epochs, batch, sampler and seed.

    Returns
    -------
    list of np.ndarray
        ``(n_i, method.embedding_dim)`` float32 embeddings, one per evaluation set.
    """
    torch.manual_seed(config.seed)  # the same initial weights for every method of a seed
    model = build_model(
        backbone.name,
        train_set.input_shape,
        method.embedding_dim,
        normalize=method.normalize,
        **backbone.kwargs,
    )
    decoder = None
    if method.reconstruction_weight > 0:
        decoder = build_decoder(
            backbone.name, train_set.input_shape, method.embedding_dim, **backbone.kwargs
        )
    loss = build_loss(
        method.loss,
        num_classes=train_set.num_classes,
        embedding_dim=method.embedding_dim,
        **method.loss_kwargs,
    )
    if decoder is not None:
        loss = AutoencoderLoss(loss, decoder, method.reconstruction_weight)
    Trainer(model, loss, train_set, config=config).fit()
    return [embed_dataset(model, ds)[0] for ds in eval_sets]
