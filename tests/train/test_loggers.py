"""Experiment tracking: every logger gets the run's settings, each number at its step, and one
close; MLflow's store is read back with MLflow's own client; a missing package names its extra."""

from __future__ import annotations

import sys
import types

import pytest

from clusterable.cli import main
from clusterable.data import load_dataset
from clusterable.losses import build_loss
from clusterable.models import build_model
from clusterable.train import TrainConfig, Trainer, TrainerCallback
from clusterable.train.loggers import (
    MLflowLogger,
    RunLogger,
    local_mlflow_uri,
    mlflow_metric_name,
    scalars_of,
)


@pytest.fixture(scope="module")
def digits():
    data = load_dataset("digits", split="train")
    return data.subset(range(0, 600)), data.subset(range(600, 800))


class Recorder:
    """A logger that keeps what it is given."""

    def __init__(self) -> None:
        self.settings: dict | None = None
        self.resume: bool | None = None
        self.scalars: list[tuple[int, dict[str, float]]] = []
        self.closed: list[BaseException | None] = []

    def start(self, settings, resume):
        self.settings, self.resume = dict(settings), resume

    def log_scalars(self, scalars, step):
        self.scalars.append((step, dict(scalars)))

    def close(self, error=None):
        self.closed.append(error)


def trainer(data, recorder, out=None, **settings):
    train, val = data
    model = build_model("mlp", train.input_shape, 8)
    config = TrainConfig(progress=False, device="cpu", batch_size=60, **settings)
    loss = build_loss("lifted")
    return Trainer(model, loss, train, val, config=config, out=out, loggers=[recorder])


def test_a_logger_gets_the_settings_every_number_at_its_step_and_one_close(digits):
    recorder = Recorder()
    assert isinstance(recorder, RunLogger)
    trainer(digits, recorder, epochs=2, lr=0.01).fit()
    assert recorder.settings["train"]["lr"] == 0.01 and recorder.resume is False
    steps = [(step, scalars) for step, scalars in recorder.scalars if "step/loss" in scalars]
    per_epoch = len(steps) // 2
    assert [step for step, _ in steps] == list(range(1, 2 * per_epoch + 1))
    assert all(set(scalars) == {"step/loss", "step/lr"} for _, scalars in steps)
    epochs = [(step, scalars) for step, scalars in recorder.scalars if "epoch/loss" in scalars]
    assert [step for step, _ in epochs] == [per_epoch, 2 * per_epoch]
    assert all(0 <= scalars["epoch/recall@1"] <= 1 for _, scalars in epochs)
    assert recorder.closed == [None]


def test_numbers_after_fit_reach_the_loggers_restarted_as_the_same_run(digits, tmp_path):
    recorder = Recorder()
    run = trainer(digits, recorder, out=tmp_path, epochs=1)
    run.fit()
    run.log_after_fit({"event": "test", "recall@1": 0.5})
    assert recorder.resume is True and recorder.closed == [None, None]
    assert recorder.scalars[-1] == (run.step, {"test/recall@1": 0.5})
    assert '"event": "test"' in (tmp_path / "log.jsonl").read_text().splitlines()[-1]


def test_a_run_stopped_by_an_error_closes_its_loggers_with_it(digits):
    class Fails(TrainerCallback):
        def after_step(self, trainer, loss):
            raise RuntimeError("stopped")

    recorder = Recorder()
    run = trainer(digits, recorder, epochs=1)
    run.callbacks.append(Fails())
    with pytest.raises(RuntimeError, match="stopped"):
        run.fit()
    assert len(recorder.closed) == 1 and str(recorder.closed[0]) == "stopped"


def test_numbers_are_named_event_slash_key_and_mlflow_names_are_valid():
    record = {"event": "epoch", "epoch": 2, "step": 8, "time": 1.0, "loss": 0.5, "map@r": 0.25}
    assert scalars_of({**record, "note": "text", "best": True}) == {
        "epoch/loss": 0.5,
        "epoch/map@r": 0.25,
    }
    assert mlflow_metric_name("epoch/recall@1") == "epoch/recall_at_1"
    assert mlflow_metric_name("epoch/a+b") == "epoch/a_b"


def test_tensorboard_gets_each_scalar_at_its_step_and_the_settings(digits, monkeypatch, tmp_path):
    written: dict[str, list] = {"scalars": [], "text": [], "closed": []}

    class SummaryWriter:  # torch.utils.tensorboard's, as the logger calls it
        def __init__(self, folder):
            written["folder"] = folder

        def add_scalar(self, name, value, step):
            written["scalars"].append((name, value, step))

        def add_text(self, name, text):
            written["text"].append((name, text))

        def close(self):
            written["closed"].append(True)

    monkeypatch.setitem(sys.modules, "tensorboard", types.ModuleType("tensorboard"))
    fake = types.ModuleType("torch.utils.tensorboard")
    fake.SummaryWriter = SummaryWriter
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", fake)
    recorder = Recorder()
    assert trainer(digits, recorder, tensorboard=True).loggers == [recorder]  # no run folder
    run = trainer(digits, recorder, out=tmp_path / "run", epochs=1, tensorboard=True)
    run.fit()
    assert written["folder"] == str(tmp_path / "run" / "tensorboard")
    logged = [
        (step, name, value) for step, values in recorder.scalars for name, value in values.items()
    ]
    assert sorted(logged) == sorted((step, name, value) for name, value, step in written["scalars"])
    assert written["text"][0][0] == "settings" and '"lr": 0.001' in written["text"][0][1]
    assert written["closed"] == [True]


@pytest.mark.parametrize("setting", ["tensorboard", "mlflow"])
def test_a_missing_tracking_package_names_its_extra(digits, tmp_path, monkeypatch, setting):
    monkeypatch.setitem(sys.modules, setting, None)  # import fails, as where it is not installed
    train, _ = digits
    model = build_model("mlp", train.input_shape, 8)
    config = TrainConfig(progress=False, device="cpu", **{setting: True})
    with pytest.raises(ImportError, match=rf"pip install 'clusterable\[{setting}\]'"):
        Trainer(model, build_loss("lifted"), train, config=config, out=tmp_path / "run")


def test_mlflow_holds_the_settings_and_numbers_of_a_run_and_its_resume(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    out = tmp_path / "run"
    argv = [
        "train",
        "--data",
        "digits",
        "--embedding-dim",
        "8",
        "--batch-size",
        "60",
        "--lr",
        "0.01",
        "--mlflow",
        "--no-progress",
        "--no-report",
        "--device",
        "cpu",
        "--out",
        str(out),
    ]
    assert main([*argv, "--epochs", "1"]) == 0
    assert main(["train", "--out", str(out), "--resume", "--epochs", "2", "--no-report"]) == 0

    client = MlflowClient(tracking_uri=local_mlflow_uri(out))
    experiment = client.get_experiment_by_name("clusterable")
    [run] = client.search_runs([experiment.experiment_id])  # the resume continued the same run
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    params = run.data.params
    assert params["train.lr"] == "0.01" and params["spec.data"] == "digits"
    assert params["train.epochs"] == "1" and run.data.tags["resumed.train.epochs"] == "2"
    losses = client.get_metric_history(run.info.run_id, "step/loss")
    steps = sorted(m.step for m in losses)
    assert steps == list(range(1, len(steps) + 1)) and len(steps) % 2 == 0
    recalls = client.get_metric_history(run.info.run_id, "epoch/recall_at_1")
    assert sorted(m.step for m in recalls) == [len(steps) // 2, len(steps)]
    assert all(0 <= m.value <= 1 for m in recalls)
    # The test split's table, computed after training, reaches the same run at its last step.
    tests = client.get_metric_history(run.info.run_id, "test/recall_at_1")
    assert sorted(m.step for m in tests) == [len(steps) // 2, len(steps)]
    assert (out / "mlruns" / "mlflow.db").is_file()


def test_mlflow_metrics_sent_in_the_background_all_arrive_and_ctrl_c_marks_the_run_killed(
    tmp_path, monkeypatch
):
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    logger = MLflowLogger(tmp_path / "run", experiment="background", flush_seconds=0.0)
    logger.start({"train": {"lr": 0.1}}, resume=False)
    for step in range(1, 51):  # every call sends its batch in the background
        logger.log_scalars({"step/loss": 1.0 / step}, step)
    logger.close(KeyboardInterrupt())
    client = MlflowClient(tracking_uri=local_mlflow_uri(tmp_path / "run"))
    history = client.get_metric_history(logger.run_id, "step/loss")
    assert sorted((m.step, m.value) for m in history) == [(s, 1.0 / s) for s in range(1, 51)]
    assert client.get_run(logger.run_id).info.status == "KILLED"
