"""``clusterable demo``: every loss of the library trained on the bundled digits, compared.

The same small MLP is trained with each registered loss (same seed, same batches) in three views of
scikit-learn's 8x8 digits (70/30 stratified split, :func:`clusterable.data.load_dataset`):

- **fine**: train on the ten classes; held-out Recall@1, MAP@R, NMI, pairwise F1 (k-means, k = 10)
  and 5-NN accuracy;
- **coarse** (MsDNN's sub-class discovery): train on 0-4 vs 5-9 only; k-means with k = 10 on the
  held-out embedding, NMI against the ten digits (``subclass NMI``);
- **zero-shot** (the lifted / DSCL protocol): train on digits 0-4; Recall@1 and NMI on held-out
  digits 5-9, classes never seen in training.

The raw pixels are the first row. The table is printed and written as Markdown and JSON, with a
t-SNE map of each loss's fine-view test embedding, into the report folder.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from clusterable._optional import require
from clusterable._threads import single_thread
from clusterable.data import MSDNN_COARSE, LabelledDataset, class_split, coarse_labels, load_dataset
from clusterable.evaluate import evaluate_embeddings, knn_accuracy
from clusterable.losses import available_losses
from clusterable.plots import plot_tsne
from clusterable.recipe import RunSpec, build_trainer
from clusterable.reports import ExperimentReport, Row, write_reproduction_report
from clusterable.train import TrainConfig, embed_dataset

COLUMNS = {
    "recall@1": "R@1",
    "map@r": "MAP@R",
    "nmi": "NMI",
    "f1": "F1",
    "knn@5": "5-NN acc",
    "subclass_nmi": "sub-class NMI",
    "zero_shot_recall@1": "zero-shot R@1",
    "zero_shot_nmi": "zero-shot NMI",
}
SEEN_CLASSES = range(5)  # zero-shot view: train on 0-4, test on 5-9


@dataclass(frozen=True)
class DemoConfig:
    """Settings of ``clusterable demo``: one training per loss and view of the digits."""

    epochs: int = 15  # passes over the training split, per loss and view
    batch_size: int = 120  # class-balanced: 10 classes x 12 digits in the fine view
    embedding_dim: int = 32
    lr: float = 1e-3  # Adam
    seed: int = 0
    plots: bool = True  # t-SNE map per loss


def train_view(
    name: str, train: LabelledDataset, config: DemoConfig, device: str = "auto"
) -> torch.nn.Module:
    """Train a fresh MLP with loss ``name`` on ``train`` on ``device``; returns the model in eval
    mode."""
    spec = RunSpec(data="digits", model="mlp", loss=name, embedding_dim=config.embedding_dim)
    settings = TrainConfig(
        epochs=config.epochs,
        batch_size=config.batch_size,
        items_per_class=config.batch_size // 10,
        lr=config.lr,
        eval_every=0,
        progress=False,
        seed=config.seed,
        device=device,
    )
    trainer = build_trainer(spec, settings, train)
    trainer.fit()
    return trainer.model.eval()


def score_views(
    embed: Any,
    views: dict[str, tuple[LabelledDataset, LabelledDataset]],
    seed: int,
    device: str = "auto",
) -> tuple[dict[str, float], np.ndarray]:
    """The demo's columns for one loss; ``embed(view, dataset)`` gives that view's embeddings.
    The searches and k-means run on ``device``."""
    train, test = views["fine"]
    train_emb, test_emb = embed("fine", train), embed("fine", test)
    table = evaluate_embeddings(test_emb, test.labels, ks=(1,), seed=seed, device=device)
    row = {c: table[c] for c in ("recall@1", "map@r", "nmi", "f1")}
    row["knn@5"] = knn_accuracy(train_emb, train.labels, test_emb, test.labels, k=5, device=device)
    coarse_test = views["coarse"][1]
    fine_table = evaluate_embeddings(
        embed("coarse", coarse_test), coarse_test.fine_labels, ks=(1,), device=device
    )
    row["subclass_nmi"] = fine_table["nmi"]
    unseen = views["zero-shot"][1]
    unseen_table = evaluate_embeddings(
        embed("zero-shot", unseen), unseen.labels, ks=(1,), device=device
    )
    row["zero_shot_recall@1"] = unseen_table["recall@1"]
    row["zero_shot_nmi"] = unseen_table["nmi"]
    return {k: float(v) for k, v in row.items()}, test_emb


def digits_views() -> dict[str, tuple[LabelledDataset, LabelledDataset]]:
    """The demo's ``(train, test)`` views of digits: fine classes, coarse ones, unseen classes."""
    train, test = load_dataset("digits", split="train"), load_dataset("digits", split="test")
    unseen = [c for c in range(10) if c not in SEEN_CLASSES]
    return {
        "fine": (train, test),
        "coarse": (coarse_labels(train, MSDNN_COARSE), coarse_labels(test, MSDNN_COARSE)),
        "zero-shot": (class_split(train, SEEN_CLASSES), class_split(test, unseen)),
    }


def markdown_table(results: dict[str, dict[str, float]]) -> str:
    """The demo's results, one row per loss, as a Markdown table (scores in percent)."""
    lines = [
        "| loss | " + " | ".join(COLUMNS.values()) + " | seconds |",
        "|---" * (len(COLUMNS) + 2) + "|",
    ]
    for name, row in results.items():
        cells = " | ".join(f"{100 * row[c]:.2f}" for c in COLUMNS)
        lines.append(f"| {name} | {cells} | {row['seconds']:.1f} |")
    return "\n".join(lines)


def run_demo(
    out: Path, quick: bool = False, seed: int = 0, device: str = "auto"
) -> dict[str, dict[str, float]]:
    """Train, evaluate and report every loss; returns ``{loss: {column: value}}``.

    ``device``: where the models train and the searches and k-means run (``clusterable demo
    --device``); ``"auto"``: CUDA, then MPS, then the CPU.

    Raises
    ------
    ImportError
        Before any training, when the report's figures cannot be drawn: matplotlib, and openTSNE
        for the maps (``pip install 'clusterable[plots]'``).
    """
    require("matplotlib", "clusterable demo (its report's figures)")
    if DemoConfig.plots:
        require("openTSNE", "clusterable demo (its t-SNE maps)")
    with single_thread():  # batches of 120 x 64
        return _run_demo(out, quick, seed, device)


def _run_demo(out: Path, quick: bool, seed: int, device: str) -> dict[str, dict[str, float]]:
    config = DemoConfig(epochs=2 if quick else DemoConfig.epochs, seed=seed)
    views = digits_views()
    out.mkdir(parents=True, exist_ok=True)

    def raw_pixels(view: str, dataset: LabelledDataset) -> np.ndarray:
        return dataset.features(flat=True)[0]

    raw, _ = score_views(raw_pixels, views, seed, device)
    results = {"raw pixels": {**raw, "seconds": 0.0}}
    bar = tqdm(
        available_losses(),
        desc="training each loss",
        unit="loss",
        disable=not sys.stderr.isatty(),  # a redirected log keeps no bar updates
    )
    for name in bar:
        start = time.perf_counter()
        models = {view: train_view(name, views[view][0], config, device) for view in views}

        def trained(
            view: str, dataset: LabelledDataset, models: dict[str, nn.Module] = models
        ) -> np.ndarray:
            return embed_dataset(models[view], dataset)[0]

        row, test_emb = score_views(trained, views, seed, device)
        results[name] = {**row, "seconds": time.perf_counter() - start}
        if config.plots:
            test = views["fine"][1]
            plot_tsne(test_emb, test.labels, out / f"tsne-{name}.png", title=name, seed=seed)

    table = markdown_table(results)
    intro = (
        f"clusterable demo — digits: {len(views['fine'][0])} train / {len(views['fine'][1])} "
        f"held-out images, MLP with a {config.embedding_dim}-d embedding, {config.epochs} epochs "
        f"per loss and view, seed {seed}. Held-out metrics in %.\n\n"
    )
    (out / "results.md").write_text(intro + table + "\n")
    report = {"config": asdict(config), "columns": COLUMNS, "results": results}
    (out / "results.json").write_text(json.dumps(report, indent=2))
    page = write_reproduction_report(html_report(results, intro, config), out)
    print(intro + table)
    print(
        f"\nwrote {out / 'results.md'}, {out / 'results.json'} and t-SNE maps tsne-*.png in {out}"
    )
    print(f"report (open it in a browser): {page}")
    return results


def html_report(
    results: dict[str, dict[str, float]], intro: str, config: DemoConfig
) -> ExperimentReport:
    """The demo's table and maps as the page `clusterable.reports` writes for an experiment."""
    rows = [
        Row(
            name,
            {c: row[c] for c in COLUMNS},
            note=f"{row['seconds']:.1f} s" if row["seconds"] else "",
        )
        for name, row in results.items()
    ]
    plots = [f"tsne-{name}.png" for name in results if name != "raw pixels"] if config.plots else []
    return ExperimentReport(
        name="demo",
        title="clusterable demo: every loss on digits",
        paper="the losses of DSCL, lifted structure, COREL, MsDNN and OPML, and their baselines",
        setup=intro.strip(),
        metrics=list(COLUMNS),
        rows=rows,
        plots=plots,
        record={"config": asdict(config)},
    )
