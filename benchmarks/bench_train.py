"""Training throughput of every loss on Fashion-MNIST with the COREL CNN, beside cross-entropy.

For each registered loss: items per second of a full training step (forward, loss, backward,
Adam step) through :class:`clusterable.train.Trainer`, its ratio to cross-entropy's measured in the
same run, and the loss's share of the step (the loss's own forward+backward on embeddings of the
same batch, timed alone). Batches are 128 class-balanced images (10 classes x 12.8 -> 120).

    .venv/bin/python benchmarks/bench_train.py [--steps 20] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from clusterable.data import load_dataset
from clusterable.losses import available_losses
from clusterable.recipe import RunSpec, build_trainer
from clusterable.train import TrainConfig

EMBEDDING_DIM = 128


def median_seconds(step, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(name: str, data, steps: int) -> tuple[float, float, int]:
    """(seconds per training step, seconds of the loss alone, batch size)."""
    spec = RunSpec(model="corel-cnn", loss=name, embedding_dim=EMBEDDING_DIM)
    config = TrainConfig(batch_size=128, items_per_class=12, progress=False, eval_every=0)
    trainer = build_trainer(spec, config, data)
    model, loss = trainer.model, trainer.loss
    batch = next(iter(trainer.sampler))
    x = torch.from_numpy(np.asarray(data.x[np.asarray(batch)]))
    y = torch.from_numpy(data.labels[np.asarray(batch)])
    for _ in range(3):  # warm-up
        trainer.train_step(x, y)
    step = median_seconds(lambda: trainer.train_step(x, y), steps)
    with torch.no_grad():
        embeddings = model(x)

    def loss_alone() -> None:
        leaf = embeddings.clone().requires_grad_()
        loss(leaf, y).backward()

    return step, median_seconds(loss_alone, steps), len(batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = load_dataset("fashion-mnist", split="train").subset(np.arange(6000))
    print(f"COREL CNN, Fashion-MNIST 28x28, embedding {EMBEDDING_DIM}, {args.threads} thread(s),")
    print(f"median of {args.steps} steps; torch {torch.__version__}\n")
    print(
        f"{'loss':<18}{'items/s':>10}{'vs CE':>8}{'step ms':>10}{'loss ms':>10}{'loss share':>12}"
    )
    results = {name: measure(name, data, args.steps) for name in available_losses()}
    ce_rate = results["cross-entropy"][2] / results["cross-entropy"][0]
    for name, (step, loss_time, batch) in results.items():
        rate = batch / step
        print(
            f"{name:<18}{rate:>10.0f}{rate / ce_rate:>8.2f}{1000 * step:>10.1f}"
            f"{1000 * loss_time:>10.2f}{100 * loss_time / step:>11.1f}%"
        )


if __name__ == "__main__":
    main()
