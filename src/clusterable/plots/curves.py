"""Training curves from a run's ``log.jsonl``: loss and validation metrics per epoch."""

from __future__ import annotations

import json
from pathlib import Path

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


def plot_training_curves(
    log: str | Path, path: str | Path, metrics: tuple[str, ...] = ("recall@1", "nmi")
) -> Path:
    """Write the loss curve and the given validation metrics (in %, as the CLI prints them) of a
    run, against whole epochs."""
    records = read_epoch_records(Path(log))
    if not records:
        raise ValueError(f"{log} has no epoch records; is it the log.jsonl of a training run?")
    epochs = [r["epoch"] for r in records]
    figure, (loss_ax, metric_ax) = new_figure(columns=2)
    loss_ax.plot(epochs, [r["loss"] for r in records], marker="o")
    loss_ax.set(title="training loss", xlabel="epoch")
    for name in metrics:
        values = [(r["epoch"], r[name]) for r in records if name in r]
        if values:
            epochs_of, scores = zip(*values, strict=True)
            metric_ax.plot(epochs_of, [100 * v for v in scores], marker="o", label=name)
    metric_ax.set(title="validation", xlabel="epoch", ylabel="%", ylim=(0, 100))
    metric_ax.yaxis.set_major_formatter(PercentFormatter(100))
    for ax in (loss_ax, metric_ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if metric_ax.get_legend_handles_labels()[0]:
        metric_ax.legend()
    return save_figure(figure, path)
