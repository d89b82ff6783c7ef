"""``train --resume --epochs N`` never goes below the epochs the run has trained: refused in one
line before any work, the run folder untouched; more epochs train on, the same epochs say so."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from test_cli_use import one_line_error  # tests/: one line, exit 2, no traceback

from clusterable.cli import main
from clusterable.data import load_dataset
from clusterable.losses import build_loss
from clusterable.models import build_model
from clusterable.train import TrainConfig, Trainer

QUICK = ["--model", "mlp", "--embedding-dim", "8", "--batch-size", "60", "--no-progress"]
QUICK += ["--workers", "0", "--no-report"]


def files_of(folder) -> dict:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def epoch_events(out) -> list[int]:
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return [r["epoch"] for r in records if r["event"] == "epoch"]


@pytest.fixture(scope="module")
def two_epoch_run(tmp_path_factory):
    """A finished run of 2 epochs (a checkpoint at each)."""
    out = tmp_path_factory.mktemp("runs") / "two"
    argv = ["train", "--data", "digits", *QUICK, "--epochs", "2", "--out", str(out)]
    assert main(argv) == 0
    return out


@pytest.fixture
def run(two_epoch_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(two_epoch_run, out)
    return out


def no_data(monkeypatch) -> None:
    def no_loading(*args, **kwargs):
        raise AssertionError("data was loaded before --epochs was checked")

    monkeypatch.setattr("clusterable.recipe.load_dataset", no_loading)


def test_fewer_epochs_than_trained_is_refused_before_work_and_changes_nothing(
    run, capsys, monkeypatch
):
    before = files_of(run)
    no_data(monkeypatch)
    err = one_line_error(capsys, ["train", "--out", str(run), "--resume", "--epochs", "1"], "train")
    assert "--epochs 1 is below the 2 epochs" in err and str(run) in err, err
    assert "--epochs 2 or more" in err and "--out" in err, err
    assert files_of(run) == before, "run.json (and everything else) must stay as it was"
    assert json.loads((run / "run.json").read_text())["config"]["epochs"] == 2


def test_a_run_json_already_below_its_checkpoint_is_refused_on_a_plain_resume(run, capsys):
    """A run.json rewritten by the old silent resume (epochs below the checkpoint's)."""
    record = json.loads((run / "run.json").read_text())
    record["config"]["epochs"] = 1
    (run / "run.json").write_text(json.dumps(record, indent=2))
    before = files_of(run)
    err = one_line_error(capsys, ["train", "--out", str(run), "--resume"], "train")
    assert "run.json asks for 1 epochs" in err and "--epochs 2 or more" in err, err
    assert files_of(run) == before


def test_more_epochs_train_on(run, capsys):
    assert main(["train", "--out", str(run), "--resume", "--epochs", "3", "--no-report"]) == 0
    assert json.loads((run / "run.json").read_text())["config"]["epochs"] == 3
    assert json.loads((run / "result.json").read_text())["epochs_run"] == 3
    assert epoch_events(run) == [1, 2, 3]


def test_a_resume_without_a_report_says_the_kept_one_shows_the_run_before(run, capsys):
    (run / "report.html").write_text("<html>the report of 2 epochs</html>")
    assert main(["train", "--out", str(run), "--resume", "--epochs", "3", "--no-report"]) == 0
    out = capsys.readouterr().out
    assert f"note: {run / 'report.html'} shows the run before it resumed" in out
    assert f"`clusterable report {run}`" in out
    (run / "report.html").unlink()
    assert main(["train", "--out", str(run), "--resume", "--epochs", "3", "--no-report"]) == 0
    assert "shows the run before" not in capsys.readouterr().out


def test_the_same_epochs_train_nothing_and_say_so(run, capsys):
    assert main(["train", "--out", str(run), "--resume", "--epochs", "2", "--no-report"]) == 0
    assert "nothing left to train: epoch-0002 already holds all 2 epochs" in capsys.readouterr().out
    assert epoch_events(run) == [1, 2]
    assert json.loads((run / "run.json").read_text())["config"]["epochs"] == 2


def test_the_trainer_refuses_to_resume_below_its_checkpoint(tmp_path):
    train = load_dataset("digits", split="train").subset(np.arange(128))

    def fit(epochs: int, resume: bool) -> Trainer:
        torch.manual_seed(0)
        model = build_model("mlp", train.input_shape, 8)
        config = TrainConfig(epochs=epochs, batch_size=32, eval_every=0, progress=False)
        trainer = Trainer(model, build_loss("contrastive"), train, config=config, out=tmp_path)
        trainer.fit(resume=resume)
        return trainer

    fit(2, resume=False)
    with pytest.raises(ValueError, match=r"epochs=1 is below the 2 epochs .* epochs=2 or more"):
        fit(1, resume=True)
    assert epoch_events(tmp_path) == [1, 2]


def test_train_run_resumed_below_its_checkpoint_leaves_the_folder_as_it_was(run):
    """The library's path to a run folder: refused before ``run.json`` is written again."""
    from clusterable.recipe import RunSpec, train_run
    from clusterable.train.run_folder import RunFolderError

    before = files_of(run)
    spec = RunSpec(data="digits", model="mlp", embedding_dim=8)
    config = TrainConfig(epochs=1, batch_size=60, progress=False, workers=0)
    with pytest.raises(RunFolderError, match="below the 2 epochs"):
        train_run(spec, config, out=run, resume=True)
    assert files_of(run) == before
