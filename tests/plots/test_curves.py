"""Training curves: the loss, the validation metrics in %, and the learning rate when logged."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from clusterable.plots import curves

RECORDS = [
    {"epoch": 1, "loss": 2.0, "recall@1": 0.5, "nmi": 0.25},
    {"epoch": 2, "loss": 1.0, "recall@1": 0.75},
    {"epoch": 3, "loss": 0.5, "recall@1": 0.8, "nmi": 0.5},
]


def test_metrics_are_drawn_in_percent_where_logged():
    figure = curves.draw_training_curves(RECORDS, ("recall@1", "nmi", "map@r"))
    loss_ax, metric_ax = figure.axes
    recall, nmi = metric_ax.get_lines()
    assert list(recall.get_ydata()) == [50.0, 75.0, 80.0]
    assert list(nmi.get_xdata()) == [1, 3] and list(nmi.get_ydata()) == [25.0, 50.0]
    assert [t.get_text() for t in metric_ax.get_legend().get_texts()] == ["recall@1", "nmi"]
    assert list(loss_ax.get_lines()[0].get_ydata()) == [2.0, 1.0, 0.5]
    assert metric_ax.get_ylim() == (0, 100)


def test_a_logged_learning_rate_gets_its_own_panel():
    with_lr = [{**record, "lr": 0.1 / record["epoch"]} for record in RECORDS]
    figure = curves.draw_training_curves(with_lr)
    assert [ax.get_title() for ax in figure.axes] == [
        "training loss",
        "validation (%)",
        "learning rate",
    ]
    assert figure.axes[2].get_yscale() == "log"
    assert np.allclose(figure.axes[2].get_lines()[0].get_ydata(), [0.1, 0.05, 0.1 / 3])


def test_no_metric_no_legend():
    figure = curves.draw_training_curves([{"epoch": 1, "loss": 1.0}], ("nmi",))
    assert figure.axes[1].get_legend() is None and not figure.axes[1].get_lines()


def write_log(path, events):
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    return path


def test_a_resumed_run_keeps_the_latest_record_of_each_epoch(tmp_path):
    log = write_log(
        tmp_path / "log.jsonl",
        [
            {"event": "epoch", "epoch": 1, "loss": 3.0},
            {"event": "step", "epoch": 2, "step": 7, "loss": 9.0},
            {"event": "epoch", "epoch": 2, "loss": 2.0},
            {"event": "resume", "epoch": 1},
            {"event": "epoch", "epoch": 2, "loss": 1.5},
        ],
    )
    assert curves.read_epoch_records(log) == [
        {"event": "epoch", "epoch": 1, "loss": 3.0},
        {"event": "epoch", "epoch": 2, "loss": 1.5},
    ]


def test_the_file_is_written_and_a_log_without_epochs_refused(tmp_path):
    log = write_log(tmp_path / "log.jsonl", [{"event": "epoch", **r} for r in RECORDS])
    with Image.open(curves.plot_training_curves(log, tmp_path / "c.png")) as image:
        assert image.format == "PNG"
    empty = write_log(tmp_path / "empty.jsonl", [{"event": "step", "epoch": 1, "loss": 1.0}])
    with pytest.raises(ValueError, match="no epoch records"):
        curves.plot_training_curves(empty, tmp_path / "d.png")
