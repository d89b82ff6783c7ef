"""Six-convolution CNN of MsDNN (Chauhan, Davoudi, Komeili, Sec. IV-D) and its decoder for
MsDNN-AE: one fully connected layer followed by six deconvolutions."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from clusterable._ranges import Bounds
from clusterable.models._conv import ConvStage, MirrorDecoder, conv_encoder, image_shape
from clusterable.models._registry import register_model

_CONVOLUTIONS = 6


def _stages(channels: Sequence[int], kernel_size: int) -> list[ConvStage]:
    if len(channels) != _CONVOLUTIONS:
        raise ValueError(f"msdnn-cnn has {_CONVOLUTIONS} convolutions; got channels={channels}")
    # The second convolution of each pair halves the resolution (a learned down-sampling that a
    # strided deconvolution mirrors exactly).
    return [ConvStage(c, kernel_size, stride=1 + i % 2) for i, c in enumerate(channels)]


def msdnn_cnn_decoder(
    input_shape: tuple[int, ...],
    embedding_dim: int,
    *,
    channels: Sequence[int] = (32, 32, 64, 64, 128, 128),
    kernel_size: int = 3,
    sigmoid: bool = True,
) -> nn.Module:
    """MsDNN-AE's decoder: ``FC -> ReLU -> 6 deconvolutions`` mirroring :func:`msdnn_cnn`."""
    return MirrorDecoder(
        image_shape("msdnn-cnn", input_shape),
        _stages(channels, kernel_size),
        embedding_dim,
        [],
        nn.ReLU,
        sigmoid=sigmoid,
    )


#: Filter counts and kernel size are counts.
_ARGUMENT_BOUNDS = {"channels": Bounds(1), "kernel_size": Bounds(1)}


@register_model(
    "msdnn-cnn", decoder=msdnn_cnn_decoder, argument_bounds=_ARGUMENT_BOUNDS, batchnorm=False
)
def msdnn_cnn(
    input_shape: tuple[int, ...],
    *,
    channels: Sequence[int] = (32, 32, 64, 64, 128, 128),
    kernel_size: int = 3,
) -> tuple[nn.Module, int]:
    """Six convolutions with ReLU; the head is the paper's single fully connected layer.

    The paper gives six convolutions followed by one fully connected layer (the embedding, 128
    wide for MNIST and Fashion-MNIST, 32 for USPS) and "fewer filters" for USPS. Our choices:
    3 x 3 kernels, filters 32-32-64-64-128-128 with stride 2 on every second convolution
    (MNIST: 28 -> 14 -> 7 -> 4, so the head sees 128 x 4 x 4); for USPS pass
    ``channels=(16, 16, 32, 32, 64, 64)``.

    Parameters
    ----------
    input_shape : tuple of int
        ``(C, H, W)``, ``H, W >= 8``.
    channels : sequence of int
        Six filter counts, each at least 1.
    kernel_size : int
        Odd kernel size, at least 1.

    Returns
    -------
    (nn.Module, int)
        The backbone (ending in a flatten) and its output width.
    """
    return conv_encoder(
        image_shape("msdnn-cnn", input_shape), _stages(channels, kernel_size), nn.ReLU
    )
