"""Checkpoints that survive a crash: each is a folder written aside and renamed into place.

A checkpoint folder holds ``weights.safetensors`` (model and loss tensors, prefixed ``model.`` and
``loss.``), ``state.pt`` (optimiser state, RNG states, progress: what resuming needs) and
``meta.json`` (config, epoch, metrics, and under ``run`` how to rebuild the model). ``latest`` and
``best`` are small pointer files replaced atomically, so a run killed at any moment leaves the
previous checkpoint readable.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from clusterable._atomic import atomic_write_text, replacing

WEIGHTS, STATE, META = "weights.safetensors", "state.pt", "meta.json"

#: Below this much free space, a failed checkpoint write is reported as a full disk (torch's
#: writer raises a bare RuntimeError without errno when the disk fills).
_NEARLY_FULL_BYTES = 64 * 2**20


class CheckpointWriteError(OSError):
    """A checkpoint that could not be written; the previous one is untouched."""


def module_tensors(model: nn.Module, loss: nn.Module) -> dict[str, torch.Tensor]:
    """Model and loss state as one flat dict of contiguous CPU tensors."""
    tensors = {f"model.{k}": v for k, v in model.state_dict().items()}
    tensors.update({f"loss.{k}": v for k, v in loss.state_dict().items()})
    return {k: v.detach().cpu().contiguous() for k, v in tensors.items()}


def save_checkpoint(
    run_dir: Path,
    name: str,
    model: nn.Module,
    loss: nn.Module,
    state: dict[str, Any],
    meta: dict[str, Any],
    pointers: tuple[str, ...] = ("latest",),
) -> Path:
    """Write checkpoint ``run_dir/checkpoints/name`` and point ``pointers`` at it."""
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}."))
    try:
        # Each file on disk before the folder is renamed into place.
        with replacing(tmp / WEIGHTS) as weights:
            save_file(module_tensors(model, loss), str(weights))
        with replacing(tmp / STATE) as state_file:
            torch.save(state, state_file)
        atomic_write_text(tmp / META, json.dumps(meta, indent=2, default=str))
    except (OSError, RuntimeError) as error:
        shutil.rmtree(tmp, ignore_errors=True)
        full = getattr(error, "errno", None) == errno.ENOSPC
        full = full or shutil.disk_usage(root).free < _NEARLY_FULL_BYTES
        reason = "disk full: free some space, then resume with --resume" if full else str(error)
        raise CheckpointWriteError(
            f"checkpoint {name} could not be written in {root} ({reason}); the previous "
            "checkpoint is intact"
        ) from error
    final = root / name
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for pointer in pointers:
        atomic_write_text(root / pointer, name)
    return final


def resolve_checkpoint(path: Path, pointer: str = "latest") -> Path:
    """A checkpoint folder from itself, a run folder or a ``checkpoints`` folder.

    In a run folder, the checkpoint that ``pointer`` (``"latest"`` or ``"best"``) names is taken;
    ``latest`` stands in for a ``best`` that a run without validation never wrote.

    Raises
    ------
    FileNotFoundError
        If ``path`` is a file (one of a checkpoint's: the message names its folder), holds no
        checkpoint, or its pointer names a checkpoint that is gone.
    """
    if path.is_file():
        folder = path.parent
        holds_it = (folder / WEIGHTS).is_file() or (folder / "checkpoints").is_dir()
        remedy = f"give its folder, {folder}" if holds_it else "give one"
        raise FileNotFoundError(
            f"{path} is a file: a checkpoint is a folder (with {WEIGHTS}) or a run folder; {remedy}"
        )
    for candidate in (path, path / "checkpoints"):
        if (candidate / WEIGHTS).is_file():
            return candidate
        for name in (pointer, "latest"):
            if (candidate / name).is_file():
                named = candidate / (candidate / name).read_text().strip()
                if not (named / WEIGHTS).is_file():
                    raise FileNotFoundError(
                        f"{candidate / name} names checkpoint {named.name}, but {named} holds no "
                        f"{WEIGHTS} (deleted or moved?): train the run again, or give another "
                        "checkpoint folder"
                    )
                return named
    raise FileNotFoundError(
        f"no checkpoint at {path}: expected a checkpoint folder (with {WEIGHTS}) or a run folder "
        f"written by `clusterable train --out DIR`"
    )


def load_weights(checkpoint: Path, model: nn.Module, loss: nn.Module | None = None) -> None:
    """Load ``weights.safetensors`` into the model (and the loss, when given).

    Raises
    ------
    ValueError
        If the file cannot be read as safetensors (cut short or damaged).
    """
    try:
        tensors = load_file(str(checkpoint / WEIGHTS))
    except SafetensorError as error:
        raise ValueError(
            f"{checkpoint / WEIGHTS} cannot be read ({error}): the file is damaged or cut short; "
            "give another checkpoint of the run, or train it again"
        ) from None
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    if loss is not None:
        loss.load_state_dict({k[5:]: v for k, v in tensors.items() if k.startswith("loss.")})


def load_meta(checkpoint: Path) -> dict[str, Any]:
    """The checkpoint's ``meta.json``: its epoch, training settings, metrics and run record."""
    return json.loads((checkpoint / META).read_text())


def load_run_record(checkpoint: Path) -> dict[str, Any]:
    """How to rebuild a checkpoint's model and loss: ``{"spec", "input_shape", "num_classes"}``.

    Raises
    ------
    ValueError
        A checkpoint written by a bare :class:`~clusterable.train.Trainer` (no recipe), which
        only the code that built its model can load.
    """
    record = load_meta(checkpoint).get("run") or {}
    if "spec" not in record:
        raise ValueError(
            f"{checkpoint} does not record how its model was built (it was not written by "
            "`clusterable train` or clusterable.recipe): rebuild the model in your own code and "
            "load it with clusterable.train.load_weights"
        )
    return record


def load_state(checkpoint: Path) -> dict[str, Any]:
    """The checkpoint's ``state.pt``: optimiser, scaler, scheduler, RNG states and history."""
    # Our own file, written by save_checkpoint: it holds optimiser and RNG state, not only tensors.
    return torch.load(checkpoint / STATE, weights_only=False)


def prune_checkpoints(run_dir: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest epoch checkpoints, never one a pointer names."""
    root = run_dir / "checkpoints"
    pinned = {(root / p).read_text().strip() for p in ("latest", "best") if (root / p).is_file()}
    epochs = sorted(p for p in root.glob("epoch-*") if p.is_dir())
    for old in epochs[: max(len(epochs) - keep, 0)]:
        if old.name not in pinned:
            shutil.rmtree(old)
