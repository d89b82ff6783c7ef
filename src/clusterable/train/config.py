"""Training settings: plain values with a comment on each, readable from YAML."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import yaml

from clusterable.device import check_device_name
from clusterable.mining.samplers import SAMPLERS, check_sampler_args
from clusterable.train.config_typing import field_types, parameter_types, typed_settings
from clusterable.train.optim import OPTIMIZERS, SCHEDULES
from clusterable.train.precision import PRECISIONS

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
    sampler: str = "class-balanced"  # how batches are drawn
    sampler_args: dict[str, Any] = field(default_factory=dict)  # its keywords, e.g. pool_size
    items_per_class: int = 4  # class-balanced batches: batch_size / items_per_class classes
    optimizer: str = "adam"  # adam, adamw (no decay on norms and biases) or sgd (Nesterov)
    lr: float = 1e-3  # learning rate of the backbone (and of the loss's own parameters)
    head_lr_multiplier: float = 1.0  # lifted paper: 10x on the new embedding layer
    momentum: float = 0.9  # SGD only
    weight_decay: float = 0.0  # L2 penalty of the optimiser
    schedule: str = (
        "constant"  # learning-rate schedule, stepped every batch: constant, cosine, step
    )
    warmup_epochs: float = 0.0  # linear learning-rate warm-up over this many epochs (fractions too)
    freeze_batchnorm: bool = False  # backbone BatchNorm: eval mode, statistics and affine frozen
    grad_clip: float | None = None  # max global gradient norm; None = no clipping
    chunk_size: int | None = None  # DSCL large-batch trick: embed in chunks of this many items
    # (None: the whole batch at once)
    eval_every: int = 1  # epochs between validation runs (0 = never)
    eval_metric: str = "recall@1"  # key of evaluate_embeddings, or "classification_accuracy"
    eval_embeddings: bool = True  # the whole evaluate_embeddings table; False: predict() only
    patience: int | None = None  # stop after this many evaluations without improvement
    # (None: never stop early)
    checkpoint_every: int = 1  # epochs between checkpoints (0 = only at the end)
    keep_checkpoints: int = 2  # most recent checkpoints kept besides the best one
    workers: int | None = None  # DataLoader processes; None: 0 for in-memory data, else from CPUs
    num_workers: int | None = None  # the old name of workers, still read
    cache_images: Literal["auto", "none", "ram"] = "auto"  # image files decoded once into memory
    # before the first epoch, the same pixels (each epoch then only crops and resizes): auto when
    # they fit the lesser of 8 GiB and a quarter of the memory available, ram always, none never
    precision: str = (
        "auto"  # 32, bf16, fp16, or auto (bf16 on CUDA that has it, fp16 on other CUDA)
    )
    amp: bool = True  # the old mixed-precision switch: false means precision 32
    device: str = "auto"  # auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps
    tensorboard: bool = False  # also log to TensorBoard in RUN/tensorboard (needs the
    # tensorboard package: pip install 'clusterable[tensorboard]')
    mlflow: bool = False  # also log to MLflow: a local store in RUN/mlruns, or
    # $MLFLOW_TRACKING_URI (needs mlflow-skinny: pip install 'clusterable[mlflow]')
    progress: bool = True  # tqdm progress bars (shown only when standard error is a terminal)
    verbose: bool = False  # a start banner and one line per epoch on stdout (``clusterable train``)
    seed: int = 0  # seed of every random step

    def __post_init__(self) -> None:
        # Text and YAML 1.1 values ("1e-3") become the fields' types here, before any training.
        typed = typed_settings(vars(self), field_types(type(self)), "training setting")
        for name, value in typed.items():
            setattr(self, name, value)
        # The sampler's own arguments typed against its constructor, and checked, like a loss's.
        self.sampler_args = typed_settings(
            self.sampler_args,
            parameter_types(SAMPLERS[self.sampler]),
            f"sampler {self.sampler!r} argument",
        )
        check_sampler_args(self.sampler, self.sampler_args)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"optimizer {self.optimizer!r} unknown; choose one of {', '.join(OPTIMIZERS)}"
            )
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"schedule {self.schedule!r} unknown; choose one of {', '.join(SCHEDULES)}"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"precision {self.precision!r} unknown; choose one of {', '.join(PRECISIONS)}"
            )
        if self.warmup_epochs < 0:
            raise ValueError(f"warmup_epochs must be 0 or more, got {self.warmup_epochs}")
        if self.num_workers is not None:
            if self.workers is not None and self.workers != self.num_workers:
                raise ValueError(
                    f"workers={self.workers} and num_workers={self.num_workers} disagree: "
                    "num_workers is the old name of workers; give workers alone"
                )
            self.workers = self.num_workers
        if self.workers is not None and self.workers < 0:
            raise ValueError(f"workers must be 0 or more (or None), got {self.workers}")
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
