"""Pretrained image backbones from timm or torchvision (the optional ``vision`` extra).

Oh Song et al. (CVPR 2016, Sec. 6) and DSCL fine-tune an ImageNet network with a new embedding
layer; these builders give that backbone, without its classifier, with weights read from a local
file. Nothing is ever downloaded.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import torch
from torch import Tensor, nn


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


def _load_state_dict(path: str | os.PathLike[str], model_name: str) -> dict[str, Tensor]:
    """Read a ``.safetensors`` or a ``torch.save`` state dict (optionally under "state_dict")."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file for model {model_name!r} not found: {path}")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(path)
    state = torch.load(path, map_location="cpu", weights_only=True)
    return state.get("state_dict", state)


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
    model = timm.create_model(
        arch,
        num_classes=0,
        in_chans=input_shape[0],
        **{**pretrained, **kwargs},
    )
    return model, int(model.num_features)


def _torchvision_backbone(
    arch: str,
    input_shape: tuple[int, ...],
    weights: str | os.PathLike[str] | None,
    **kwargs: object,
) -> tuple[nn.Module, int]:
    name = f"torchvision:{arch}"
    models = _import_optional("torchvision.models", name)
    model = models.get_model(arch, weights=None, **kwargs)
    if weights is not None:
        # Extra keys (e.g. GoogLeNet's auxiliary heads when built with aux_logits=False) are
        # harmless; a missing key means the file is for another architecture.
        missing, _ = model.load_state_dict(_load_state_dict(weights, name), strict=False)
        if missing:
            raise ValueError(
                f"weights file {weights} lacks {len(missing)} tensors of {name}: {missing[:5]}"
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
    **kwargs
        Passed to ``timm.create_model`` or ``torchvision.models.get_model``.

    Returns
    -------
    (nn.Module, int)
        The backbone and its feature width.

    Raises
    ------
    ImportError
        When the library is not installed; the message says ``pip install 'clusterable[vision]'``.
    """
    if source == "timm":
        return _timm_backbone(arch, input_shape, weights, **kwargs)
    return _torchvision_backbone(arch, input_shape, weights, **kwargs)
