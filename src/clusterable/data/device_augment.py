"""The training view made on the device: each item's own random resized crop and flip, resized
for the whole batch at once (issue 40).

The loader's view (:func:`clusterable.data.transforms.training_view`) crops and resizes each
image with PIL in a worker process; on a GPU host the workers' CPUs, not the GPU, then bound the
step. Here the workers only draw and cut: each item draws its crop box and flip from its own
stream (:func:`~clusterable.data.transforms.training_generator` of ``(seed, epoch, index)``,
:func:`~clusterable.data.transforms.training_draw`: the same draws as the loader's view, so a
resumed run, and any number of workers, draw the same boxes) and hands over the uint8 pixels of
its box (:class:`CropItems`), padded into one batch (:func:`collate_crops`); the device then
resizes every crop to the view's size in two batched matrix products (:func:`resized_crops`).
torchvision's v2 transforms cannot serve: they apply one draw to a whole batch.

The resize is PIL's (``ImagingResample``, ``Resample.c``): separable, each output pixel a
weighted sum of the input pixels under the filter (bilinear: the triangle of support 1; bicubic:
Keys' cubic with ``a = -0.5``, support 2) stretched by the downscale factor where the crop is
larger than the output (PIL's antialias), normalised to sum 1, as PIL's 22-bit fixed-point
integers, rounded to uint8 after each pass; here too, in exact int32 sums over each output's
window (one gather and multiply-add per tap: :func:`resample_taps`). One difference remains:
the horizontal pass always comes first here, while Pillow 13 runs the vertical pass first for
some crops taller than wide that it shrinks (all from about 1.8 times taller, for a square
output; the rule is not documented); the rounding between the passes then differs there, on
photos by at most one level for bilinear and two for bicubic (whose negative lobes are clipped
between the passes), on about 1 % of the values (tests/data/test_device_augment.py). The crop
boxes and flips are the loader's exactly; the flip reverses the horizontal taps. The [0, 1]
floats and the model's normalisation follow as for the loader's uint8 batches
(:func:`clusterable.train.loading.pixels_to_unit`,
``clusterable.models.pretrained.InputNormalization``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from clusterable.data.dataset import ImageFiles, LabelledDataset
from clusterable.data.transforms import training_draw, training_generator


@dataclass(frozen=True)
class CropBatch:
    """A batch of crops, cut on the host, for :func:`resized_crops` on the device.

    Parameters
    ----------
    pixels : Tensor
        ``(B, C, H, W)`` uint8: crop ``b`` in its top-left ``sizes[b]`` corner, zeros around it.
    sizes : Tensor
        ``(B, 2)`` int64: each crop's height and width.
    flips : Tensor
        ``(B,)`` bool: flipped left-right.
    size : int
        The side of the square view each crop is resized to.
    interpolation : str
        PIL's filter: ``"bilinear"`` or ``"bicubic"`` (:data:`FILTERS`).
    """

    pixels: Tensor
    sizes: Tensor
    flips: Tensor
    size: int
    interpolation: str

    def __len__(self) -> int:  # the trainer counts a batch's items by len()
        return int(self.pixels.shape[0])

    def is_pinned(self) -> bool:
        """Whether its pixels lie in pinned host memory (a copy to CUDA may then overlap)."""
        return self.pixels.is_pinned()

    def pin_memory(self) -> CropBatch:
        """The batch in pinned host memory (what DataLoader's ``pin_memory`` calls)."""
        return self._with(lambda tensor: tensor.pin_memory())

    def to(self, device: torch.device, non_blocking: bool = False) -> CropBatch:
        """The batch with its tensors on ``device``."""
        return self._with(lambda tensor: tensor.to(device, non_blocking=non_blocking))

    def _with(self, move: Callable[[Tensor], Tensor]) -> CropBatch:
        return replace(
            self, pixels=move(self.pixels), sizes=move(self.sizes), flips=move(self.flips)
        )


def crops_on_device(setting: str, device: torch.device) -> bool:
    """Whether ``setting`` (``TrainConfig.augment_on``) makes the training view of image files
    on ``device``: ``"device"``, or ``"auto"`` on CUDA."""
    return setting == "device" or (setting == "auto" and device.type == "cuda")


class CropItems(Dataset):
    """``dataset``'s training views as draws: item ``(index, epoch)`` is ``(crop, flip, label)``,
    the uint8 ``(C, h, w)`` pixels of its crop box in its stored image and whether it is
    flipped, drawn as the loader's view draws them (:class:`ImageFiles` with ``augment_seed``)."""

    def __init__(self, dataset: LabelledDataset) -> None:
        files = dataset.x
        if not isinstance(files, ImageFiles) or files.augment_seed is None:
            raise TypeError(f"{dataset.name!r} holds no image files with a training view")
        if files.preprocessing is None:  # augment_seed is None without one: for mypy
            raise TypeError(f"{dataset.name!r} has no backbone preprocessing")
        self.files, self.seed, self.labels = files, files.augment_seed, dataset.labels
        self.size, self.interpolation = files.height, files.preprocessing.interpolation

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: tuple[int, int]) -> tuple[np.ndarray, bool, int]:
        position, epoch = index
        stored = np.asarray(self.files.stored(position))  # (H, W[, C])
        height, width = stored.shape[:2]
        (left, top, right, bottom), flip = training_draw(
            width, height, training_generator(self.seed, epoch, position)
        )
        crop = stored[top:bottom, left:right]  # (h, w[, C])
        crop = crop[None] if crop.ndim == 2 else crop.transpose(2, 0, 1)  # (C, h, w)
        return crop, flip, int(self.labels[position])


def collate_crops(
    items: Sequence[tuple[np.ndarray, bool, int]], size: int, interpolation: str
) -> tuple[CropBatch, Tensor]:
    """One :class:`CropBatch` of view side ``size`` and filter ``interpolation`` from
    :class:`CropItems` items, and their int64 labels."""
    sizes = torch.tensor([crop.shape[1:] for crop, _, _ in items], dtype=torch.int64)  # (B, 2)
    height, width = (int(v) for v in sizes.max(dim=0).values)
    pixels = torch.zeros((len(items), items[0][0].shape[0], height, width), dtype=torch.uint8)
    target = pixels.numpy()  # (B, C, H, W)
    for row, (crop, _, _) in zip(target, items, strict=True):
        row[:, : crop.shape[1], : crop.shape[2]] = crop
    flips = torch.tensor([flip for _, flip, _ in items], dtype=torch.bool)
    labels = torch.tensor([label for _, _, label in items], dtype=torch.int64)
    return CropBatch(pixels, sizes, flips, size, interpolation), labels


def _triangle(x: Tensor) -> Tensor:
    """PIL's bilinear filter: ``1 - |x|`` within 1."""
    return (1 - x.abs()).clamp(min=0)


def _keys_cubic(x: Tensor, a: float = -0.5) -> Tensor:
    """PIL's bicubic filter (Keys 1981, ``a = -0.5``), support 2."""
    x = x.abs()
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return torch.where(x < 1, near, torch.where(x < 2, far, torch.zeros_like(x)))


#: PIL's filters by interpolation name: the function, and its support at scale 1.
FILTERS = {"bilinear": (_triangle, 1.0), "bicubic": (_keys_cubic, 2.0)}
#: Bits of PIL's fixed-point weights for 8-bit images (``Resample.c``: 32 - 8 - 2).
PRECISION_BITS = 22


def resample_taps(lengths: Tensor, size: int, interpolation: str) -> tuple[Tensor, Tensor]:
    """PIL's resampling taps (``precompute_coeffs``, ``normalize_coeffs_8bpc``) from inputs of
    ``lengths`` (B,) pixels to ``size`` outputs: output ``x`` of item ``b`` is the sum over ``k``
    of ``weights[b, x, k]`` times input ``first[b, x] + k``. The filter's support is stretched
    by the downscale factor (PIL's antialias); the weights, normalised to sum 1, are PIL's 22-bit
    fixed-point integers (rounded half away from zero), 0 past each output's window.

    Returns
    -------
    first : Tensor
        ``(B, size)`` int64: each output's first input.
    weights : Tensor
        ``(B, size, K)`` int32, ``K`` the widest window of the batch.
    """
    kernel, support = FILTERS[interpolation]
    scale = lengths.to(torch.float64)[:, None] / size  # (B, 1)
    stretch = scale.clamp(min=1.0)  # PIL's filterscale
    centre = (torch.arange(size, dtype=torch.float64, device=lengths.device) + 0.5) * scale
    reach = support * stretch  # (B, 1)
    first = torch.trunc(centre - reach + 0.5).clamp(min=0).to(torch.int64)  # (B, size)
    end = torch.minimum(torch.trunc(centre + reach + 0.5).to(torch.int64), lengths[:, None])
    taps = int((end - first).max())
    inputs = first[..., None] + torch.arange(taps, device=lengths.device)  # (B, size, K)
    weights = kernel((inputs - centre[..., None] + 0.5) / stretch[..., None])
    weights = weights * (inputs < end[..., None])  # (B, size, K), 0 past the window
    weights = weights / weights.sum(dim=-1, keepdim=True)
    scaled = weights * 2**PRECISION_BITS
    fixed = torch.where(weights < 0, torch.trunc(scaled - 0.5), torch.trunc(scaled + 0.5))
    return first, fixed.to(torch.int32)


def _resampled(values: Tensor, dim: int, first: Tensor, weights: Tensor) -> Tensor:
    """One pass of PIL's resize of ``values`` (int32 pixels) along ``dim`` (2: rows, 3:
    columns), its taps :func:`resample_taps` (``first`` (B, S), ``weights`` (B, S, K)): the
    integer sums, exact in int32 (``|sum| <= 255 * sum|w| < 2**31``), then PIL's ``clip8``."""
    batch, channels, height, width = values.shape
    last = values.shape[dim] - 1
    view = (batch, 1, -1, 1) if dim == 2 else (batch, 1, 1, -1)  # S along dim
    shape = [batch, channels, height, width]
    shape[dim] = first.shape[1]
    total = torch.full(shape, 2 ** (PRECISION_BITS - 1), dtype=torch.int32, device=values.device)
    for k in range(weights.shape[2]):
        index = (first + k).clamp(max=last).view(view).expand(shape)  # weight 0 where clamped
        total += torch.gather(values, dim, index) * weights[..., k].view(view)
    return (total >> PRECISION_BITS).clamp_(0, 255)  # PIL's rounding: half up, clipped


def resized_crops(batch: CropBatch) -> Tensor:
    """Each crop of ``batch`` resized to ``batch.size`` square as PIL resizes it, flipped where
    drawn: uint8 ``(B, C, size, size)`` on the batch's device."""
    pixels, sizes, flips = batch.pixels, batch.sizes, batch.flips  # (B, C, H, W), (B, 2), (B,)
    across, across_weights = resample_taps(sizes[:, 1], batch.size, batch.interpolation)
    across = torch.where(flips[:, None], across.flip(1), across)  # (B, size)
    across_weights = torch.where(flips[:, None, None], across_weights.flip(1), across_weights)
    down, down_weights = resample_taps(sizes[:, 0], batch.size, batch.interpolation)
    values = pixels.to(torch.int32)  # (B, C, H, W)
    rows = _resampled(values, 3, across, across_weights)  # (B, C, H, size): horizontal first
    return _resampled(rows, 2, down, down_weights).to(torch.uint8)  # (B, C, size, size)
