"""``clusterable demo``: every loss of the library trained on the bundled digits and compared.

A small MLP is trained on 60% of scikit-learn's 8x8 digits with each registered loss in turn (same
seed, same batches), the held-out 40% is embedded and evaluated with the full metric table, and the
comparison is printed and written as Markdown and JSON. The raw pixels are the first row, so the
table shows what each loss adds.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from tqdm import tqdm

from clusterable.evaluate import evaluate_embeddings, knn_accuracy
from clusterable.losses import available_losses, build_loss

COLUMNS = ("recall@1", "map@r", "nmi", "f1", "accuracy", "knn@5")


@dataclass(frozen=True)
class DemoConfig:
    epochs: int = 40  # passes over the training split per loss
    batch_size: int = 128  # ~13 items of each of the 10 classes per batch
    embedding_dim: int = 32
    hidden: int = 128
    lr: float = 1e-3  # Adam
    seed: int = 0


def digits_split(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stratified 60/40 split of the digits, pixels scaled to [0, 1]."""
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    return train_test_split(
        x, digits.target, test_size=0.4, stratify=digits.target, random_state=seed
    )


def small_mlp(in_features: int, config: DemoConfig) -> nn.Module:
    return nn.Sequential(
        nn.Linear(in_features, config.hidden),
        nn.LeakyReLU(),
        nn.Linear(config.hidden, config.embedding_dim),
    )


def train_embedding(name: str, x: np.ndarray, y: np.ndarray, config: DemoConfig) -> nn.Module:
    """Train :func:`small_mlp` with one loss; the loss's own parameters are trained with it."""
    torch.manual_seed(config.seed)
    model = small_mlp(x.shape[1], config)
    extra = {"metric_dim": config.embedding_dim} if name == "opml" else {}
    loss_fn = build_loss(
        name, num_classes=int(y.max()) + 1, embedding_dim=config.embedding_dim, **extra
    )
    optimiser = torch.optim.Adam([*model.parameters(), *loss_fn.parameters()], lr=config.lr)
    inputs, labels = torch.from_numpy(x), torch.from_numpy(y)
    order = torch.Generator().manual_seed(config.seed)
    for _ in range(config.epochs):
        for batch in torch.randperm(len(x), generator=order).split(config.batch_size):
            loss = loss_fn(model(inputs[batch]), labels[batch])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    return model.eval()


def score(
    train_emb: np.ndarray, y_train: np.ndarray, test_emb: np.ndarray, y_test: np.ndarray, seed: int
) -> dict[str, float]:
    row = evaluate_embeddings(test_emb, y_test, ks=(1,), seed=seed)
    row["knn@5"] = knn_accuracy(train_emb, y_train, test_emb, y_test, k=5)
    return {column: float(row[column]) for column in COLUMNS}


def markdown_table(results: dict[str, dict[str, float]]) -> str:
    header = "| loss | " + " | ".join(COLUMNS) + " | seconds |"
    lines = [header, "|" + "---|" * (len(COLUMNS) + 2)]
    for name, row in results.items():
        cells = " | ".join(f"{100 * row[c]:.2f}" for c in COLUMNS)
        lines.append(f"| {name} | {cells} | {row['seconds']:.1f} |")
    return "\n".join(lines)


def run_demo(out: Path, quick: bool = False, seed: int = 0) -> dict[str, dict[str, float]]:
    """Train, evaluate and report every loss; returns ``{loss: {metric: value}}``."""
    config = DemoConfig(epochs=5 if quick else DemoConfig.epochs, seed=seed)
    x_train, x_test, y_train, y_test = digits_split(seed)
    results = {"raw pixels": {**score(x_train, y_train, x_test, y_test, seed), "seconds": 0.0}}
    for name in tqdm(available_losses(), desc="training", unit="loss"):
        start = time.perf_counter()
        model = train_embedding(name, x_train, y_train, config)
        with torch.no_grad():
            train_emb = model(torch.from_numpy(x_train)).numpy()
            test_emb = model(torch.from_numpy(x_test)).numpy()
        row = score(train_emb, y_train, test_emb, y_test, seed)
        results[name] = {**row, "seconds": time.perf_counter() - start}
    out.mkdir(parents=True, exist_ok=True)
    table = markdown_table(results)
    intro = (
        f"Digits, {len(x_train)} train / {len(x_test)} held-out images, MLP 64-{config.hidden}-"
        f"{config.embedding_dim}, {config.epochs} epochs per loss, seed {seed}. "
        "Held-out metrics in %; k-means with k = 10 for NMI, F1 and accuracy.\n\n"
    )
    (out / "results.md").write_text(intro + table + "\n")
    (out / "results.json").write_text(
        json.dumps({"config": asdict(config), "results": results}, indent=2)
    )
    print(intro + table)
    print(f"\nwrote {out / 'results.md'} and {out / 'results.json'}")
    return results
