"""LeNet-style CNN, the backbone of MsDNN's MNIST sub-class experiment (Chauhan et al.,
Sec. IV-A)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from clusterable._ranges import Bounds
from clusterable.models._conv import ConvStage, MirrorDecoder, conv_encoder, image_shape
from clusterable.models._registry import register_model


def _stages(channels: Sequence[int], kernel_size: int) -> list[ConvStage]:
    return [ConvStage(c, kernel_size, pool=True) for c in channels]


def lenet_decoder(
    input_shape: tuple[int, ...],
    embedding_dim: int,
    *,
    channels: Sequence[int] = (20, 50),
    kernel_size: int = 5,
    hidden_dim: int = 500,
    sigmoid: bool = True,
) -> nn.Module:
    """Mirror of :func:`lenet`: two fully connected layers, then two deconvolutions."""
    return MirrorDecoder(
        image_shape("lenet", input_shape),
        _stages(channels, kernel_size),
        embedding_dim,
        [hidden_dim],
        nn.ReLU,
        sigmoid=sigmoid,
    )


#: Filter counts, kernel size and width are counts.
_ARGUMENT_BOUNDS = {"channels": Bounds(1), "kernel_size": Bounds(1), "hidden_dim": Bounds(1)}


@register_model("lenet", decoder=lenet_decoder, argument_bounds=_ARGUMENT_BOUNDS, batchnorm=False)
def lenet(
    input_shape: tuple[int, ...],
    *,
    channels: Sequence[int] = (20, 50),
    kernel_size: int = 5,
    hidden_dim: int = 500,
) -> tuple[nn.Module, int]:
    """``[conv 5x5 -> ReLU -> max-pool 2] x 2 -> FC 500 -> ReLU``; the head is the last FC.

    The widths are those of the Caffe LeNet (20 and 50 filters, 500 hidden units), with ReLU after
    each convolution and 'same' padding so that 8 x 8 inputs survive both pools. MsDNN says only
    "similar to LeNet".

    Parameters
    ----------
    input_shape : tuple of int
        ``(C, H, W)``, ``H, W >= 8``.
    channels : sequence of int
        Filters per convolution, each at least 1.
    kernel_size : int
        Odd kernel size, at least 1.
    hidden_dim : int
        Width of the fully connected layer before the head, at least 1.

    Returns
    -------
    (nn.Module, int)
        The backbone and its output width (``hidden_dim``).
    """
    convs, flat = conv_encoder(
        image_shape("lenet", input_shape), _stages(channels, kernel_size), nn.ReLU
    )
    return nn.Sequential(convs, nn.Linear(flat, hidden_dim), nn.ReLU()), hidden_dim
