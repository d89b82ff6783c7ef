"""Image preprocessing that follows the backbone, with torchvision's conventions on PIL images.

An ImageNet backbone is fine-tuned on images prepared as it was trained. Evaluation resizes the
image to ``floor(size / crop_fraction)`` (256 for 224) as its crop mode says, then takes the centre
``size x size`` (timm's ``transforms_imagenet_eval``, :data:`CROP_MODES`):

- ``center``: the shorter side resized, aspect ratio kept (torchvision's one mode);
- ``squash``: the whole image resized to a square, aspect ratio not kept;
- ``border``: the longer side resized, aspect ratio kept, the rest padded with the mean colour.

Training takes a random resized crop (area 8-100 %, aspect ratio 3/4-4/3) of the image, whatever
the crop mode (a random resized crop does not depend on it: timm's ``transforms_imagenet_train``
ignores it too), and flips it horizontally half of the time. The box arithmetic is torchvision's
and timm's (``transforms.RandomResizedCrop.get_params``, ``functional.center_crop``, ``Resize``
of an int, timm's ``ResizeKeepRatio`` and ``center_crop_or_pad``), done on PIL images as they
do: neither torchvision nor timm is needed (their CPU builds for this torch are not on PyPI: its
``torchvision`` wheel is a CUDA build), and the resize, which a decoded image keeps
(:mod:`clusterable.data.stored_images`), is a step apart from the crop. A timm backbone's view
is tested equal to timm's own ``create_transform`` for each crop mode.

Mean, std, input size, interpolation and crop fraction come from timm's data config or the
torchvision weights' transforms when the library is installed, ImageNet's otherwise
(:func:`backbone_preprocessing`); normalisation is the model's first step
(:mod:`clusterable.models.pretrained`), so items stay in [0, 1].
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from PIL import Image

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
#: Side of the square an image backbone sees unless its own config says otherwise.
BACKBONE_IMAGE_SIZE = 224
#: 224 / 256: the centre crop's share of the resized image at evaluation.
DEFAULT_CROP_FRACTION = 0.875

RESAMPLING = {"bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC}

#: How the evaluation view resizes an image before its centre crop (timm's ``crop_mode``): the
#: shorter side, the whole image to a square, or the longer side with the rest padded.
CROP_MODES = ("center", "squash", "border")


@dataclass(frozen=True)
class Preprocessing:
    """How a backbone wants its images: a square of ``size``, normalised by ``mean`` and
    ``std``, resized with ``interpolation`` as ``crop_mode`` says (:data:`CROP_MODES`), then
    centre-cropped to ``crop_fraction`` of the resize at evaluation.

    ``size`` is ``(height, width)`` where the backbone's own input is no square (timm's
    ``input_size`` of 1024 x 768 for its sapiens2 models): the views here are squares, so such a
    size is its library's answer, kept to say so, and a run gives the side of its square
    (``image_size``); :class:`~clusterable.data.ImageFiles` refuses the rectangle."""

    size: int | tuple[int, int] = BACKBONE_IMAGE_SIZE
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD
    interpolation: str = "bilinear"
    crop_fraction: float = DEFAULT_CROP_FRACTION
    crop_mode: str = "center"

    def __post_init__(self) -> None:
        if self.crop_mode not in CROP_MODES:
            raise ValueError(
                f"crop mode {self.crop_mode!r} is none of {', '.join(CROP_MODES)} (timm's)"
            )

    @property
    def resize_size(self) -> int:
        """The side the evaluation view resizes to before its centre crop (timm:
        ``floor(size / crop_pct)``): the shorter side, the square's, or the longer side, as
        ``crop_mode`` says.

        Raises
        ------
        ValueError
            For a ``(height, width)`` size: a square's side has one resize.
        """
        if not isinstance(self.size, int):
            raise ValueError(f"a view of {self.describe_size()} px is no square: it has no resize")
        return math.floor(self.size / self.crop_fraction)

    def describe_size(self) -> str:
        """``size`` as ``"224 x 224"``, or ``"1024 x 768"`` (height x width)."""
        height, width = (self.size, self.size) if isinstance(self.size, int) else self.size
        return f"{height} x {width}"

    def to_record(self) -> dict[str, Any]:
        """Every field, as a run stores its view (JSON values); :meth:`from_record` reads it."""
        return {**asdict(self), "mean": list(self.mean), "std": list(self.std)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any], where: str) -> Preprocessing:
        """The view a run stored (:meth:`to_record`), read from ``where``.

        Raises
        ------
        ValueError
            A record that lacks a field or holds a value no view has; the message names
            ``where``.
        """
        try:
            interpolation = str(record["interpolation"])
            if interpolation not in RESAMPLING:
                raise ValueError(f"interpolation {interpolation!r} is none of {list(RESAMPLING)}")
            size = record["size"]
            return cls(
                size=int(size) if not isinstance(size, (list, tuple)) else _height_width(size),
                mean=tuple(float(m) for m in record["mean"]),
                std=tuple(float(s) for s in record["std"]),
                interpolation=interpolation,
                crop_fraction=float(record["crop_fraction"]),
                crop_mode=str(record["crop_mode"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            reason = f"no {error}" if isinstance(error, KeyError) else str(error)
            raise ValueError(
                f"{where} records a damaged image view ({reason}); give another checkpoint of "
                "the run, or train it again"
            ) from None

    def padding_fill(self, channels: int) -> int | tuple[int, ...]:
        """The pixel value around an image smaller than the crop: the mean colour for
        ``border`` (timm's ``round(255 * mean)``; a grey image, the channels' average, as its
        normalisation takes), black otherwise (torchvision's ``CenterCrop``)."""
        if self.crop_mode != "border":
            return 0
        if channels == 1:
            return round(255 * sum(self.mean) / len(self.mean))
        return tuple(round(255 * m) for m in self.mean)


def _height_width(size: list[Any] | tuple[Any, ...]) -> tuple[int, int]:
    """``(height, width)`` of a stored non-square size."""
    height, width = size  # a ValueError where it is no pair
    return int(height), int(width)


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
    crop_mode = config.get("crop_mode")
    height, width = (int(side) for side in config["input_size"][-2:])
    return Preprocessing(
        size=height if height == width else (height, width),
        mean=tuple(config["mean"]),
        std=tuple(config["std"]),
        interpolation=interpolation if interpolation in RESAMPLING else "bilinear",
        crop_fraction=float(config.get("crop_pct", DEFAULT_CROP_FRACTION)),
        # timm's evaluation transform takes any other mode (None too) as "center"
        crop_mode=crop_mode if crop_mode in CROP_MODES else "center",
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


def longer_side_size(width: int, height: int, size: int) -> tuple[int, int]:
    """``(width, height)`` with the longer side ``size``, aspect ratio kept (timm's
    ``ResizeKeepRatio(size, longest=1)``, its rounding)."""
    ratio = max(height / size, width / size)
    return round(width / ratio), round(height / ratio)


def evaluation_size(width: int, height: int, resize_size: int, crop_mode: str) -> tuple[int, int]:
    """``(width, height)`` that the evaluation view resizes an image of ``width x height`` to
    before its centre crop, by ``crop_mode`` (:data:`CROP_MODES`)."""
    if crop_mode == "squash":
        return resize_size, resize_size
    if crop_mode == "border":
        return longer_side_size(width, height, resize_size)
    return shorter_side_size(width, height, resize_size)


def centre_box(width: int, height: int, size: int) -> tuple[int, int, int, int]:
    """``(left, top, right, bottom)`` of the centre ``size`` square (torchvision's rounding)."""
    left = round((width - size) / 2.0)
    top = round((height - size) / 2.0)
    return left, top, left + size, top + size


def centre_crop(image: Image.Image, size: int, fill: int | tuple[int, ...] = 0) -> Image.Image:
    """The centre ``size x size`` of ``image``, padded with ``fill`` first on a side shorter than
    ``size`` (torchvision's ``functional.center_crop``, timm's ``center_crop_or_pad``)."""
    width, height = image.size
    if size > width or size > height:
        padded = Image.new(image.mode, (max(width, size), max(height, size)), fill)
        padded.paste(image, (max(size - width, 0) // 2, max(size - height, 0) // 2))
        image = padded
    return image.crop(centre_box(*image.size, size))


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


def evaluation_view(
    image: Image.Image,
    size: int,
    resize_size: int,
    resample: int,
    crop_mode: str = "center",
    fill: int | tuple[int, ...] = 0,
) -> Image.Image:
    """``image`` resized to ``resize_size`` as ``crop_mode`` says (:func:`evaluation_size`),
    then its centre ``size`` square (:func:`centre_crop`, padded with ``fill``)."""
    image = image.resize(evaluation_size(*image.size, resize_size, crop_mode), resample)
    return centre_crop(image, size, fill)


def describe_evaluation_view(
    preprocessing: Preprocessing, channels: int, height: int, width: int
) -> str:
    """The evaluation view of ``preprocessing`` for images of ``channels`` at ``height x
    width``, in PIL calls, as :func:`evaluation_view` takes it (for a deployer, ``export``'s
    description): the resize its crop mode makes, then the centre crop (padded first where the
    image is smaller)."""
    resize = replace(preprocessing, size=height).resize_size  # as ImageFiles reads them
    interpolation = preprocessing.interpolation
    resampling = f"Image.Resampling.{interpolation.upper()}"
    resized = {
        "center": f"shorter side resized ({interpolation}) to {resize} px, the longer to "
        f"int({resize} * longer / shorter)",
        "squash": f"the whole image resized ({interpolation}) to {resize}x{resize} px, aspect "
        "ratio not kept",
        "border": f"longer side resized ({interpolation}) to {resize} px, the shorter to "
        f"round(shorter / (longer / {resize}))",
    }[preprocessing.crop_mode]
    crop = (
        f"the centre {height}x{width} cropped: image.crop((left, top, left + {width}, top + "
        f"{height})) with left = round((w - {width}) / 2), top = round((h - {height}) / 2)"
    )
    if preprocessing.crop_mode == "border" or preprocessing.crop_fraction > 1:
        crop += (
            f"; a side shorter than the crop is first padded to it with pixel value "
            f"{preprocessing.padding_fill(channels)}, ({width} - w) // 2 of it on the left and "
            f"({height} - h) // 2 on top"
        )
    return f"{resized} (image.resize((w, h), {resampling})), then {crop}"


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
