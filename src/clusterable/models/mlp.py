"""Feed-forward network of COREL (Kenyon-Dean et al., AAAI 2019, Sec. 4): hidden layers with
LeakyReLU, for feature vectors or flattened images."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

from torch import nn

from clusterable._ranges import Bounds
from clusterable.models._conv import mlp_layers
from clusterable.models._registry import register_model


def mlp_decoder(
    input_shape: tuple[int, ...],
    embedding_dim: int,
    *,
    hidden_dims: Sequence[int] = (256,),
    negative_slope: float = 0.01,
    sigmoid: bool = True,
) -> nn.Module:
    """The encoder's layers in reverse, as MsDNN-AE does for 20 Newsgroups (Sec. IV-D).

    ``(n, embedding_dim) -> (n, *input_shape)``, through a sigmoid when ``sigmoid``.
    """
    activation = partial(nn.LeakyReLU, negative_slope)
    widths = [embedding_dim, *reversed(hidden_dims)]
    layers = mlp_layers(widths, activation)
    layers.append(nn.Linear(widths[-1], math.prod(input_shape)))
    if sigmoid:
        layers.append(nn.Sigmoid())
    layers.append(nn.Unflatten(1, input_shape))
    return nn.Sequential(*layers)


#: Layer widths are counts; LeakyReLU's slope on negative inputs runs from 0 (ReLU) to 1 (linear).
_ARGUMENT_BOUNDS = {"hidden_dims": Bounds(1), "negative_slope": Bounds(0, 1)}


@register_model("mlp", decoder=mlp_decoder, argument_bounds=_ARGUMENT_BOUNDS, batchnorm=False)
def mlp(
    input_shape: tuple[int, ...],
    *,
    hidden_dims: Sequence[int] = (256,),
    negative_slope: float = 0.01,
) -> tuple[nn.Module, int]:
    """COREL's FFNN: flatten, then ``Linear -> LeakyReLU`` per entry of ``hidden_dims``.

    COREL's FFNN has two hidden layers and its latent space is the *final hidden layer*; the
    class weights live in the loss. Here that final hidden layer is the embedding head, so the
    default ``hidden_dims=(256,)`` plus the head make the paper's two hidden layers, and the
    embedding is the paper's latent space before its activation (a metric embedding is left
    linear). The paper's widths and LeakyReLU slope were lost from its text: 256 and PyTorch's
    default slope 0.01 are our choices.

    Parameters
    ----------
    input_shape : tuple of int
        Any shape; inputs are flattened.
    hidden_dims : sequence of int
        Widths of the hidden layers before the head, each at least 1 (none: a linear model).
    negative_slope : float
        LeakyReLU slope, in ``[0, 1]``.

    Returns
    -------
    (nn.Module, int)
        The backbone and its output width.
    """
    activation = partial(nn.LeakyReLU, negative_slope)
    widths = [math.prod(input_shape), *hidden_dims]
    return nn.Sequential(nn.Flatten(), *mlp_layers(widths, activation)), widths[-1]
