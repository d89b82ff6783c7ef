"""The package's one device rule: where a model runs, a search searches and k-means assigns.

``"auto"`` picks CUDA, then Apple's MPS, then the CPU (the rule of pytorch-metric-learning's
``use_cuda_if_available`` and nanoGPT's single ``device`` variable, with MPS added). The choice is
made at the edge: the command line's ``--device`` (every verb that runs a model, a search or a
clustering has it, and hands it down), a :class:`~clusterable.train.TrainConfig`'s ``device``, a
:class:`~clusterable.trained_run.TrainedRun`'s ``device``. Below the edge a function takes the
device of the model it was given (:func:`module_device`) or an explicit argument, and ``"auto"``
there means the detection (:func:`detect_device`): there is no ambient device, so a function's
device is read from its own arguments alone. Tensors come back to numpy only where numpy needs
them.

Under ``torchrun`` (:func:`process_device`) each process takes the GPU of its local rank, and more
processes than GPUs is refused before any work; ``--device cpu`` trains with gloo on the CPU.

Example
-------
>>> resolve_device("cpu")
device(type='cpu')
>>> search_device("cpu")
device(type='cpu')
"""

from __future__ import annotations

import re

import torch
from torch import nn

#: What ``--device`` accepts, for help texts (``cuda:N`` is any visible GPU's number).
DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N", "mps")

#: A device as users and settings give it: a name of `DEVICE_CHOICES`, a ``torch.device``, or
#: None for ``"auto"``.
DeviceSpec = str | torch.device | None

_CUDA_NAME = re.compile(r"cuda(:\d+)?")

#: Where work runs that must not depend on an accelerator's arithmetic, whatever ``--device``
#: says: an export's trace and parity check (`clusterable.export`), whose file then names no
#: device and whose check compares IEEE float32 with the CPU runtimes that will run it.
HOST = torch.device("cpu")


def detect_device() -> torch.device:
    """CUDA when torch sees a GPU, then Apple's MPS, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def resolve_device(spec: DeviceSpec = "auto") -> torch.device:
    """The ``torch.device`` that ``spec`` names, checked against what this machine has.

    Parameters
    ----------
    spec : str, torch.device or None
        ``"auto"`` (or None): :func:`detect_device`; ``"cpu"``, ``"cuda"``, ``"cuda:N"``,
        ``"mps"``; or a ``torch.device``.

    Raises
    ------
    ValueError
        If ``spec`` is no device name, or names a device this machine does not have (a GPU that
        torch cannot see, a GPU number past the last one, MPS off Apple silicon).
    """
    if _is_auto(spec):
        return detect_device()
    if not isinstance(spec, (str, torch.device)):
        raise ValueError(f"a device is a name such as 'cuda' or 'cpu', got {spec!r}")
    check_device_name(spec)
    device = spec if isinstance(spec, torch.device) else torch.device(spec.strip().lower())
    _check_present(device)
    return device


def _is_auto(spec: DeviceSpec) -> bool:
    return spec is None or (isinstance(spec, str) and spec.strip().lower() == "auto")


def check_device_name(spec: DeviceSpec) -> None:
    """Refuse a device name no machine has (``"gpu"``, ``"cuda:x"``), whatever this one has.

    For settings stored with a run, which a machine with other devices may read.
    """
    if spec is None or isinstance(spec, torch.device):
        return
    name = spec.strip().lower() if isinstance(spec, str) else None
    if name not in ("auto", "cpu", "mps") and not (name and _CUDA_NAME.fullmatch(name)):
        raise ValueError(
            f"device {spec!r} unknown; choose one of {', '.join(DEVICE_CHOICES)} "
            "(cuda:N being the number of a visible GPU)"
        )


def _check_present(device: torch.device) -> None:
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {str(device)!r} asked for, but torch sees no CUDA GPU here (torch "
                f"{torch.__version__}, built {'with' if torch.version.cuda else 'without'} CUDA); "
                "use --device cpu, or 'auto' to take what there is"
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ValueError(
                f"device {str(device)!r} asked for, but this machine has {count} visible "
                f"GPU(s): cuda:0 to cuda:{count - 1}"
            )
    elif device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(
                "device 'mps' asked for, but Apple's MPS is not available here; use --device "
                "cpu, or 'auto' to take what there is"
            )
    elif device.type != "cpu":
        raise ValueError(f"device {str(device)!r} is not supported; choose one of cpu, cuda, mps")


def allocator_words(error: torch.OutOfMemoryError) -> str:
    """The first sentence of an out-of-memory error, as the allocator says it (``"CUDA out of
    memory"``), for a one-line message."""
    return str(error).split(". ")[0]


def module_device(module: nn.Module) -> torch.device:
    """The device of a model's first parameter (or buffer); the CPU for one that has neither."""
    for tensor in module.parameters():
        return tensor.device
    for buffer in module.buffers():
        return buffer.device
    return torch.device("cpu")


def search_device(spec: DeviceSpec = "auto") -> torch.device:
    """Where numpy points are searched and clustered for ``spec``: CUDA or the CPU.

    ``"auto"`` is the detection (:func:`resolve_device`). MPS is left out: its ``topk`` is
    limited to small ``k`` and it has no float64, which the exact re-scoring needs, so a Mac
    searches on the CPU (faiss) while its model runs on MPS.
    """
    return _searchable(resolve_device(spec))


def _searchable(device: torch.device) -> torch.device:
    return device if device.type == "cuda" else torch.device("cpu")


def process_device(spec: DeviceSpec, local_rank: int, local_world_size: int) -> torch.device:
    """The device of one ``torchrun`` process: the GPU of its local rank, or the CPU.

    Raises
    ------
    ValueError
        Before any work, if more processes run on this machine than it has GPUs, if a single GPU
        was named for several processes, or if MPS was asked for (no process group runs there).
    """
    device = resolve_device(spec)
    if device.type == "mps":
        raise ValueError(
            "distributed training does not run on MPS; use --device cpu (gloo) under torchrun"
        )
    if device.type == "cpu":
        return device
    if device.index is not None and local_world_size > 1:
        raise ValueError(
            f"--device {device} names one GPU for {local_world_size} processes; under torchrun "
            "give --device cuda (or auto), and each process takes the GPU of its local rank"
        )
    count = torch.cuda.device_count()
    if local_world_size > count:
        raise ValueError(
            f"torchrun started {local_world_size} processes on this machine but it has {count} "
            f"visible GPU(s); NCCL needs one GPU per process: start at most {count} "
            "(--nproc_per_node), or train on the CPU with --device cpu (gloo)"
        )
    return torch.device("cuda", local_rank if device.index is None else device.index)
