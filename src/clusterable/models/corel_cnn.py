"""Image CNN of COREL (Kenyon-Dean et al., AAAI 2019, Sec. 4): three convolutions of 15, 30 and
60 filters with 2 x 2 max-pooling, then two fully connected layers, LeakyReLU throughout."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from torch import nn

from clusterable._ranges import Bounds
from clusterable.models._conv import ConvStage, MirrorDecoder, conv_encoder, image_shape
from clusterable.models._registry import register_model


def _stages(channels: Sequence[int], kernel_size: int) -> list[ConvStage]:
    return [ConvStage(c, kernel_size, pool=True) for c in channels]


def corel_cnn_decoder(
    input_shape: tuple[int, ...],
    embedding_dim: int,
    *,
    channels: Sequence[int] = (15, 30, 60),
    kernel_size: int = 3,
    hidden_dim: int = 256,
    negative_slope: float = 0.01,
    sigmoid: bool = True,
) -> nn.Module:
    """Mirror of :func:`corel_cnn`: two fully connected layers, then three deconvolutions."""
    return MirrorDecoder(
        image_shape("corel-cnn", input_shape),
        _stages(channels, kernel_size),
        embedding_dim,
        [hidden_dim],
        partial(nn.LeakyReLU, negative_slope),
        sigmoid=sigmoid,
    )


#: Filter counts, kernel size and width are counts; LeakyReLU's slope runs from 0 (ReLU) to 1.
_ARGUMENT_BOUNDS = {
    "channels": Bounds(1),
    "kernel_size": Bounds(1),
    "hidden_dim": Bounds(1),
    "negative_slope": Bounds(0, 1),
}


@register_model(
    "corel-cnn", decoder=corel_cnn_decoder, argument_bounds=_ARGUMENT_BOUNDS, batchnorm=False
)
def corel_cnn(
    input_shape: tuple[int, ...],
    *,
    channels: Sequence[int] = (15, 30, 60),
    kernel_size: int = 3,
    hidden_dim: int = 256,
    negative_slope: float = 0.01,
) -> tuple[nn.Module, int]:
    """COREL's CNN: ``[conv -> LeakyReLU -> max-pool 2] x 3 -> FC -> LeakyReLU``, head = 2nd FC.

    The paper gives the filter counts (15, 30, 60) and a max-pool of kernel 2 "followed by two
    fully connected layers"; its kernel sizes, widths and slope were lost. Our choices: 3 x 3
    kernels with 'same' padding, a max-pool after *each* convolution (MNIST: 28 -> 14 -> 7 -> 3,
    so the first FC sees 60 x 3 x 3), first FC width 256, slope 0.01. As in
    :func:`~clusterable.models.mlp.mlp`, the embedding head is the paper's final hidden layer.

    Parameters
    ----------
    input_shape : tuple of int
        ``(C, H, W)``, ``H, W >= 8``.
    channels : sequence of int
        Filters per convolution, each at least 1.
    kernel_size : int
        Odd kernel size of every convolution, at least 1.
    hidden_dim : int
        Width of the first fully connected layer, at least 1.
    negative_slope : float
        LeakyReLU slope, in ``[0, 1]``.

    Returns
    -------
    (nn.Module, int)
        The backbone and its output width (``hidden_dim``).
    """
    activation = partial(nn.LeakyReLU, negative_slope)
    convs, flat = conv_encoder(
        image_shape("corel-cnn", input_shape), _stages(channels, kernel_size), activation
    )
    return nn.Sequential(convs, nn.Linear(flat, hidden_dim), activation()), hidden_dim
