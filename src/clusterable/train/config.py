"""Training settings: plain values with a comment on each, readable from YAML."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from clusterable.data.image_cache import check_cache_folder
from clusterable.device import DEVICE_CHOICES, check_device_name
from clusterable.evaluate.registry import metric_of_key, table_keys
from clusterable.losses import EmbeddingLoss, available_losses, loss_class
from clusterable.mining.samplers import (
    SAMPLERS,
    DistributedBatchSampler,
    SamplerSettings,
    build_sampler,
    check_sampler_args,
    pairs_shortfall_of_labels,
)
from clusterable.train.callbacks import declared_metrics
from clusterable.train.config_typing import (
    Bounds,
    SettingError,
    check_bounds,
    check_choice,
    field_types,
    parameter_types,
    read_settings_file,
    settings_file_line,
    typed_settings,
)
from clusterable.train.optim import OPTIMIZERS, SCHEDULES
from clusterable.train.precision import PRECISIONS

#: Settings that belong to the run's pieces, not to training: where each one is set.
_SET_ELSEWHERE = {
    "reconstruction_weight": "MsDNN-AE's weight is an argument of the autoencoder loss: "
    "--autoencoder --loss-arg reconstruction_weight=VALUE (YAML: loss_args)",
}

#: The range of each numeric training setting (NaN and infinity are never one).
BOUNDS = {
    "epochs": Bounds(0),
    "batch_size": Bounds(1),
    "items_per_class": Bounds(1),
    "lr": Bounds(0, low_open=True),
    "head_lr_multiplier": Bounds(0, low_open=True),
    "momentum": Bounds(0, 1, high_open=True),
    "weight_decay": Bounds(0),
    "warmup_epochs": Bounds(0),
    "grad_clip": Bounds(0, low_open=True, none="no clipping"),
    "chunk_size": Bounds(1, none="the whole batch at once"),
    "eval_every": Bounds(0),
    "patience": Bounds(0, none="never stop early"),
    "checkpoint_every": Bounds(0),
    "keep_checkpoints": Bounds(0),
    "workers": Bounds(0, none="0 for in-memory data, else from the CPUs"),
    "num_workers": Bounds(0, none="0 for in-memory data, else from the CPUs"),
    "seed": Bounds(0, 2**32 - 1),  # NumPy's global generator takes seeds below 2**32
}

#: The range of the samplers' own numeric arguments (``sampler_args``), by keyword.
SAMPLER_ARG_BOUNDS = {
    "batches_per_epoch": Bounds(1, none="about one pass over the training items"),
    "pool_size": Bounds(1, none="every training item"),
}

#: The validation metric of a loss with its own classifier (``EmbeddingLoss.predict``).
CLASSIFICATION_ACCURACY = "classification_accuracy"


def check_eval_metric(name: str, what: str = "training setting") -> None:
    """Refuse an ``eval_metric`` that no validation can hold: a key of the evaluation table
    (``recall@4``, ``map@r``, ...), ``classification_accuracy``, or a metric a
    :class:`~clusterable.train.TrainerCallback` declares.

    Raises
    ------
    SettingError
        Naming the metrics a validation holds, and the closest one.
    """
    if metric_of_key(name) is not None or name in (CLASSIFICATION_ACCURACY, *declared_metrics()):
        return
    shown = [*table_keys(), CLASSIFICATION_ACCURACY, *declared_metrics()]
    # Concrete keys for the "did you mean": recall@l is recall@1, not recall@K.
    keys = [key.replace("@K", f"@{k}") for key in shown for k in (1, 2, 4, 8)]
    check_choice(what, "eval_metric", name, list(dict.fromkeys(keys)), shown=shown)


@dataclass
class TrainConfig:
    """Everything a training run needs besides the model, the loss and the data.

    Defaults follow the COREL protocol (Adam, batch 128) where the papers agree; ``clusterable
    reproduce`` sets each paper's own values.
    """

    epochs: int = 30  # passes over the training set (0: none, the pretrained backbone's
    # features as they are, l2-normalised: a run of the starting model for every verb)
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
    before_training: bool = True  # the test table of where training starts too, shown beside
    # the trained one: the pretrained backbone's features (timm:, torchvision: with weights),
    # else the raw inputs (up to 4,096 numbers an item), each l2-normalised
    patience: int | None = None  # stop after this many evaluations without improvement
    # (None: never stop early)
    checkpoint_every: int = 1  # epochs between checkpoints (0 = only at the end)
    keep_checkpoints: int = 2  # most recent checkpoints kept besides the best one
    workers: int | None = None  # DataLoader processes; None: 0 for in-memory data, else from CPUs
    num_workers: int | None = None  # the old name of workers, still read
    cache_images: Literal["auto", "none", "ram", "disk"] = "auto"  # image files decoded once at
    # the working resolution before the first epoch, the same pixels (each epoch then only crops
    # and resizes): ram into memory, disk into a memory-mapped cache that later runs reuse
    # ($CLUSTERABLE_CACHE_DIR, else $XDG_CACHE_HOME/clusterable/decoded-images, ~/.cache without
    # XDG_CACHE_HOME), auto ram when they fit the lesser of 8 GiB and a quarter of the memory
    # available else disk, none never
    augment_on: Literal["auto", "device", "loader"] = "auto"  # where image files' training
    # crops and flips are made: device (drawn per item in the loader, resized for the whole batch
    # on the run's device), loader (PIL in the loader's workers), auto device on CUDA else loader
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
        # Text and YAML 1.1 values ("1e-3") become the fields' types here, before any training;
        # then each is checked against its range and its choices, once, here.
        what = "training setting"
        typed = typed_settings(vars(self), field_types(type(self)), what)
        for name, value in typed.items():
            setattr(self, name, value)
        check_bounds(typed, BOUNDS, what)
        check_choice(what, "sampler", self.sampler, SAMPLERS.names(aliases=True))
        # The sampler's own arguments typed against its constructor, and checked, like a loss's.
        self.sampler_args = typed_settings(
            self.sampler_args,
            parameter_types(SAMPLERS[self.sampler]),
            f"sampler {self.sampler!r} argument",
            field="sampler_args",
        )
        try:
            check_sampler_args(self.sampler, self.sampler_args)
        except ValueError as error:
            message = str(error)  # names the keyword refused
            key = next((k for k in self.sampler_args if k in message), None)
            value = self.sampler_args.get(key) if key is not None else None
            raise SettingError(what, "sampler_args", value, message, key, sentence=True) from None
        check_bounds(
            self.sampler_args,
            SAMPLER_ARG_BOUNDS,
            f"sampler {self.sampler!r} argument",
            "sampler_args",
        )
        check_choice(what, "optimizer", self.optimizer, OPTIMIZERS)
        check_choice(what, "schedule", self.schedule, SCHEDULES)
        check_choice(what, "precision", self.precision, PRECISIONS)
        check_eval_metric(self.eval_metric, what)
        self._check_combinations()
        if self.cache_images == "disk":  # its folder named now, before any run folder
            check_cache_folder()
        if self.num_workers is not None:
            if self.workers is not None and self.workers != self.num_workers:
                raise ValueError(
                    f"workers={self.workers} and num_workers={self.num_workers} disagree: "
                    "num_workers is the old name of workers; give workers alone"
                )
            self.workers = self.num_workers
        try:
            check_device_name(self.device)
        except ValueError:
            raise SettingError(
                what,
                "device",
                self.device,
                f"is not a device; choose one of {', '.join(DEVICE_CHOICES)} (cuda:N being the "
                "number of a visible GPU)",
            ) from None

    def _check_combinations(self) -> None:
        """Refuse a setting the others would ignore or change: patience without evaluations,
        ``amp: false`` beside a mixed precision, a warm-up longer than the run, and a metric of
        the evaluation table that ``eval_embeddings: false`` never computes."""
        what = "training setting"
        if self.patience is not None and not self.eval_every:
            reason = (
                "stops after evaluations without improvement, and eval_every=0 evaluates "
                "never; give eval_every 1 or more, or leave patience out"
            )
            raise SettingError(what, "patience", self.patience, reason)
        if not self.amp and self.precision not in ("auto", "32"):
            reason = (
                f"means precision 32, and precision is {self.precision}; give precision alone "
                "(amp is its old switch: precision 32 is amp false)"
            )
            raise SettingError(what, "amp", self.amp, reason)
        if self.warmup_epochs > self.epochs:
            reason = (
                f"is longer than the run's {self.epochs} epoch(s): the learning rate would "
                f"never reach lr; give warmup_epochs at most {self.epochs}, or more epochs"
            )
            raise SettingError(what, "warmup_epochs", self.warmup_epochs, reason)
        if not self.eval_embeddings and metric_of_key(self.eval_metric) is not None:
            reason = (
                "is a key of the evaluation table, which eval_embeddings false leaves out of "
                f"every validation; give eval_metric {CLASSIFICATION_ACCURACY}, or turn "
                "eval_embeddings on"
            )
            raise SettingError(what, "eval_metric", self.eval_metric, reason)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a dict of name -> value."""
        return asdict(self)

    def batch_sampler(
        self, labels: Any, num_replicas: int = 1, rank: int = 0
    ) -> DistributedBatchSampler:
        """The batches of the items of ``labels`` (``(n,)`` class codes) these settings draw:
        the sampler, its batch size, items per class, seed and arguments; one process's share
        of them (``rank`` of ``num_replicas``)."""
        settings = SamplerSettings(
            batch_size=self.batch_size,
            items_per_class=self.items_per_class,
            seed=self.seed,
            num_replicas=num_replicas,
            rank=rank,
        )
        return build_sampler(self.sampler, labels, settings, **self.sampler_args)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """The config of setting name -> value; an unknown name is an error saying where it goes."""
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
        """The settings of a YAML file of ``setting: value`` lines; a file that does not parse,
        or a value that is refused, is one line naming the file and the line."""
        values = read_settings_file(path)
        try:
            return cls.from_dict(values)
        except SettingError as error:
            line = settings_file_line(path, (error.setting, *filter(None, [error.key])))
            where = f"{path}, line {line}" if line is not None else str(path)
            raise ValueError(f"{where}: {error}") from None


def check_batches_hold_pairs(
    config: TrainConfig, sampler: DistributedBatchSampler, labels: Any, loss: Any
) -> None:
    """Refuse, before the first step, a run whose batches can never hold both a positive pair
    and a negative, for a loss that is 0 without them (``loss.needs_pairs``: the pair and
    triplet losses); every step's loss would be 0 and the model would not train.

    Raises
    ------
    SettingError
        Where a setting makes it so (a batch of one, one class per batch): naming it and what
        to give instead.
    ValueError
        Where the training labels do (one class, or one item per class).
    """
    if not getattr(loss, "needs_pairs", False):
        return
    name = type(getattr(loss, "loss", loss)).__name__  # the wrapped loss of an autoencoder
    reason = pairs_shortfall_of_labels(labels)
    if reason is not None:
        raise ValueError(f"{name} cannot train: {reason}")
    shortfall = sampler.pair_shortfall()
    if shortfall is not None:
        setting, why, remedy = shortfall
        reason = f"{why}, and {name} is 0 on such a batch (no step would train); {remedy}"
        raise SettingError("training setting", setting, getattr(config, setting), reason)


def check_batches_exceed_dimensions(config: TrainConfig, embedding_dim: int, loss: Any) -> None:
    """Refuse, before the first step, a run whose batches hold no more items than embedding
    dimensions, for a loss that is constant on such a batch
    (``loss.needs_more_items_than_dimensions``: DSCL's spectral loss, whose ``F F^+`` is then the
    identity); every step's gradient would be 0 and the model would not train.

    Raises
    ------
    SettingError
        Naming ``batch_size``, the dimensions, and what to give instead.
    """
    if not getattr(loss, "needs_more_items_than_dimensions", False):
        return
    if config.batch_size > embedding_dim:
        return
    name = type(getattr(loss, "loss", loss)).__name__  # the wrapped loss of an autoencoder
    reason = (
        f"is not above the {embedding_dim} embedding dimensions, and {name} is 0 with a zero "
        "gradient on a batch of no more items than dimensions (F F^+ is the identity: no step "
        "would train); "
        f"give a batch size of {embedding_dim + 1} or more (a chunk size embeds it in parts), "
        "or fewer embedding dimensions"
    )
    raise SettingError("training setting", "batch_size", config.batch_size, reason)


def check_patience_has_validation(config: TrainConfig, validates: bool) -> None:
    """Refuse ``patience`` where nothing is validated (``validates`` False: no validation split,
    as with ``val_fraction`` 0 or an unsupervised run): it would never stop the run.

    Raises
    ------
    SettingError
        Naming ``patience`` and what to give instead.
    """
    if config.patience is not None and not validates:
        reason = (
            "stops after validations without improvement, and this run has no validation split "
            "(val_fraction 0, or an unsupervised run, which holds none out); leave patience "
            "out, or give a supervised run val_fraction above 0"
        )
        raise SettingError("training setting", "patience", config.patience, reason)


def check_eval_metric_of_loss(config: TrainConfig, loss: Any) -> None:
    """Refuse ``eval_metric: classification_accuracy`` for a loss without its own classifier
    (its ``predict`` is :class:`~clusterable.losses.EmbeddingLoss`'s, which predicts nothing):
    no validation would hold it, and no epoch would be the best.

    Raises
    ------
    SettingError
        Naming ``eval_metric``, and the losses that have a classifier.
    """
    lacking = without_classifier(loss)
    if config.eval_metric == CLASSIFICATION_ACCURACY and lacking is not None:
        reason = (
            f"is the accuracy of a loss's own classifier, and {lacking} has none; "
            "give a key of the evaluation table (recall@1, map@r, nmi, ...), or a loss with a "
            f"classifier: {', '.join(losses_with_a_classifier())}"
        )
        raise SettingError("training setting", "eval_metric", config.eval_metric, reason)


def without_classifier(loss: Any) -> str | None:
    """The class name of ``loss`` where it has no classifier of its own (its ``predict`` is
    :class:`~clusterable.losses.EmbeddingLoss`'s, which predicts nothing), so no
    ``classification_accuracy``; None where it has one. An autoencoder's wrapped loss decides."""
    inner = getattr(loss, "loss", loss)
    return type(inner).__name__ if type(inner).predict is EmbeddingLoss.predict else None


def losses_with_a_classifier() -> list[str]:
    """The registered losses whose ``predict`` gives classes (their own classifier)."""
    return [
        name for name in available_losses() if loss_class(name).predict is not EmbeddingLoss.predict
    ]
