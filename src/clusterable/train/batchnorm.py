"""Frozen BatchNorm for fine-tuning (``TrainConfig.freeze_batchnorm``).

Class-balanced DML batches hold few classes and few items per class, so their BatchNorm
statistics are poor estimates of the data's; DML fine-tuning recipes (Proxy-Anchor, Kim et al.,
CVPR 2020; Musgrave et al., ECCV 2020) keep the pretrained backbone's BatchNorm layers in
evaluation mode, with their running statistics and their affine parameters fixed.
"""

from __future__ import annotations

from torch import nn

from clusterable._ranges import SettingError
from clusterable.models import EmbeddingNet
from clusterable.models._registry import has_no_batchnorm

_BATCHNORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


def backbone_batchnorms(model: nn.Module) -> list[nn.Module]:
    """The BatchNorm layers of ``model``'s backbone (the whole model when it declares none)."""
    backbone = model.backbone if isinstance(model, EmbeddingNet) else model
    return [module for module in backbone.modules() if isinstance(module, _BATCHNORMS)]


def _nothing_to_freeze(name: str) -> SettingError:
    reason = (
        f"the backbone of {name} has no BatchNorm layer (the built-in small models have none); "
        "leave freeze_batchnorm off for it"
    )
    return SettingError("training setting", "freeze_batchnorm", True, reason, sentence=True)


def check_freezable(model_name: str) -> None:
    """Refuse freezing the BatchNorm of model ``model_name`` when its registration says it holds
    none (:func:`~clusterable.models._registry.has_no_batchnorm`), before its data is read; a
    model that did not say is checked when built (:func:`freeze_batchnorm_parameters`)."""
    if has_no_batchnorm(model_name):
        raise _nothing_to_freeze(repr(model_name))


def freeze_batchnorm_parameters(model: nn.Module) -> list[nn.Module]:
    """Stop gradients to the backbone's BatchNorm scales and shifts; returns the layers.

    Raises
    ------
    ValueError
        The backbone has no BatchNorm layer, so the setting would do nothing.
    """
    layers = backbone_batchnorms(model)
    if not layers:
        raise _nothing_to_freeze(type(model).__name__)
    for layer in layers:
        for parameter in layer.parameters():
            parameter.requires_grad_(False)
    return layers


def hold_statistics(layers: list[nn.Module]) -> None:
    """Put the layers in evaluation mode: they normalise with their running statistics and
    update none (call after every ``model.train()``)."""
    for layer in layers:
        layer.eval()
