"""Training: the :class:`Trainer`, its hooks, its settings, checkpoints and torchrun support."""

from clusterable.train.callbacks import TrainerCallback
from clusterable.train.checkpoint import load_meta, load_weights, resolve_checkpoint
from clusterable.train.config import TrainConfig
from clusterable.train.distributed import Distributed, end_distributed, setup_distributed
from clusterable.train.embed import embed_dataset
from clusterable.train.trainer import Trainer, TrainResult

__all__ = [
    "Distributed",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainerCallback",
    "embed_dataset",
    "end_distributed",
    "load_meta",
    "load_weights",
    "resolve_checkpoint",
    "setup_distributed",
]
