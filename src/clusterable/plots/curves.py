"""Training curves from a run's ``log.jsonl``: loss, validation metrics and learning rate per
epoch."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, PercentFormatter

from clusterable.plots._figure import new_figure, save_figure


def read_epoch_records(log: Path) -> list[dict]:
    """The ``epoch`` events of a JSONL log, the latest per epoch (a resumed run repeats some)."""
    by_epoch: dict[int, dict] = {}
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if record.get("event") == "epoch":
            by_epoch[record["epoch"]] = record
    return [by_epoch[e] for e in sorted(by_epoch)]


def draw_training_curves(
    records: Sequence[Mapping[str, Any]], metrics: Sequence[str] = ("recall@1", "nmi")
) -> Figure:
    """The loss, the ``metrics`` the records have (in %) and, when logged, the learning rate
    (a third panel, log scale), against whole epochs."""
    epochs = [r["epoch"] for r in records]
    with_lr = any("lr" in r for r in records)
    figure, axes = new_figure(columns=3 if with_lr else 2, size=4.2)
    loss_ax, metric_ax = axes[:2]
    loss_ax.plot(epochs, [r["loss"] for r in records], marker="o")
    loss_ax.set(title="training loss", xlabel="epoch")
    for name in metrics:
        values = [(r["epoch"], 100 * r[name]) for r in records if name in r]
        if values:
            metric_ax.plot(*zip(*values, strict=True), marker="o", label=name)
    metric_ax.set(title="validation (%)", xlabel="epoch", ylim=(0, 100))
    metric_ax.yaxis.set_major_formatter(PercentFormatter(100))
    if metric_ax.get_legend_handles_labels()[0]:
        metric_ax.legend(fontsize=7)
    if with_lr:
        rates = [(r["epoch"], r["lr"]) for r in records if "lr" in r]
        axes[2].plot(*zip(*rates, strict=True), marker="o")
        axes[2].set(title="learning rate", xlabel="epoch", yscale="log")
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return figure


def plot_training_curves(
    log: str | Path, path: str | Path, metrics: Sequence[str] = ("recall@1", "nmi")
) -> Path:
    """Write the curves of :func:`draw_training_curves` of a run's ``log.jsonl`` to ``path``."""
    records = read_epoch_records(Path(log))
    if not records:
        raise ValueError(f"{log} has no epoch records; is it the log.jsonl of a training run?")
    return save_figure(draw_training_curves(records, metrics), path)
