"""Numeric precision of the training step: what ``TrainConfig.precision`` means on each device.

- ``32``: float32 throughout.
- ``bf16``: the forward pass under bfloat16 autocast (CUDA with bf16 support, or the CPU); no
  loss scaling is needed, bfloat16 has float32's range.
- ``fp16``: float16 autocast with a :class:`torch.amp.GradScaler`, CUDA only.
- ``auto``: bf16 on CUDA that supports it, fp16 on older CUDA devices (what ``amp`` gave), 32
  elsewhere; ``amp: false`` of older run files makes it 32.

Every loss computes in float32 whatever the precision
(:meth:`clusterable.losses.EmbeddingLoss.forward` leaves autocast).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

from clusterable._ranges import SettingError

PRECISIONS = ("auto", "32", "bf16", "fp16")

_DTYPES = {"32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def _cuda_has_bf16(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_bf16_supported()


def resolve_precision(precision: str, device: torch.device, amp: bool = True) -> str:
    """``"32"``, ``"bf16"`` or ``"fp16"``: ``precision`` as it runs on ``device``.

    Raises
    ------
    ValueError
        An unknown name, fp16 off CUDA (a ``SettingError`` naming ``precision``), or bf16 on a
        CUDA device without it; the message says which precision the device takes.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} unknown; choose one of {', '.join(PRECISIONS)}")
    if precision == "auto":
        if not amp or device.type != "cuda":
            return "32"
        return "bf16" if _cuda_has_bf16(device) else "fp16"
    if precision == "fp16" and device.type != "cuda":
        reason = (
            f"needs a CUDA device (its GradScaler runs there), and this run is on {device}; "
            "choose precision bf16 (CPU autocast) or 32"
        )
        raise SettingError("training setting", "precision", precision, reason)
    if precision == "bf16" and device.type == "cuda" and not _cuda_has_bf16(device):
        raise ValueError(
            f"precision bf16: {torch.cuda.get_device_name(device)} has no bfloat16; choose fp16"
        )
    return precision


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype of a resolved precision (None: float32, no autocast)."""
    return _DTYPES[precision]


def autocast(device: torch.device, dtype: torch.dtype | None) -> AbstractContextManager:
    """Autocast to ``dtype`` on ``device``'s type, or nothing for float32."""
    if dtype is None:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def is_convolutional(model: nn.Module) -> bool:
    """Whether ``model`` holds a 2-D convolution (what the channels_last layout speeds up)."""
    return any(isinstance(module, nn.Conv2d) for module in model.modules())
