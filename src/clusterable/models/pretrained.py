"""Pretrained image backbones from timm or torchvision (the optional ``vision`` extra).

Oh Song et al. (CVPR 2016, Sec. 6) and DSCL fine-tune an ImageNet network with a new embedding
layer; these builders give that backbone, without its classifier, with weights read from a local
file. Nothing is ever downloaded.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pickle
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import torch
from safetensors import SafetensorError
from torch import Tensor, nn

from clusterable.data.transforms import Preprocessing, backbone_preprocessing


def _import_optional(module: str, model_name: str) -> ModuleType:
    """Import an optional package, or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        package = module.split(".")[0]
        raise ImportError(
            f"model {model_name!r} needs the optional package {package!r}, which is not "
            f"installed: pip install 'clusterable[vision]' (or pip install {package})"
        ) from error


#: Model arguments a pretrained backbone never takes: its weights come from ``weights=PATH``.
NOT_ARGUMENTS = {
    "pretrained": "weights come from a local file: --model-arg weights=PATH (YAML: model_args: "
    "{weights: PATH}); nothing is downloaded",
    "weights_only": "weights are read as tensors only, always",
}


def pretrained_architectures(source: str) -> tuple[str, ...] | None:
    """The model names ``source`` (``"timm"`` or ``"torchvision"``) builds, as its own listing
    (``timm.list_models()``, ``torchvision.models.list_models()``) gives them; None where the
    package is not installed (the build then says how to install it) or lists none."""
    module = "timm" if source == "timm" else "torchvision.models"
    if module not in sys.modules:
        try:
            if importlib.util.find_spec(module.split(".")[0]) is None:
                return None
        except (ValueError, ImportError):  # a stand-in module without a spec
            return None
    try:
        listing = getattr(importlib.import_module(module), "list_models", None)
    except ImportError:
        return None
    return None if listing is None else tuple(listing())


def is_architecture(source: str, arch: str, names: tuple[str, ...]) -> bool:
    """Whether ``arch`` is among ``names`` (timm's ``NAME.TAG`` by its ``NAME``)."""
    return (arch.split(".", 1)[0] if source == "timm" else arch) in names


def _built(build: object, name: str, *args: object, **kwargs: object) -> nn.Module:
    """``build(*args, **kwargs)``; an argument the library refuses (its TypeError) is a
    ValueError naming the model."""
    try:
        return build(*args, **kwargs)  # type: ignore[operator]
    except TypeError as error:
        given = ", ".join(f"{k}={v!r}" for k, v in kwargs.items() if k not in _BUILD_KEYWORDS)
        raise ValueError(
            f"model {name!r} refused its arguments ({given or 'none given'}): {error}; give the "
            "keywords its library documents for it as --model-arg NAME=VALUE"
        ) from None


#: Keywords the builders below pass themselves.
_BUILD_KEYWORDS = frozenset(
    {"num_classes", "in_chans", "pretrained", "pretrained_cfg_overlay", "weights"}
)


#: What reading a weights file that is no state dict of the model raises, in torch, safetensors
#: or timm: text or an empty file, a file cut short, a pickled module rather than its state
#: dict, a lone tensor, or tensors of another shape.
_UNREADABLE_WEIGHTS = (
    pickle.UnpicklingError,
    EOFError,
    KeyError,
    RuntimeError,
    AttributeError,
    SafetensorError,
)

_Built = TypeVar("_Built")


def _with_weights(
    load: Callable[[], _Built], path: str | os.PathLike[str], model_name: str
) -> _Built:
    """``load()``, which reads the weights file ``path`` of ``model_name``; a file it cannot read
    as the model's weights is a ValueError of one line naming the file and what to give."""
    try:
        return load()
    except _UNREADABLE_WEIGHTS as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        said = lines[0].split(". ")[0] if lines else ""  # torch's first sentence, not its advice
        if said.endswith(":") and len(lines) > 1:  # a size mismatch: the first tensor's
            said += f" {lines[1]}"
        raise ValueError(
            f"weights file {path} cannot be read as weights of {model_name!r} "
            f"({type(error).__name__}{': ' + said if said else ''}); give a .safetensors file or "
            "a torch.save state dict of that model's weights"
        ) from None


def _load_state_dict(path: str | os.PathLike[str], model_name: str) -> dict[str, Tensor]:
    """Read a ``.safetensors`` or a ``torch.save`` state dict (optionally under "state_dict")."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file for model {model_name!r} not found: {path}")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return _with_weights(lambda: load_file(path), path, model_name)
    state = _with_weights(
        lambda: torch.load(path, map_location="cpu", weights_only=True), path, model_name
    )
    state = state.get("state_dict", state) if isinstance(state, Mapping) else state
    if not isinstance(state, Mapping):
        raise ValueError(
            f"weights file {path} holds a {type(state).__name__}, not a state dict of "
            f"{model_name!r}; give a .safetensors file or a torch.save state dict of that "
            "model's weights"
        )
    return dict(state)


class InputNormalization(nn.Module):
    """``(x - mean) / std`` per channel: the backbone's ImageNet normalisation as its first step,
    so that every data path hands it [0, 1] pixels. Its buffers are not saved (no checkpoint
    changes); a grey input uses the channels' average."""

    mean: Tensor  # (1, C, 1, 1) buffer
    std: Tensor  # (1, C, 1, 1) buffer

    def __init__(self, mean: tuple[float, ...], std: tuple[float, ...], channels: int) -> None:
        super().__init__()
        mean_t = torch.tensor(mean, dtype=torch.float32)
        std_t = torch.tensor(std, dtype=torch.float32)
        if channels != len(mean):
            mean_t, std_t = mean_t.mean().expand(channels), std_t.mean().expand(channels)
        self.register_buffer("mean", mean_t.reshape(1, -1, 1, 1).clone(), persistent=False)
        self.register_buffer("std", std_t.reshape(1, -1, 1, 1).clone(), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4:  # not a batch of images: nothing of ImageNet's applies
            return x
        return (x - self.mean) / self.std  # (n, C, H, W)


def _normalize_inputs(model: nn.Module, preprocessing: Preprocessing, channels: int) -> nn.Module:
    """Attach ``preprocessing``'s input normalisation as a pre-hook (the state-dict keys
    unchanged)."""
    model.input_normalization = InputNormalization(preprocessing.mean, preprocessing.std, channels)
    model.register_forward_pre_hook(lambda module, args: (module.input_normalization(args[0]),))
    return model


class _TorchvisionBackbone(nn.Module):
    """A torchvision classifier whose last linear layer is removed; grey images are repeated to
    the three channels ImageNet weights expect."""

    def __init__(self, model: nn.Module, expand_grey: bool) -> None:
        super().__init__()
        self.model = model
        self.expand_grey = expand_grey

    def forward(self, x: Tensor) -> Tensor:
        if self.expand_grey:
            x = x.expand(-1, 3, -1, -1)  # (n, 3, H, W), a view
        return self.model(x)


def _timm_backbone(
    arch: str,
    input_shape: tuple[int, ...],
    weights: str | os.PathLike[str] | None,
    **kwargs: object,
) -> tuple[nn.Module, int]:
    timm = _import_optional("timm", f"timm:{arch}")
    # timm loads a local file itself when given one as the pretrained config's "file", adapting
    # the first convolution to ``in_chans`` and dropping the classifier (num_classes=0).
    pretrained: dict[str, object] = {"pretrained": False}
    if weights is not None:
        if not Path(weights).is_file():
            raise FileNotFoundError(f"weights file for model 'timm:{arch}' not found: {weights}")
        pretrained = {"pretrained": True, "pretrained_cfg_overlay": {"file": str(weights)}}
    arguments = {"num_classes": 0, "in_chans": input_shape[0], **pretrained, **kwargs}

    # A vision transformer is built for its config's input size and refuses any other; built
    # with the run's (height, width), it takes them (timm resamples the weights' position
    # embeddings). A convolutional network takes no img_size and takes any size as it is.
    def build() -> nn.Module:
        if len(input_shape) == 3 and "img_size" not in kwargs:
            try:
                return timm.create_model(arch, img_size=tuple(input_shape[1:]), **arguments)
            except TypeError:
                pass  # no img_size keyword, or another argument refused: the build below says
        return _built(timm.create_model, f"timm:{arch}", arch, **arguments)

    # timm reads the weights file: what it cannot read is named as the file's.
    model = build() if weights is None else _with_weights(build, weights, f"timm:{arch}")
    # torch's stub types an unknown Module attribute as Tensor | Module; timm's is an int.
    return model, int(model.num_features)  # type: ignore[arg-type]


def _resized_vision_transformer(
    models: ModuleType,
    model: nn.Module,
    name: str,
    input_shape: tuple[int, ...],
    kwargs: dict[str, object],
) -> int | None:
    """The image size to build a torchvision vision transformer for, where the run's images
    are not the size it was built for (it refuses any other); None for any other model."""
    vision_transformer = getattr(models, "VisionTransformer", None)
    if vision_transformer is None or not isinstance(model, vision_transformer):
        return None
    size = input_shape[1] if len(input_shape) == 3 else model.image_size
    if size == model.image_size or "image_size" in kwargs:
        return None
    if size % model.patch_size:
        raise ValueError(
            f"--image-size {size}: {name} cuts images into {model.patch_size} px patches; give "
            f"a multiple of {model.patch_size}"
        )
    return int(size)


def _torchvision_backbone(
    arch: str,
    input_shape: tuple[int, ...],
    weights: str | os.PathLike[str] | None,
    **kwargs: object,
) -> tuple[nn.Module, int]:
    name = f"torchvision:{arch}"
    models = _import_optional("torchvision.models", name)
    model = _built(models.get_model, name, arch, weights=None, **kwargs)
    resized = _resized_vision_transformer(models, model, name, input_shape, kwargs)
    if resized is not None:
        model = _built(models.get_model, name, arch, weights=None, image_size=resized, **kwargs)
    if weights is not None:
        state = _load_state_dict(weights, name)
        if resized is not None:  # the file's position embeddings are for its own image size
            vision_transformer = importlib.import_module("torchvision.models.vision_transformer")
            state = vision_transformer.interpolate_embeddings(resized, model.patch_size, state)
        # A missing key, or an extra one inside a module the model has (resnet34's third
        # block of layer1 in a resnet18), means the file is for another architecture; the
        # extra keys of a whole module the model is built without (GoogLeNet's auxiliary
        # heads under aux_logits=False) are harmless.
        missing, unexpected = _with_weights(
            lambda: model.load_state_dict(state, strict=False), weights, name
        )
        modules = {child for child, _ in model.named_children()}
        foreign = [key for key in unexpected if key.partition(".")[0] in modules]
        wrong = [f"lacks {len(missing)} tensors of {name}: {missing[:5]}"] if missing else []
        if foreign:
            wrong.append(f"holds {len(foreign)} tensors {name} has no place for: {foreign[:5]}")
        if wrong:
            raise ValueError(
                f"weights file {weights} {'; '.join(wrong)} (another architecture's weights?); "
                f"give the weights of {name} itself"
            )
    # The classifier is the last linear layer in registration order for every torchvision
    # classification model (fc, classifier[-1], heads.head).
    linears = [(key, m) for key, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError(f"{name} has no linear classifier to replace with the embedding head")
    key, classifier = linears[-1]
    parent_key, _, child = key.rpartition(".")
    model.get_submodule(parent_key).register_module(child, nn.Identity())
    channels = input_shape[0] if input_shape else 3
    if channels not in (1, 3):
        raise ValueError(f"{name} takes 1- or 3-channel images, got input_shape={input_shape}")
    return _TorchvisionBackbone(model, expand_grey=channels == 1), classifier.in_features


def pretrained_backbone(
    source: str,
    arch: str,
    input_shape: tuple[int, ...],
    *,
    weights: str | os.PathLike[str] | None = None,
    preprocessing: Preprocessing | None = None,
    **kwargs: object,
) -> tuple[nn.Module, int]:
    """A classifier-free backbone from ``source`` ("timm" or "torchvision").

    Parameters
    ----------
    source : str
        ``"timm"`` or ``"torchvision"``.
    arch : str
        The library's model name (``"resnet50"``, ``"googlenet"``, ...).
    input_shape : tuple of int
        ``(C, H, W)``; timm adapts its first convolution to ``C``, torchvision repeats a grey
        channel three times.
    weights : path, optional
        Local weights file (``.safetensors``, or a ``torch.save`` state dict / ``.pth``). ``None``
        gives random initialisation. Nothing is downloaded.
    preprocessing : Preprocessing, optional
        The view whose mean and std the backbone normalises by: a trained run's own, as it
        stored it; None: the installed library's (:func:`backbone_preprocessing`).
    **kwargs
        Passed to ``timm.create_model`` or ``torchvision.models.get_model``.

    Returns
    -------
    (nn.Module, int)
        The backbone and its feature width. It takes [0, 1] pixels and normalises them with its
        preprocessing's mean and std first (:class:`InputNormalization`).

    Raises
    ------
    ImportError
        When the library is not installed; the message says ``pip install 'clusterable[vision]'``.
    """
    build = _timm_backbone if source == "timm" else _torchvision_backbone
    backbone, width = build(arch, input_shape, weights, **kwargs)
    _check_takes_the_size(backbone, f"{source}:{arch}", input_shape)
    channels = input_shape[0] if input_shape else 3
    if preprocessing is None:
        preprocessing = backbone_preprocessing(f"{source}:{arch}") or Preprocessing()
    return _normalize_inputs(backbone, preprocessing, channels), width


def _check_takes_the_size(backbone: nn.Module, name: str, input_shape: tuple[int, ...]) -> None:
    """Run one blank image of ``input_shape`` ``(C, H, W)`` through ``backbone`` (in eval mode,
    without gradient): an architecture that cannot take images of that size (its downsampling
    or attention windows do not fit them) is refused here, in one line naming the size, instead
    of at the first training batch with the library's own error."""
    training = backbone.training
    backbone.eval()
    try:
        with torch.no_grad():
            backbone(torch.zeros(1, *input_shape))
    except (RuntimeError, AssertionError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(
            f"--image-size {input_shape[-1]}: {name} cannot take images of "
            f"{input_shape[-2]} x {input_shape[-1]} px ({reason}); give another image size"
        ) from None
    finally:
        backbone.train(training)
