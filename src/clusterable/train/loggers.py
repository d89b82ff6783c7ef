"""Where a run's numbers go besides ``log.jsonl``: TensorBoard and MLflow, behind one interface.

The :class:`~clusterable.train.Trainer` writes every record to ``log.jsonl`` and hands the numbers
of each one to every :class:`RunLogger`: ``TrainConfig(tensorboard=True)`` adds a
:class:`TensorBoardLogger` (``RUN/tensorboard``), ``TrainConfig(mlflow=True)`` an
:class:`MLflowLogger` (a local store in ``RUN/mlruns``, or ``$MLFLOW_TRACKING_URI``), and
``Trainer(..., loggers=[...])`` any object of the same three methods (Weights & Biases, a test's
recorder). Only the main process of a torchrun job logs.

Numbers are named ``event/key`` as in ``log.jsonl``: ``step/loss``, ``step/lr`` at every step,
``epoch/loss`` and ``epoch/recall@1`` (MLflow: ``epoch/recall_at_1``) at every epoch, each at the
global step it was reached.

Example
-------
>>> class Printer:
...     def start(self, settings, resume): print("lr", settings["train"]["lr"])
...     def log_scalars(self, scalars, step): pass
...     def close(self, error=None): print("done")
>>> from clusterable.data import load_dataset
>>> from clusterable.losses import build_loss
>>> from clusterable.models import build_model
>>> from clusterable.train import TrainConfig, Trainer
>>> train = load_dataset("digits", split="train")
>>> model = build_model("mlp", train.input_shape, embedding_dim=8)
>>> config = TrainConfig(epochs=1, eval_every=0, progress=False)
>>> _ = Trainer(model, build_loss("lifted"), train, config=config, loggers=[Printer()]).fit()
lr 0.001
done
"""

from __future__ import annotations

import importlib
import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from clusterable._optional import require

#: Fields of a log record that say where it belongs rather than what was measured.
_PLACE_KEYS = frozenset({"event", "epoch", "step", "time"})


@runtime_checkable
class RunLogger(Protocol):
    """What the trainer calls on a logger: ``start`` once before the first step, ``log_scalars``
    for every record that holds numbers, ``close`` once at the end (``error``: what stopped the
    run, None when it finished)."""

    def start(self, settings: Mapping[str, Any], resume: bool) -> None:
        """``settings``: ``{"train": TrainConfig fields, "spec": RunSpec fields, ...}``;
        ``resume``: the run continues from a checkpoint (and its earlier numbers)."""

    def log_scalars(self, scalars: Mapping[str, float], step: int) -> None:
        """Numbers named ``event/key``, reached at the global ``step``."""

    def close(self, error: BaseException | None = None) -> None:
        """Write what is buffered and end the run."""


def scalars_of(record: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of a ``log.jsonl`` record, named ``event/key``: ``{"event": "step", "loss":
    0.5, "lr": 0.1, "step": 3}`` -> ``{"step/loss": 0.5, "step/lr": 0.1}``."""
    return {
        f"{record['event']}/{key}": float(value)
        for key, value in record.items()
        if key not in _PLACE_KEYS
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    }


def loggers_of(config: Any, out: Path) -> list[RunLogger]:
    """The loggers ``config`` (a :class:`~clusterable.train.TrainConfig`) asks for, writing in
    the run folder ``out``; each checks here that its package is installed."""
    loggers: list[RunLogger] = []
    if config.tensorboard:
        loggers.append(TensorBoardLogger(out / "tensorboard"))
    if config.mlflow:
        loggers.append(MLflowLogger(out))
    return loggers


class TensorBoardLogger:
    """Scalars as TensorBoard events in ``folder`` (``tensorboard --logdir RUN/tensorboard``),
    the settings as a text entry; needs the ``tensorboard`` package."""

    def __init__(self, folder: Path) -> None:
        require("tensorboard", "tensorboard=True (TensorBoard logging)")
        self.folder = Path(folder)
        self._writer: Any = None

    def start(self, settings: Mapping[str, Any], resume: bool) -> None:
        """Open the event file; a new run also logs its ``settings`` as text."""
        writer_class = importlib.import_module("torch.utils.tensorboard").SummaryWriter
        self._writer = writer_class(str(self.folder))
        if not resume:
            # Indented four spaces: TensorBoard's text panel renders Markdown.
            text = json.dumps(settings, indent=2, default=str).replace("\n", "\n    ")
            self._writer.add_text("settings", "    " + text)

    def log_scalars(self, scalars: Mapping[str, float], step: int) -> None:
        """Write ``scalars`` at ``step``."""
        for name, value in scalars.items():
            self._writer.add_scalar(name, value, step)

    def close(self, error: BaseException | None = None) -> None:
        """Close the event file."""
        if self._writer is not None:
            self._writer.close()


def local_mlflow_uri(run_folder: Path | str) -> str:
    """The tracking URI of a run folder's own MLflow store: the SQLite file
    ``RUN/mlruns/mlflow.db`` (``mlflow ui --backend-store-uri`` takes it)."""
    return "sqlite:///" + (Path(run_folder).resolve() / "mlruns" / "mlflow.db").as_posix()


def _flat(settings: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"train": {"lr": 0.1}}`` -> ``{"train.lr": "0.1"}``: MLflow's parameters are flat text."""
    flat: dict[str, str] = {}
    for key, value in settings.items():
        if isinstance(value, Mapping) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = str(value)
    return flat


def mlflow_metric_name(name: str) -> str:
    """``epoch/recall@1`` -> ``epoch/recall_at_1``: MLflow names take letters, digits and
    ``_``, ``-``, ``.``, ``/`` and spaces only."""
    return re.sub(r"[^\w./ -]", "_", name.replace("@", "_at_"))


#: MLflow's statuses of a run that ended: finished, stopped by an error, stopped by the user.
_END_STATUS: dict[type[BaseException] | None, str] = {None: "FINISHED", KeyboardInterrupt: "KILLED"}


class MLflowLogger:
    """Settings as MLflow parameters, scalars as metrics, one MLflow run per run folder.

    Needs ``pip install 'clusterable[mlflow]'`` (mlflow-skinny, with SQLAlchemy and alembic for
    the local store); the full ``mlflow`` package works as well.

    Parameters
    ----------
    run_folder : Path
        The run's folder: the run is named after it and tagged ``clusterable.run_folder`` with
        its path, which is how a resumed run finds its MLflow run again.
    tracking_uri : str, optional
        Where to log; default ``$MLFLOW_TRACKING_URI``, else the run folder's own store
        (:func:`local_mlflow_uri`: SQLite in ``RUN/mlruns``, artifacts in
        ``RUN/mlruns/artifacts``).
    experiment : str, optional
        Default ``$MLFLOW_EXPERIMENT_NAME``, else ``"clusterable"``.
    flush_seconds : float
        Metrics are buffered and sent at most this often (and at the end), in the background:
        a synchronous write per step costs ~20 ms on a local SQLite store.
    """

    RUN_FOLDER_TAG = "clusterable.run_folder"

    def __init__(
        self,
        run_folder: Path | str,
        tracking_uri: str | None = None,
        experiment: str | None = None,
        flush_seconds: float = 10.0,
    ) -> None:
        self._mlflow = require("mlflow", "mlflow=True (MLflow tracking)")
        self.run_folder = Path(run_folder).resolve()
        self._local_uri = local_mlflow_uri(self.run_folder)
        self.tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or self._local_uri
        self.experiment = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "clusterable"
        self.flush_seconds = flush_seconds
        self.run_id: str | None = None
        self._client: Any = None
        self._pending: list[Any] = []
        self._sending: list[Any] = []  # operations of background writes, awaited at the end
        self._last_flush = time.monotonic()

    def start(self, settings: Mapping[str, Any], resume: bool) -> None:
        """Start the MLflow run of the run folder (found again on resume) with ``settings``."""
        local = self.tracking_uri == self._local_uri
        if local:
            (self.run_folder / "mlruns").mkdir(parents=True, exist_ok=True)
        try:
            self._client = self._mlflow.tracking.MlflowClient(tracking_uri=self.tracking_uri)
        except ImportError as error:
            raise ImportError(
                f"the MLflow store {self.tracking_uri} needs SQLAlchemy and alembic, which are "
                f"not installed: pip install 'clusterable[mlflow]' ({error})"
            ) from error
        found = self._client.get_experiment_by_name(self.experiment)
        if found is not None:
            experiment_id = found.experiment_id
        else:
            artifacts = (self.run_folder / "mlruns" / "artifacts").as_uri() if local else None
            experiment_id = self._client.create_experiment(
                self.experiment, artifact_location=artifacts
            )
        params = _flat(settings)
        run = self._run_of_this_folder(experiment_id) if resume else None
        if run is None:
            run = self._client.create_run(
                experiment_id,
                run_name=self.run_folder.name,
                tags={self.RUN_FOLDER_TAG: str(self.run_folder)},
            )
            self.run_id = run.info.run_id
            self._log_params(params)
            return
        self.run_id = run.info.run_id
        self._client.update_run(self.run_id, status="RUNNING")
        logged = run.data.params
        self._log_params({k: v for k, v in params.items() if k not in logged})
        # A parameter is written once; what a resume changed (epochs, device) becomes a tag.
        for key, value in params.items():
            if key in logged and logged[key] != value:
                self._client.set_tag(self.run_id, f"resumed.{key}", value)

    def _run_of_this_folder(self, experiment_id: str) -> Any:
        runs = self._client.search_runs(
            [experiment_id],
            filter_string=f"tags.`{self.RUN_FOLDER_TAG}` = '{self.run_folder}'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        return runs[0] if runs else None

    def _log_params(self, params: Mapping[str, str]) -> None:
        param_class = self._mlflow.entities.Param
        items = [param_class(key, value) for key, value in params.items()]
        for start in range(0, len(items), 100):  # MLflow takes 100 parameters per call
            self._client.log_batch(self.run_id, params=items[start : start + 100])

    def log_scalars(self, scalars: Mapping[str, float], step: int) -> None:
        """Buffer ``scalars`` at ``step``; sent in the background every ``flush_seconds``."""
        now = time.time()
        metric_class = self._mlflow.entities.Metric
        self._pending.extend(
            metric_class(mlflow_metric_name(name), value, int(now * 1000), step)
            for name, value in scalars.items()
        )
        if len(self._pending) >= 1000 or time.monotonic() - self._last_flush >= self.flush_seconds:
            self._flush(synchronous=False)

    def _flush(self, synchronous: bool) -> None:
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        sending = self._client.log_batch(self.run_id, metrics=batch, synchronous=synchronous)
        if sending is not None:
            self._sending.append(sending)

    def close(self, error: BaseException | None = None) -> None:
        """Send what is buffered and end the run: finished, killed or failed, by ``error``."""
        if self.run_id is None:
            return
        self._flush(synchronous=True)
        for sending in self._sending:
            sending.wait()
        self._sending = []
        status = _END_STATUS.get(type(error) if error is not None else None, "FAILED")
        self._client.set_terminated(self.run_id, status=status)
