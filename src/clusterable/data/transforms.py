"""Image preprocessing that follows the backbone, with torchvision's conventions on PIL images.

An ImageNet backbone is fine-tuned on images prepared as it was trained: evaluation resizes the
shorter side to ``floor(size / crop_fraction)`` (256 for 224) and takes the centre
``size x size``; training takes a random resized crop (area 8-100 %, aspect ratio 3/4-4/3) and
flips it horizontally half of the time. The box arithmetic is torchvision's
(``transforms.RandomResizedCrop.get_params``, ``functional.center_crop``, ``Resize`` of an int),
done on PIL images as torchvision does, so that neither torchvision nor timm is needed: their
CPU builds for this torch are not on PyPI (its ``torchvision`` wheel is a CUDA build).

Mean, std, input size, interpolation and crop fraction come from timm's data config or the
torchvision weights' transforms when the library is installed, ImageNet's otherwise
(:func:`backbone_preprocessing`); normalisation is the model's first step
(:mod:`clusterable.models.pretrained`), so items stay in [0, 1].
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass

import numpy as np
from PIL import Image

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
#: Side of the square an image backbone sees unless its own config says otherwise.
BACKBONE_IMAGE_SIZE = 224
#: 224 / 256: the centre crop's share of the resized image at evaluation.
DEFAULT_CROP_FRACTION = 0.875

RESAMPLING = {"bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC}


@dataclass(frozen=True)
class Preprocessing:
    """How a backbone wants its images: a square of ``size``, normalised by ``mean`` and
    ``std``, resized with ``interpolation``, centre-cropped to ``crop_fraction`` at evaluation."""

    size: int = BACKBONE_IMAGE_SIZE
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD
    interpolation: str = "bilinear"
    crop_fraction: float = DEFAULT_CROP_FRACTION

    @property
    def resize_size(self) -> int:
        """The shorter side before the centre crop (timm: ``floor(size / crop_pct)``)."""
        return math.floor(self.size / self.crop_fraction)


def _timm_preprocessing(arch: str) -> Preprocessing | None:
    try:
        timm = importlib.import_module("timm")
    except ImportError:
        return None
    pretrained_cfg = timm.models.get_pretrained_cfg(arch)
    if pretrained_cfg is None:  # a name timm does not register: the caller's defaults
        return None
    # timm 0.9 and later give a PretrainedCfg dataclass, which resolve_data_config reads only
    # as a dict; earlier versions give the dict.
    if hasattr(pretrained_cfg, "to_dict"):
        pretrained_cfg = pretrained_cfg.to_dict()
    config = timm.data.resolve_data_config(pretrained_cfg=pretrained_cfg)
    interpolation = config.get("interpolation", "bilinear")
    return Preprocessing(
        size=int(config["input_size"][-1]),
        mean=tuple(config["mean"]),
        std=tuple(config["std"]),
        interpolation=interpolation if interpolation in RESAMPLING else "bilinear",
        crop_fraction=float(config.get("crop_pct", DEFAULT_CROP_FRACTION)),
    )


def _torchvision_preprocessing(arch: str) -> Preprocessing | None:
    try:
        models = importlib.import_module("torchvision.models")
    except ImportError:
        return None
    transforms = models.get_model_weights(arch).DEFAULT.transforms()
    size = int(transforms.crop_size[0])
    return Preprocessing(
        size=size,
        mean=tuple(transforms.mean),
        std=tuple(transforms.std),
        interpolation=transforms.interpolation.value,
        crop_fraction=size / int(transforms.resize_size[0]),
    )


def backbone_preprocessing(model: str) -> Preprocessing | None:
    """The preprocessing of an image backbone ``timm:NAME`` or ``torchvision:NAME`` (its library's
    config where installed, ImageNet's defaults otherwise); None for any other model."""
    source, sep, arch = model.partition(":")
    if not sep or source not in ("timm", "torchvision"):
        return None
    lookup = _timm_preprocessing if source == "timm" else _torchvision_preprocessing
    try:
        found = lookup(arch)
    except (AttributeError, KeyError, RuntimeError, ValueError):
        found = None  # a library version without this model's config: ImageNet's defaults
    return found or Preprocessing()


def shorter_side_size(width: int, height: int, size: int) -> tuple[int, int]:
    """``(width, height)`` with the shorter side ``size`` (torchvision's ``Resize(int)``)."""
    if width <= height:
        return size, int(size * height / width)
    return int(size * width / height), size


def centre_box(width: int, height: int, size: int) -> tuple[int, int, int, int]:
    """``(left, top, right, bottom)`` of the centre ``size`` square (torchvision's rounding)."""
    left = round((width - size) / 2.0)
    top = round((height - size) / 2.0)
    return left, top, left + size, top + size


def random_resized_box(
    width: int,
    height: int,
    rng: np.random.Generator,
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> tuple[int, int, int, int]:
    """``(left, top, right, bottom)`` of a random crop: area a ``scale`` share, aspect ratio
    log-uniform in ``ratio``; ten tries, then the centre crop clamped to ``ratio``
    (``torchvision.transforms.RandomResizedCrop.get_params``)."""
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_ratio[0], log_ratio[1]))
        w = round(math.sqrt(target_area * aspect))
        h = round(math.sqrt(target_area / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            return left, top, left + w, top + h
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, round(width / min(ratio))
    elif in_ratio > max(ratio):
        w, h = round(height * max(ratio)), height
    else:
        w, h = width, height
    top, left = (height - h) // 2, (width - w) // 2
    return left, top, left + w, top + h


def evaluation_view(image: Image.Image, size: int, resize_size: int, resample: int) -> Image.Image:
    """Shorter side to ``resize_size``, then the centre ``size`` square."""
    image = image.resize(shorter_side_size(*image.size, resize_size), resample)
    return image.crop(centre_box(*image.size, size))


def training_generator(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator of item ``index``'s training view in ``epoch``: its own stream, whichever
    process draws it and whatever batch holds it, so a resumed run draws the same views."""
    return np.random.default_rng([seed, epoch, index])


def training_draw(
    width: int, height: int, rng: np.random.Generator
) -> tuple[tuple[int, int, int, int], bool]:
    """The training view's draws for an image of ``width x height``: the crop box
    (:func:`random_resized_box`), then whether it is flipped left-right (probability 1/2).
    Both the loader's view (:func:`training_view`) and the device's
    (:mod:`clusterable.data.device_augment`) take these draws."""
    box = random_resized_box(width, height, rng)
    return box, bool(rng.random() < 0.5)


def training_view(
    image: Image.Image, size: int, rng: np.random.Generator, resample: int
) -> Image.Image:
    """A random resized crop to ``size x size``, flipped left-right with probability 1/2."""
    box, flip = training_draw(*image.size, rng)
    image = image.crop(box).resize((size, size), resample)
    return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT) if flip else image
