"""The training loop: one read from top to bottom.

``Trainer(model, loss, train_set, val_set, config, out).fit()`` runs epochs of batches from a
sampler, evaluates on the held-out set, checkpoints atomically, logs every step as JSON lines, and
resumes a killed run to the result the uninterrupted run gives. Under ``torchrun`` it runs
DistributedDataParallel and every loss sees the all-gathered global batch
(:class:`~clusterable.losses.DistributedLoss`).

Nothing of one paper is in the loop. What it reads from its pieces is declared on them: the
model's :meth:`~clusterable.models.EmbeddingNet.parameter_groups` (the lifted paper's head
learning rate), the loss's :attr:`~clusterable.losses.EmbeddingLoss.takes_inputs` (MsDNN-AE's
:class:`~clusterable.losses.AutoencoderLoss`) and :meth:`~clusterable.losses.EmbeddingLoss.predict`
(classification accuracy), the sampler's ``requires_embeddings`` (the lifted paper's hard
negatives). ``TrainConfig.chunk_size`` picks DSCL's chunked backward pass
(:mod:`clusterable.train.backward`) once. A run adds behaviour through
:class:`~clusterable.train.TrainerCallback` hooks (:mod:`clusterable.train.callbacks`).

Example
-------
>>> from clusterable.data import load_dataset
>>> from clusterable.losses import build_loss
>>> from clusterable.models import build_model
>>> train = load_dataset("digits", split="train")
>>> model = build_model("mlp", train.input_shape, embedding_dim=32)
>>> result = Trainer(model, build_loss("lifted"), train, config=TrainConfig(epochs=2)).fit()
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from clusterable._atomic import atomic_write_text
from clusterable._ranges import SettingError
from clusterable.data import LabelledDataset
from clusterable.data.device_augment import CropBatch, crops_on_device, resized_crops
from clusterable.device import allocator_words
from clusterable.losses import DistributedLoss, EmbeddingLoss, NonFiniteEmbeddings
from clusterable.mining import DistributedBatchSampler
from clusterable.models import EmbeddingNet
from clusterable.seeding import seed_everything
from clusterable.train.backward import Backward, ChunkedBackward, StepParts, whole_batch_backward
from clusterable.train.batchnorm import freeze_batchnorm_parameters, hold_statistics
from clusterable.train.callbacks import TrainerCallback
from clusterable.train.checkpoint import (
    load_state,
    load_weights,
    prune_checkpoints,
    resolve_checkpoint,
    save_checkpoint,
)
from clusterable.train.config import (
    TrainConfig,
    check_batches_hold_pairs,
    check_eval_metric_of_loss,
    check_patience_has_validation,
)
from clusterable.train.distributed import (
    Distributed,
    all_reduce_mean,
    average_gradients,
    barrier,
    setup_distributed,
)
from clusterable.train.embed import embed_dataset
from clusterable.train.loading import pixels_to_unit, worker_errors_named
from clusterable.train.loggers import RunLogger, loggers_of, scalars_of
from clusterable.train.optim import build_optimizer, build_scheduler, load_schedule_state
from clusterable.train.precision import (
    autocast,
    autocast_dtype,
    is_convolutional,
    resolve_precision,
)
from clusterable.train.rng_state import restore_rng_state, rng_state
from clusterable.train.training_batches import TrainingBatches
from clusterable.train.validation import classification_accuracy, embed_shard, validation_table


@dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns."""

    epochs_run: int
    best_epoch: int | None
    best_metric: float | None
    history: list[dict[str, Any]] = field(default_factory=list)
    checkpoint: Path | None = None


class Trainer:
    """Train an embedding model with any loss of :mod:`clusterable.losses`.

    Parameters
    ----------
    model : nn.Module
        Maps a batch of inputs to ``(n, d)`` embeddings. An
        :class:`~clusterable.models.EmbeddingNet` (what ``build_model`` makes) trains its head at
        ``config.head_lr_multiplier`` times the learning rate (lifted paper, Sec. 5); any other
        module trains as one group.
    loss : EmbeddingLoss
        Called as ``loss(embeddings, labels)``, or with ``inputs=`` when it declares
        ``takes_inputs``; its own parameters (class weights, OPML's R and L, a decoder) are
        trained with the model.
    train_set, val_set : LabelledDataset
        Items with label -1 (distractors) are never sampled for training.
    config : TrainConfig
    out : Path, optional
        Run folder for checkpoints, ``log.jsonl`` and ``result.json``; without it nothing is
        written.
    env : Distributed, optional
        The process group; by default read from the torchrun environment.
    record : dict, optional
        How to rebuild the model and loss (:func:`clusterable.recipe.build_trainer` stores the
        run's spec, input shape and class count): written into every checkpoint's ``meta.json``
        under ``"run"``.
    callbacks : sequence of TrainerCallback
        Hooks called at their points of the loop, in this order
        (:mod:`clusterable.train.callbacks`).
    loggers : sequence of RunLogger
        Receivers of the settings and of every logged number (:mod:`clusterable.train.loggers`),
        beside the TensorBoard and MLflow loggers ``config`` asks for (those write in ``out``).
    """

    def __init__(
        self,
        model: nn.Module,
        loss: EmbeddingLoss,
        train_set: LabelledDataset,
        val_set: LabelledDataset | None = None,
        config: TrainConfig | None = None,
        out: Path | str | None = None,
        env: Distributed | None = None,
        record: dict[str, Any] | None = None,
        callbacks: Sequence[TrainerCallback] = (),
        loggers: Sequence[RunLogger] = (),
    ) -> None:
        if not isinstance(loss, EmbeddingLoss):
            raise TypeError(
                f"the loss must be an EmbeddingLoss, got {type(loss).__name__}: build one with "
                "clusterable.losses.build_loss, or subclass clusterable.losses.EmbeddingLoss "
                "and implement compute(embeddings, labels)"
            )
        self.config = config or TrainConfig()
        self.record = dict(record or {})
        self.callbacks = list(callbacks)
        self.env = env or setup_distributed(self.config.device)
        self.model = model.to(self.env.device)
        self._frozen_batchnorms = (
            freeze_batchnorm_parameters(self.model) if self.config.freeze_batchnorm else []
        )
        self.precision = resolve_precision(
            self.config.precision, self.env.device, amp=self.config.amp
        )
        # channels_last: the layout cuDNN's fast convolution kernels (and tensor cores) take.
        self._channels_last = self.env.device.type == "cuda" and is_convolutional(self.model)
        if self._channels_last:
            # Module.to takes memory_format (torch's docs); its stub's overloads leave it out.
            self.model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        self.loss = loss.to(self.env.device)
        self.global_loss = DistributedLoss(self.loss)  # the loss itself outside torchrun
        self.train_set, self.val_set = train_set, val_set
        self.out = Path(out) if out is not None else None
        self.loggers: list[RunLogger] = []
        if self.env.is_main:  # one process reports; each logger's package is checked here
            own = loggers_of(self.config, self.out) if self.out is not None else []
            self.loggers = [*own, *loggers]
        if self.config.batch_size % self.env.world_size:
            raise ValueError(
                f"batch_size {self.config.batch_size} is not divisible by the "
                f"{self.env.world_size} processes; choose a multiple of {self.env.world_size}"
            )
        self.network = self._distribute(self.model)
        self.sampler = self._build_sampler()
        check_batches_hold_pairs(self.config, self.sampler, train_set.labels, self.loss)
        check_patience_has_validation(self.config, val_set is not None)
        check_eval_metric_of_loss(self.config, self.loss)
        self.optimizer = self._build_optimizer()
        self.scheduler = self._build_scheduler()
        self.autocast_dtype = autocast_dtype(self.precision)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.precision == "fp16")
        self._backward: Backward = (
            ChunkedBackward(self.config.chunk_size)
            if self.config.chunk_size
            else whole_batch_backward
        )
        self._step_parts = StepParts(
            network=self.network,
            loss=self._loss_value,
            autocast=self._autocast,
            scale=self.scaler.scale,
            # DDP's no_sync; the network is DDP exactly when training is distributed.
            defer_sync=(
                self.network.no_sync
                if isinstance(self.network, DistributedDataParallel)
                else nullcontext
            ),
        )
        self.history: list[dict[str, Any]] = []
        self.epoch = 0  # epochs completed
        self.step = 0
        self.best_metric: float | None = None
        self.best_epoch: int | None = None
        self.evals_without_improvement = 0
        self._notes: list[str] = []  # said once each in log.jsonl
        self.batches = TrainingBatches(
            train_set,
            self.sampler,
            self.config,
            pin_memory=self.env.device.type == "cuda",
            channels_last=self._channels_last,
            device_crops=crops_on_device(self.config.augment_on, self.env.device),
            note=self._announce,
            progress=self.config.progress and self.env.is_main,
        )

    # ----------------------------------------------------------------------------------------
    # set-up
    def _distribute(self, module: nn.Module) -> nn.Module:
        if not self.env.enabled:
            return module
        device_ids = [self.env.device.index] if self.env.device.type == "cuda" else None
        return DistributedDataParallel(module, device_ids=device_ids)

    def _build_sampler(self) -> DistributedBatchSampler:
        return self.config.batch_sampler(self.train_set.labels, self.env.world_size, self.env.rank)

    def replace_train_set(self, train_set: LabelledDataset) -> None:
        """Train on ``train_set`` from the next epoch on (new pseudo-labels), with a new sampler."""
        self.train_set = train_set
        self.sampler = self._build_sampler()
        self.batches.replace(train_set, self.sampler)

    def _build_optimizer(self) -> torch.optim.Optimizer:
        config = self.config
        if isinstance(self.model, EmbeddingNet):
            groups = self.model.parameter_groups(config.lr, config.head_lr_multiplier)
        elif config.head_lr_multiplier != 1.0:
            raise ValueError(
                f"head_lr_multiplier={config.head_lr_multiplier:g} needs a model with a declared "
                f"head, an EmbeddingNet (clusterable.models.build_model, or EmbeddingNet(backbone, "
                f"feature_dim, embedding_dim)); {type(self.model).__name__} is not one"
            )
        else:
            groups = [{"params": list(self.model.parameters()), "lr": config.lr}]
        own = list(self.loss.parameters())
        if own:
            groups.append({"params": own, "lr": config.lr})
        return build_optimizer(
            config.optimizer,
            groups,
            lr=config.lr,
            weight_decay=config.weight_decay,
            momentum=config.momentum,
        )

    def _build_scheduler(self) -> torch.optim.lr_scheduler.LambdaLR:
        steps_per_epoch = len(self.sampler)
        return build_scheduler(
            self.optimizer,
            self.config.schedule,
            total_steps=self.config.epochs * steps_per_epoch,
            warmup_steps=round(self.config.warmup_epochs * steps_per_epoch),
        )

    # ----------------------------------------------------------------------------------------
    # one step
    def _autocast(self) -> Any:
        return autocast(self.env.device, self.autocast_dtype)

    def _loss_value(self, embeddings: Tensor, labels: Tensor, inputs: Tensor) -> Tensor:
        """The loss of this process's batch: over the global batch (a loss that takes the inputs
        gathers what it needs itself, see ``EmbeddingLoss.takes_inputs``)."""
        if self.loss.takes_inputs:
            return self.loss(embeddings, labels, inputs=inputs)
        return self.global_loss(embeddings, labels)

    def train_step(self, x: Tensor | CropBatch, y: Tensor) -> float:
        """One optimiser step on this process's batch ``x`` ``(n_local, ...)``, ``y``
        ``(n_local,)``; returns the loss value. A uint8 ``x`` is pixels (0-255, what the loader
        hands over for image files): they become [0, 1] floats on the device. A
        :class:`CropBatch` (``augment_on``: the device) is resized to its views there first."""
        pinned = x.is_pinned()
        x = x.to(self.env.device, non_blocking=pinned)
        y = y.to(self.env.device, non_blocking=pinned)
        if isinstance(x, CropBatch):
            x = resized_crops(x)  # (n_local, C, size, size) uint8
        if x.dtype == torch.uint8:
            x = pixels_to_unit(x, channels_last=self._channels_last)
        elif self._channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        self.optimizer.zero_grad(set_to_none=True)
        try:
            value = self._backward(self._step_parts, x, y)
        except NonFiniteEmbeddings as error:
            raise self._diverged(x, error) from None
        except torch.OutOfMemoryError as error:
            raise self._out_of_memory(error) from None
        if self.loss.takes_inputs and self.env.enabled:
            # Its terms on this process's items give each process its own gradient (DDP's
            # average for the model); the loss's parameters need the same average.
            average_gradients(self.loss.parameters(), self.env)
        if self.config.grad_clip is not None:
            self.scaler.unscale_(self.optimizer)
            params = [p for g in self.optimizer.param_groups for p in g["params"]]
            torch.nn.utils.clip_grad_norm_(params, self.config.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        return float(value.detach())

    def _diverged(self, x: Tensor, error: NonFiniteEmbeddings) -> ValueError:
        """The error of a step whose model gave NaN or infinite embeddings of batch ``x``: the
        items themselves where they hold NaN or inf, else the training diverged, said as a
        setting error of ``lr`` (the command line names ``--lr``), with the epoch and step."""
        where = f"at epoch {self.epoch + 1}, step {self.step + 1}"
        gave = f"the model gave {error.rows} NaN or inf embeddings"
        if x.is_floating_point() and not bool(torch.isfinite(x).all()):
            return ValueError(f"a training batch {where} holds NaN or inf items: {gave}")
        reason = (
            f"made the training diverge {where} ({gave}): lower it, or clip the gradients; "
            "the checkpoints of the epochs before are kept"
        )
        return SettingError("training setting", "lr", self.config.lr, reason)

    def _out_of_memory(self, error: torch.OutOfMemoryError) -> SettingError:
        """The error of a step whose batch did not fit in the device's memory, said as a setting
        error of ``batch_size`` (the command line names ``--batch-size``) with the epoch, the
        step, the allocator's own first sentence, and what else lowers the memory a step takes:
        embedding the batch in chunks (the same gradient), bf16, a smaller image size."""
        said = allocator_words(error)
        chunks = (
            "embed each batch in chunks with --chunk-size N (the same gradient, less memory)"
            if self.config.chunk_size is None
            else f"a --chunk-size below {self.config.chunk_size}"
        )
        reason = (
            f"does not fit in the memory of {self.env.device} at epoch {self.epoch + 1}, step "
            f"{self.step + 1} ({said}): lower it, or {chunks}, or train in bf16 (--precision "
            "bf16), or at a smaller --image-size; the checkpoints of the epochs before are kept "
            "(--resume with --chunk-size goes on from them)"
        )
        return SettingError("training setting", "batch_size", self.config.batch_size, reason)

    # ----------------------------------------------------------------------------------------
    # epochs
    def _run_epoch(self) -> float:
        for callback in self.callbacks:
            callback.on_epoch_start(self)
        if self.sampler.requires_embeddings:
            embeddings, _ = embed_dataset(self.model, self.train_set, device=self.env.device)
            self.sampler.update_embeddings(embeddings)
        self.model.train()
        hold_statistics(self._frozen_batchnorms)
        bar = tqdm(
            total=len(self.sampler),
            desc=f"epoch {self.epoch + 1}/{self.config.epochs}",
            # Bars only where they redraw in place: a redirected log keeps no bar updates.
            disable=not (self.config.progress and self.env.is_main and sys.stderr.isatty()),
            leave=False,
        )
        losses, start = [], time.perf_counter()
        for x, y in worker_errors_named(self.batches.of_epoch(self.epoch)):
            lr = self.optimizer.param_groups[0]["lr"]  # the backbone's, this step's
            value = self.train_step(x, y)
            self.step += 1
            losses.append(value)
            for callback in self.callbacks:
                callback.after_step(self, value)
            rate = len(x) * self.env.world_size * bar.n / max(time.perf_counter() - start, 1e-9)
            bar.update()
            bar.set_postfix(loss=f"{value:.4f}", items_per_s=f"{rate:.0f}")
            record = {"epoch": self.epoch + 1, "step": self.step, "loss": value, "lr": lr}
            self.log({"event": "step", **record})
        bar.close()
        return all_reduce_mean(float(np.mean(losses)) if losses else float("nan"), self.env)

    def evaluate(self) -> dict[str, float]:
        """Metrics of the current model on the validation set (empty without one), computed on
        the run's device (``config.device``, or under torchrun the process's GPU).

        Under torchrun each rank embeds one contiguous shard of the set, and
        `evaluate_embeddings` puts the shards together and splits the kNN search between the
        ranks: every rank gets the single-process table. A set with query and gallery roles
        (``is_query``) is scored as its queries ranking its gallery
        (:mod:`clusterable.train.validation`).
        """
        if self.val_set is None:
            return {}
        embeddings, labels = embed_shard(self.model, self.val_set, self.env)
        keep = labels >= 0
        embeddings, labels = embeddings[keep], labels[keep]
        metrics = {}
        if self.config.eval_embeddings:
            metrics = validation_table(
                embeddings, labels, self.val_set, self.env, self.config.seed, self._note_once
            )
        accuracy = classification_accuracy(self.loss, embeddings, labels, self.env)
        if accuracy is not None:
            metrics["classification_accuracy"] = accuracy
        for callback in self.callbacks:
            metrics.update(callback.on_evaluate(self, embeddings, labels))
        return metrics

    def _announce(self, note: str) -> None:
        """Log a note of the run (and print it, ``config.verbose``)."""
        self.log({"event": "note", "epoch": self.epoch, "note": note})
        if self.config.verbose and self.env.is_main:
            print(note, flush=True)

    def _note_once(self, note: str) -> None:
        """Log a note of the validation, once per run (and print it, ``config.verbose``: why an
        epoch's line has no validation figure)."""
        if note not in self._notes:
            self._notes.append(note)
            self._announce(f"validation: {note}")

    def fit(self, resume: bool = False) -> TrainResult:
        """Train for ``config.epochs`` epochs; ``resume`` continues from the latest checkpoint."""
        settings = {"train": self.config.to_dict(), **self.record}
        for logger in self.loggers:
            logger.start(settings, resume)
        try:
            result = self._fit(resume)
        except BaseException as error:  # Ctrl-C too: MLflow marks the run killed
            self._close_loggers(error)
            raise
        self._close_loggers()
        return result

    def _fit(self, resume: bool) -> TrainResult:
        if resume:
            self._resume()
        else:
            seed_everything(self.config.seed)
            if self.config.epochs == 0 and self.out is not None:
                self._save(improved=False)  # trains nothing: the starting model is the run's
        first_epoch, first_step = len(self.history), self.step
        while self.epoch < self.config.epochs:
            start = time.perf_counter()
            mean_loss = self._run_epoch()
            self.epoch += 1
            record: dict[str, Any] = {"epoch": self.epoch, "loss": mean_loss}
            if self.config.eval_every and self.epoch % self.config.eval_every == 0:
                record.update(self._evaluate_keeping_the_epoch(record))
            self.history.append(record)
            self.log({"event": "epoch", **record})
            improved = self._track_best(record)
            self._print_epoch(record, improved, time.perf_counter() - start)
            stop = self._should_stop(improved)
            last = self.epoch == self.config.epochs or stop
            every = self.config.checkpoint_every
            if self.out is not None and (last or (every and self.epoch % every == 0) or improved):
                self._save(improved)
                barrier(self.env)  # the other processes read the checkpoint pointers after this
            if stop:
                break
        if self.step > first_step and all(r["loss"] == 0.0 for r in self.history[first_epoch:]):
            self.batches.close()  # no result: the scores would be the untrained model's
            raise ValueError(
                f"every one of the {self.step - first_step} training steps had loss 0: the model "
                f"did not train, so there is no result to report. {type(self.loss).__name__} "
                "found nothing to learn in any batch: check its arguments (a margin of 0?) "
                "and the batches (items of two classes or more, two or more of a class)"
            )
        return self._finish()

    def _evaluate_keeping_the_epoch(self, record: dict[str, Any]) -> dict[str, float]:
        """:meth:`evaluate`; when it fails, the trained epoch is checkpointed first (``latest``,
        without metrics), so that ``resume`` continues from it once the cause is fixed."""
        try:
            return self.evaluate()
        except Exception:
            if self.out is not None:
                self.history.append(record)
                self.log({"event": "epoch", **record, "evaluation": "failed"})
                self._save(improved=False)
            raise

    def _print_epoch(self, record: dict[str, Any], improved: bool, seconds: float) -> None:
        """One line per epoch (``config.verbose``): loss, the validation metric, time."""
        if not (self.config.verbose and self.env.is_main):
            return
        width = len(str(self.config.epochs))
        line = f"epoch {self.epoch:>{width}}/{self.config.epochs}  loss {record['loss']:.4f}"
        metric = record.get(self.config.eval_metric)
        if metric is not None:
            line += f"  validation {self.config.eval_metric} {100 * metric:5.2f} %"
            line += " (best)" if improved else ""
        print(f"{line}  {seconds:.1f} s", flush=True)

    def _track_best(self, record: dict[str, Any]) -> bool:
        metric = record.get(self.config.eval_metric)
        if metric is None:
            every = self.config.eval_every
            if self.val_set is not None and every and self.epoch % every == 0:  # validated
                self._note_once(
                    f"{self.config.eval_metric} (the eval_metric) is not in the validation table "
                    "(see the notes above): no epoch is the best, and the last one is the result"
                )
            return False
        if self.best_metric is None or metric > self.best_metric:
            self.best_metric, self.best_epoch = float(metric), self.epoch
            self.evals_without_improvement = 0
            return True
        self.evals_without_improvement += 1
        return False

    def _should_stop(self, improved: bool) -> bool:
        patience = self.config.patience
        return patience is not None and not improved and self.evals_without_improvement >= patience

    # ----------------------------------------------------------------------------------------
    # checkpoints and logs
    def _state(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "best_metric": self.best_metric,
            "best_epoch": self.best_epoch,
            "evals_without_improvement": self.evals_without_improvement,
            "history": self.history,
            "rng": rng_state(),
        }

    def _save(self, improved: bool) -> None:
        if not self.env.is_main or self.out is None:  # callers check out: never None here
            return
        meta = {
            "epoch": self.epoch,
            "config": self.config.to_dict(),
            "metrics": self.history[-1] if self.history else {},
            "dataset": self.train_set.name,
            "world_size": self.env.world_size,
            "run": self.record,
        }
        pointers = ("latest", "best") if improved else ("latest",)
        name = f"epoch-{self.epoch:04d}"
        save_checkpoint(self.out, name, self.model, self.loss, self._state(), meta, pointers)
        prune_checkpoints(self.out, self.config.keep_checkpoints)

    def _resume(self) -> None:
        if self.out is None:
            raise ValueError("resume needs the run folder (out=...) that holds the checkpoints")
        checkpoint = resolve_checkpoint(self.out)
        state = load_state(checkpoint)
        if state["epoch"] > self.config.epochs:  # would train nothing, and say it trained less
            raise ValueError(
                f"resume: epochs={self.config.epochs} is below the {state['epoch']} epochs "
                f"{checkpoint} has already trained; give epochs={state['epoch']} or more to go "
                "on, or train a new run in another folder"
            )
        load_weights(checkpoint, self.model, self.loss)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        if "scheduler" in state:  # checkpoints before schedules trained at a constant rate
            # More epochs than the run started with: on the new curve from the first step.
            load_schedule_state(self.scheduler, state["scheduler"])
        self.epoch, self.step = state["epoch"], state["step"]
        self.best_metric, self.best_epoch = state["best_metric"], state["best_epoch"]
        self.evals_without_improvement = state["evals_without_improvement"]
        self.history = state["history"]
        restore_rng_state(state["rng"])
        self.log({"event": "resume", "epoch": self.epoch, "checkpoint": checkpoint.name})
        if self.epoch == self.config.epochs:
            self._announce(
                f"nothing left to train: {checkpoint.name} already holds all {self.epoch} epochs "
                "of the run (resume with more epochs to train on)"
            )

    def log(self, record: dict[str, Any]) -> None:
        """On the main process: append ``record`` (with its ``"event"``) to ``log.jsonl`` (with
        a run folder), and hand its numbers to every logger."""
        if not self.env.is_main:
            return
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            with (self.out / "log.jsonl").open("a") as handle:
                handle.write(json.dumps({"time": time.time(), **record}) + "\n")
        scalars = scalars_of(record)
        if scalars:
            for logger in self.loggers:
                logger.log_scalars(scalars, record.get("step", self.step))

    def log_after_fit(self, record: dict[str, Any]) -> None:
        """A ``record`` reached after :meth:`fit` (the test split's table, ``"event": "test"``):
        into ``log.jsonl``, and to every logger at the run's last step, each started again as
        the run it logged (MLflow: the same run, found by its folder) and closed after it."""
        if not self.env.is_main:
            return
        settings = {"train": self.config.to_dict(), **self.record}
        for logger in self.loggers:
            logger.start(settings, True)
        try:
            self.log(record)
        finally:
            self._close_loggers()

    def _close_loggers(self, error: BaseException | None = None) -> None:
        for logger in self.loggers:
            logger.close(error)

    def _finish(self) -> TrainResult:
        checkpoint = None
        if self.out is not None:
            checkpoint = resolve_checkpoint(self.out, "best" if self.best_epoch else "latest")
            if self.env.is_main:
                summary = {
                    "epochs_run": self.epoch,
                    "best_epoch": self.best_epoch,
                    "best_metric": self.best_metric,
                    "eval_metric": self.config.eval_metric,
                    "history": self.history,
                }
                atomic_write_text(self.out / "result.json", json.dumps(summary, indent=2))
        self.batches.close()  # the loaders' persistent workers end, the decoded images go
        return TrainResult(self.epoch, self.best_epoch, self.best_metric, self.history, checkpoint)
