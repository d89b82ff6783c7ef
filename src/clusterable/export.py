"""Ship a trained embedding model without this library: ONNX or TorchScript, checked for parity.

The exported graph maps a float32 batch ``(batch, *input_shape)`` to its embeddings
``(batch, embedding_dim)``; the batch dimension is dynamic. Beside the file, ``FILE.json`` records
what a caller must feed it: the input shape and dtype, the preprocessing of the run's data set, the
embedding width, whether the model l2-normalises, the largest difference between the exported
model's output and PyTorch's on a batch of a size the export never saw, and, for a run, which run
and weights it came from (``model_checksum``, the ``model`` of ``model.json`` beside the run's saved
embeddings).

ONNX needs ``onnx`` and ``onnxscript`` (the exporter) and ``onnxruntime`` (the parity check):
``pip install 'clusterable[export]'``. TorchScript needs nothing beyond torch.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from clusterable._atomic import atomic_write_text, replacing
from clusterable._optional import require
from clusterable.device import HOST, module_device

Format = Literal["onnx", "torchscript"]

#: Largest difference from PyTorch's output that an export may show on the parity batch.
PARITY_TOLERANCE = 1e-5

#: Batch sizes of the example the graph is traced with and of the parity check; they differ so
#: that a batch dimension frozen into the graph fails the check.
TRACE_BATCH, PARITY_BATCH = 2, 3

#: File suffix of each format.
SUFFIX = {"onnx": ".onnx", "torchscript": ".pt"}

#: What is added to the exported file's name for the name of its description (``fm.onnx.json``).
DESCRIPTION_SUFFIX = ".json"


def export_model(
    model: nn.Module,
    input_shape: tuple[int, ...],
    out: str | os.PathLike[str],
    format: Format = "onnx",
    *,
    description: dict[str, Any] | None = None,
    seed: int = 0,
) -> Path:
    """Export ``model`` to ``out`` and write ``out.json`` beside it; returns the model file's path.

    The model is traced and checked on the CPU, a copy where it lives on another device: the
    file then names no device, and the parity check compares IEEE float32 on both sides (a GPU's
    TF32 convolutions, on by default in PyTorch, differ from it by about 1e-3, beyond
    `PARITY_TOLERANCE`, which would refuse a sound export).

    Parameters
    ----------
    model : nn.Module
        Maps ``(batch, *input_shape)`` float32 to ``(batch, d)`` embeddings; exported in eval mode.
    input_shape : tuple of int
        Shape of one input item.
    out : path
        File to write; ``.onnx`` or ``.pt`` is appended when the suffix is missing.
    format : {"onnx", "torchscript"}
        ONNX (dynamo exporter, opset of the installed torch) or TorchScript (``torch.jit.trace``).
    description : dict, optional
        Extra facts for the JSON file (the run's data set, preprocessing, model name, ...).
    seed : int
        Seed of the random example and parity batches.

    Raises
    ------
    ImportError
        If ONNX is asked for and its packages are missing.
    RuntimeError
        If the exported model's output differs from PyTorch's by more than `PARITY_TOLERANCE`;
        nothing is left at ``out`` then.
    """
    if format not in SUFFIX:
        raise ValueError(f"format must be 'onnx' or 'torchscript', got {format!r}")
    _require_format(format)
    target = Path(out)
    if target.suffix != SUFFIX[format]:
        target = target.with_name(target.name + SUFFIX[format])
    target.parent.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    example = torch.rand((TRACE_BATCH, *input_shape), generator=generator)
    check = torch.rand((PARITY_BATCH, *input_shape), generator=generator)
    if module_device(model) != HOST:  # a copy: the caller's model stays where it is
        model = copy.deepcopy(model).to(HOST)
    model = model.eval()
    with torch.no_grad():
        expected = model(check).numpy()  # (PARITY_BATCH, d)
    write, run = _BACKENDS[format]
    with replacing(target) as temporary:  # kept only once it passes the parity check
        write(model, example, temporary)
        got = run(temporary, check.numpy())
        difference = float(np.abs(got - expected).max())
        if not difference <= PARITY_TOLERANCE:
            raise RuntimeError(
                f"the {format} export differs from PyTorch by {difference:.3g} (tolerance "
                f"{PARITY_TOLERANCE:g}); the model has an operation the exporter does not keep: "
                "try the other format"
            )
    sidecar = {
        "format": format,
        "file": target.name,
        "input": {"name": "input", "shape": ["batch", *input_shape], "dtype": "float32"},
        "output": {"name": "embedding", "shape": ["batch", int(expected.shape[1])]},
        "parity_max_abs_difference": difference,
        "parity_batch": PARITY_BATCH,
        **(description or {}),
    }
    description_file = target.with_name(target.name + DESCRIPTION_SUFFIX)
    atomic_write_text(description_file, json.dumps(sidecar, indent=2))
    return target


def export_run(
    run: str | os.PathLike[str],
    out: str | os.PathLike[str],
    format: Format = "onnx",
    seed: int = 0,
) -> Path:
    """Export the best checkpoint of a training run (folder or checkpoint), traced on the CPU
    (:func:`export_model`), with its description: the item view the run's own test table
    embedded (resize, crop, channels, size, normalisation;
    :meth:`clusterable.trained_run.TrainedRun.view_description`), and which model it is: the run
    folder (:attr:`~clusterable.trained_run.TrainedRun.run_folder`, the same whether the run or
    one of its checkpoints is exported; null for a checkpoint outside any run folder), the
    checkpoint, and ``model_checksum``, the checksum of the weights that ``model.json`` beside
    the run's saved embeddings names as ``model``. ``seed`` seeds the example and parity
    batches."""
    from clusterable.trained_run import TrainedRun

    _require_format(format)
    trained = TrainedRun.load(run, device=HOST)
    spec = trained.spec
    assert spec is not None and trained.checkpoint is not None  # load() reads both from the run
    run_folder = trained.run_folder
    description = {
        "model": spec.model,
        "embedding_dim": spec.embedding_dim,
        "l2_normalised": spec.normalize,
        "data": spec.data,
        "preprocessing": trained.view_description(),
        "run": None if run_folder is None else str(run_folder),
        "checkpoint": str(Path(trained.checkpoint).resolve()),
        "model_checksum": trained.model_id,
    }
    return export_model(
        trained.model, trained.input_shape, out, format, description=description, seed=seed
    )


def _require_format(format: str) -> None:
    """Import what writing and checking ``format`` needs, or say what to install, before any
    model is loaded or file written (ONNX: the exporter's packages, and onnxruntime for the
    parity check)."""
    if format == "onnx":
        for package in ("onnx", "onnxscript"):
            require(package, "ONNX export")
        require("onnxruntime", "the ONNX export's parity check")


def _onnx_writer(model: nn.Module, example: torch.Tensor, path: Path) -> None:
    batch = torch.export.Dim("batch")
    with _exporter_quiet():
        program = torch.onnx.export(
            model,
            (example,),
            dynamo=True,
            input_names=["input"],
            output_names=["embedding"],
            dynamic_shapes=({0: batch},),
            verbose=False,
        )
    assert program is not None  # dynamo=True returns the program
    program.save(str(path), external_data=False)


@contextlib.contextmanager
def _exporter_quiet() -> Iterator[None]:
    """torch's ONNX exporter without the lines that are its own business, not the user's: one a
    torchvision operator it skips registering where torchvision is not installed (none of which
    a model that exports uses), and torch's deprecation of its own pytree test (`LeafSpec`)."""
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)`")
            yield
    finally:
        registration.setLevel(level)


def _onnx_runner(path: Path, batch: np.ndarray) -> np.ndarray:
    onnxruntime = require("onnxruntime", "the ONNX export's parity check")

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"input": batch})[0]


def _torchscript_writer(model: nn.Module, example: torch.Tensor, path: Path) -> None:
    with torch.no_grad():
        traced = torch.jit.trace(model, example)
    torch.jit.save(traced, str(path))


def _torchscript_runner(path: Path, batch: np.ndarray) -> np.ndarray:
    loaded = torch.jit.load(str(path), map_location="cpu")  # traced on any device, run here
    with torch.no_grad():
        return loaded(torch.from_numpy(batch)).numpy()


#: How each format is written and how the written file is run for the parity check.
_BACKENDS: dict[str, tuple[Callable[..., None], Callable[[Path, np.ndarray], np.ndarray]]] = {
    "onnx": (_onnx_writer, _onnx_runner),
    "torchscript": (_torchscript_writer, _torchscript_runner),
}
