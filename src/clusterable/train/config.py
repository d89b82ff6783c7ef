"""Training settings: plain values with a comment on each, readable from YAML."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from clusterable.device import check_device_name
from clusterable.mining.samplers import SAMPLERS
from clusterable.train.config_typing import field_types, typed_settings

OPTIMIZERS = ("adam", "sgd")

#: Settings that belong to the run's pieces, not to training: where each one is set.
_SET_ELSEWHERE = {
    "reconstruction_weight": "MsDNN-AE's weight is an argument of the autoencoder loss: "
    "--autoencoder --loss-arg reconstruction_weight=VALUE (YAML: loss_args)",
}


@dataclass
class TrainConfig:
    """Everything a training run needs besides the model, the loss and the data.

    Defaults follow the COREL protocol (Adam, batch 128) where the papers agree; ``clusterable
    reproduce`` sets each paper's own values.
    """

    epochs: int = 30  # passes over the training set
    batch_size: int = 128  # global batch: split across processes under torchrun
    sampler: str = "class-balanced"  # a name of clusterable.mining.SAMPLERS
    items_per_class: int = 4  # class-balanced batches: batch_size / items_per_class classes
    optimizer: str = "adam"  # one of OPTIMIZERS
    lr: float = 1e-3  # learning rate of the backbone (and of the loss's own parameters)
    head_lr_multiplier: float = 1.0  # lifted paper: 10x on the new embedding layer
    momentum: float = 0.9  # SGD only
    weight_decay: float = 0.0
    grad_clip: float | None = None  # max global gradient norm; None = no clipping
    chunk_size: int | None = None  # DSCL large-batch trick: embed in chunks of this many items
    eval_every: int = 1  # epochs between validation runs (0 = never)
    eval_metric: str = "recall@1"  # key of evaluate_embeddings, or "classification_accuracy"
    eval_embeddings: bool = True  # the whole evaluate_embeddings table; False: predict() only
    patience: int | None = None  # stop after this many evaluations without improvement
    checkpoint_every: int = 1  # epochs between checkpoints (0 = only at the end)
    keep_checkpoints: int = 2  # most recent checkpoints kept besides the best one
    num_workers: int = 0  # DataLoader worker processes
    amp: bool = True  # mixed precision, used only on CUDA
    device: str = "auto"  # auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps
    tensorboard: bool = False  # also log to TensorBoard (needs the tensorboard package)
    progress: bool = True  # tqdm progress bars (shown only when standard error is a terminal)
    verbose: bool = False  # a start banner and one line per epoch on stdout (``clusterable train``)
    seed: int = 0

    def __post_init__(self) -> None:
        # Text and YAML 1.1 values ("1e-3") become the fields' types here, before any training.
        typed = typed_settings(vars(self), field_types(type(self)), "training setting")
        for name, value in typed.items():
            setattr(self, name, value)
        if self.sampler not in SAMPLERS:
            raise ValueError(
                f"sampler {self.sampler!r} unknown; choose one of {', '.join(SAMPLERS)}"
            )
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"optimizer {self.optimizer!r} unknown; choose one of {', '.join(OPTIMIZERS)}"
            )
        for name in ("epochs", "batch_size", "items_per_class"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        check_device_name(self.device)
        if self.chunk_size is not None and self.chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1 or None, got {self.chunk_size}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        for name in unknown:
            if name in _SET_ELSEWHERE:
                raise ValueError(f"{name} is not a training setting: {_SET_ELSEWHERE[name]}")
        if unknown:
            raise ValueError(
                f"unknown training setting(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(known))}"
            )
        return cls(**values)

    @classmethod
    def from_yaml(cls, path: str | Path) -> TrainConfig:
        values = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(values, dict):
            raise ValueError(f"{path} must hold a mapping of setting: value")
        return cls.from_dict(values)
