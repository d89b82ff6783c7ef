"""Convolution stages shared by the built-in CNNs, and the decoder that mirrors them.

Every convolution has an odd kernel and ``kernel_size // 2`` zero padding, so a stride-1 layer
keeps the spatial size and a stride-``s`` layer gives ``ceil(size / s)``; a stage may end with a
2 x 2 max-pool (``floor(size / 2)``). Sizes are computed here once, for the encoder's flattened
width and for the decoder's exact output sizes, so any ``(C, H, W)`` input with ``H, W >= 8``
works (digits 8 x 8, USPS 16 x 16, MNIST 28 x 28).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch import Tensor, nn

Activation = Callable[[], nn.Module]
MIN_IMAGE_SIZE = 8


@dataclass(frozen=True)
class ConvStage:
    """One convolution, its activation, and optionally a 2 x 2 max-pool.

    Parameters
    ----------
    out_channels : int
        Number of filters.
    kernel_size : int
        Odd kernel size (padding ``kernel_size // 2``).
    stride : int
        Convolution stride.
    pool : bool
        Follow the activation with ``MaxPool2d(2)``.
    """

    out_channels: int
    kernel_size: int = 3
    stride: int = 1
    pool: bool = False

    def __post_init__(self) -> None:
        if self.kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd for 'same' padding, got {self.kernel_size}")


def image_shape(name: str, input_shape: tuple[int, ...]) -> tuple[int, int, int]:
    """Check that ``input_shape`` is ``(C, H, W)`` with ``H, W >= 8`` and return it."""
    if len(input_shape) != 3 or min(input_shape[1:]) < MIN_IMAGE_SIZE or input_shape[0] < 1:
        raise ValueError(
            f"model {name!r} takes images shaped (C, H, W) with H, W >= {MIN_IMAGE_SIZE}, got "
            f"input_shape={input_shape}; use 'mlp' for feature vectors"
        )
    channels, height, width = input_shape
    return channels, height, width


def stage_sizes(
    stages: Sequence[ConvStage], size: tuple[int, int]
) -> list[tuple[tuple[int, int], tuple[int, int], tuple[int, int]]]:
    """Spatial ``(input, after convolution, output)`` sizes of each stage, as ``(h, w)`` pairs."""
    sizes = []
    for stage in stages:
        conv = (math.ceil(size[0] / stage.stride), math.ceil(size[1] / stage.stride))
        out = (conv[0] // 2, conv[1] // 2) if stage.pool else conv
        sizes.append((size, conv, out))
        size = out
    return sizes


def conv_encoder(
    input_shape: tuple[int, int, int], stages: Sequence[ConvStage], activation: Activation
) -> tuple[nn.Sequential, int]:
    """Convolution stages then a flatten: ``(n, C, H, W) -> (n, flat)``, and ``flat``."""
    channels, height, width = input_shape
    layers: list[nn.Module] = []
    for stage in stages:
        layers.append(
            nn.Conv2d(
                channels,
                stage.out_channels,
                stage.kernel_size,
                stride=stage.stride,
                padding=stage.kernel_size // 2,
            )
        )
        layers.append(activation())
        if stage.pool:
            layers.append(nn.MaxPool2d(2))
        channels = stage.out_channels
    out_h, out_w = stage_sizes(stages, (height, width))[-1][2]
    if out_h < 1 or out_w < 1:
        raise ValueError(f"input {input_shape} is too small for {len(stages)} down-sampling stages")
    layers.append(nn.Flatten())
    return nn.Sequential(*layers), channels * out_h * out_w


def mlp_layers(widths: Sequence[int], activation: Activation) -> list[nn.Module]:
    """``Linear -> activation`` for each consecutive pair of ``widths``."""
    layers: list[nn.Module] = []
    for fan_in, fan_out in itertools.pairwise(widths):
        layers += [nn.Linear(fan_in, fan_out), activation()]
    return layers


class _Deconvolution(nn.Module):
    """Mirror of one :class:`ConvStage`: un-pool, then a transposed convolution.

    The transposed convolution is told its output size, because a stride-``s`` convolution maps
    ``s`` input sizes to the same output size and only the encoder knows which one it saw.
    """

    def __init__(
        self,
        stage: ConvStage,
        in_channels: int,
        out_channels: int,
        conv_size: tuple[int, int],
        out_size: tuple[int, int],
    ) -> None:
        super().__init__()
        # Nearest up-sampling to the pre-pool size undoes a floor-halving of any parity.
        self.unpool = nn.Upsample(size=conv_size) if stage.pool else nn.Identity()
        self.deconv = nn.ConvTranspose2d(
            in_channels,
            out_channels,
            stage.kernel_size,
            stride=stage.stride,
            padding=stage.kernel_size // 2,
        )
        self.out_size = out_size

    def forward(self, x: Tensor) -> Tensor:
        return self.deconv(self.unpool(x), output_size=self.out_size)


class MirrorDecoder(nn.Module):
    """Decoder mirroring a convolutional encoder: fully connected layers, then deconvolutions.

    ``embedding -> hidden_dims (reversed) -> (C_last, h, w) -> one deconvolution per encoder
    stage, in reverse order -> (C, H, W)``, with the encoder's activation between layers and a
    sigmoid at the end when ``sigmoid`` (images scaled to [0, 1]).

    Parameters
    ----------
    input_shape : tuple of int
        The encoder's ``(C, H, W)``; the decoder's output shape.
    stages : sequence of ConvStage
        The encoder's stages.
    embedding_dim : int
        Width of the embedding it decodes.
    hidden_dims : sequence of int
        Widths of the encoder's fully connected layers between the convolutions and the head.
    activation : callable
        Builds the activation module.
    sigmoid : bool
        End with a sigmoid.
    """

    def __init__(
        self,
        input_shape: tuple[int, int, int],
        stages: Sequence[ConvStage],
        embedding_dim: int,
        hidden_dims: Sequence[int],
        activation: Activation,
        *,
        sigmoid: bool = True,
    ) -> None:
        super().__init__()
        channels, height, width = input_shape
        sizes = stage_sizes(stages, (height, width))
        out_h, out_w = sizes[-1][2]
        self.unflatten_shape = (stages[-1].out_channels, out_h, out_w)
        widths = [embedding_dim, *reversed(hidden_dims), math.prod(self.unflatten_shape)]
        self.fc = nn.Sequential(*mlp_layers(widths, activation))
        in_channels = [channels] + [s.out_channels for s in stages[:-1]]
        layers: list[nn.Module] = []
        for i in reversed(range(len(stages))):
            stage_in, conv_size, _ = sizes[i]
            layers.append(
                _Deconvolution(
                    stages[i], stages[i].out_channels, in_channels[i], conv_size, stage_in
                )
            )
            if i > 0:
                layers.append(activation())
        if sigmoid:
            layers.append(nn.Sigmoid())
        self.deconvs = nn.Sequential(*layers)

    def forward(self, embeddings: Tensor) -> Tensor:
        """``(n, embedding_dim) -> (n, C, H, W)``."""
        x = self.fc(embeddings)  # (n, C_last * h * w)
        x = x.view(-1, *self.unflatten_shape)  # (n, C_last, h, w)
        return self.deconvs(x)
