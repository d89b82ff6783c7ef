"""Embedding networks: the papers' MLP and CNNs, pretrained backbones, and MsDNN-AE decoders.

Build one by name with :func:`build_model`; every model is an :class:`EmbeddingNet` whose
``head`` is the final linear layer.
"""

from clusterable.models import corel_cnn, lenet, mlp, msdnn_cnn  # noqa: F401  (registration)
from clusterable.models._registry import (
    PRETRAINED_PREFIXES,
    available_models,
    build_decoder,
    build_model,
    model_argument_bounds,
    model_builder,
    register_model,
)
from clusterable.models.embedding_net import EmbeddingNet

__all__ = [
    "PRETRAINED_PREFIXES",
    "EmbeddingNet",
    "available_models",
    "build_decoder",
    "build_model",
    "model_argument_bounds",
    "model_builder",
    "register_model",
]
