"""The trainer's hooks: what a run adds to the loop without changing it.

A :class:`TrainerCallback` overrides any of three methods; each does nothing by default. The
:class:`~clusterable.train.Trainer` calls them, in the order the callbacks were given, at these
points of :meth:`~clusterable.train.Trainer.fit`:

``on_epoch_start(trainer)``
    Before an epoch's first batch, before the sampler's embeddings are refreshed
    (``trainer.epoch`` epochs are done). May replace the training set
    (:meth:`~clusterable.train.Trainer.replace_train_set`): the pseudo-label refresh of deep
    OPML (:class:`~clusterable.unsupervised.PseudoLabelRefresh`).
``after_step(trainer, loss)``
    After each optimiser step (``trainer.step`` counts it), before the step's log line: the
    per-step diagnostics of OPML (:class:`~clusterable.unsupervised.OPMLDiagnostics`).
``on_evaluate(trainer, embeddings, labels) -> metrics``
    On each validation, with the labelled validation embeddings ``(n, d)`` and labels ``(n,)``
    (under torchrun this process's shard); the metrics it returns join the epoch's record, so
    ``TrainConfig.eval_metric`` may name one that the callback class declares in
    :attr:`~TrainerCallback.metrics` (a name nothing declares is refused when the config is made).

What the loop reads from its other pieces is declared on them, not hooked: the loss's
:attr:`~clusterable.losses.EmbeddingLoss.takes_inputs` and
:meth:`~clusterable.losses.EmbeddingLoss.predict`, the model's
:meth:`~clusterable.models.EmbeddingNet.parameter_groups`, the sampler's
:attr:`~clusterable.mining.DistributedBatchSampler.requires_embeddings`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from clusterable.train.trainer import Trainer


#: The validation metrics callback classes declare (``TrainerCallback.metrics``): names
#: ``TrainConfig.eval_metric`` may take besides the evaluation table's keys.
_DECLARED_METRICS: set[str] = set()


def declared_metrics() -> list[str]:
    """Every validation metric a defined callback class declares, sorted."""
    return sorted(_DECLARED_METRICS)


class TrainerCallback:
    """Base of the trainer's hooks; see the module docstring for where each is called."""

    #: The keys :meth:`on_evaluate` returns, declared so that ``TrainConfig.eval_metric`` may
    #: name one (an unknown name is refused before training, not found missing after it).
    metrics: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _DECLARED_METRICS.update(cls.metrics)

    def on_epoch_start(self, trainer: Trainer) -> None:
        """Before the epoch's first batch."""

    def after_step(self, trainer: Trainer, loss: float) -> None:
        """After each optimiser step; ``loss`` is the step's loss value."""

    def on_evaluate(
        self, trainer: Trainer, embeddings: np.ndarray, labels: np.ndarray
    ) -> dict[str, float]:
        """Extra validation metrics from the labelled validation embeddings and labels."""
        return {}
