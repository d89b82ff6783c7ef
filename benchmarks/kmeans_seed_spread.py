"""How much the evaluation's clustering scores move with the seed: the old k-means rule against the
one `evaluate` and `cluster` now share (`clusterable.evaluate.kmeans_rule`).

Fashion-MNIST embeddings, 10 classes. The rule was chosen on one embedding and is reported on
others:

- ``choice``: 10,000 items of the training split (seeded sample) embedded by run A (MLP,
  lifted loss, seed 0, 3 epochs);
- ``report``: the 10,000 test items embedded by run B (MLP, contrastive loss, seed 1, 3
  epochs) and by run A, and the same test items as 32 principal components of their pixels (no
  training: a hard case, classes that k-means cannot tell apart).

The runs are trained and embedded with the command line into ``--work`` (once; later calls reuse
them). For each embedding and rule, NMI and Hungarian accuracy over ``--seeds`` (0-4), as
``evaluate`` computes them (``evaluate_embeddings(metrics=["nmi", "accuracy"], seed=s)``), and
the seconds per evaluation.

    .venv/bin/python benchmarks/kmeans_seed_spread.py [--work DIR] [--seeds 0 1 2 3 4]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

#: The evaluation's k-means before the shared rule, at up to 64 clusters: one k-means++ restart of
#: at most 20 Lloyd iterations (the removed ``EVALUATION_KMEANS`` below 65 clusters).
OLD_RULE = {"init": "k-means++", "n_init": 1, "max_iter": 20}

#: The two training runs: their folder names under ``--work`` and their ``clusterable train``
#: flags.
RUNS = {
    "run-a": ["--loss", "lifted", "--seed", "0"],
    "run-b": ["--loss", "contrastive", "--seed", "1"],
}
TRAIN_FLAGS = ["--data", "fashion-mnist", "--model", "mlp", "--epochs", "3"]
TRAIN_FLAGS += ["--embedding-dim", "32", "--batch-size", "256", "--eval-every", "0", "--no-report"]

#: Training items the choice embedding samples (seeded).
CHOICE_ITEMS = 10_000


def _embedded(work: Path, run: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """``(embeddings, labels)`` of ``split`` under run ``run``, trained and embedded once."""
    from clusterable.cli import main

    folder, out = work / run, work / f"{run}-{split}"
    if not (folder / "run.json").is_file():
        assert main(["train", *TRAIN_FLAGS, *RUNS[run], "--out", str(folder)]) == 0
    if not (out / "embeddings.npy").is_file():
        assert main(["embed", str(folder), "--split", split, "--out", str(out)]) == 0
    return np.load(out / "embeddings.npy"), np.load(out / "labels.npy")


def _pixels_pca(components: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """The test images' first principal components (fitted on the test pixels), and labels."""
    from clusterable.data import load_dataset

    test = load_dataset("fashion-mnist", split="test")
    pixels, labels = test.features()
    x = pixels.reshape(len(pixels), -1).astype(np.float64)
    x -= x.mean(axis=0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    return (x @ vt[:components].T).astype(np.float32), np.asarray(labels)


def embeddings(work: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The embeddings the spread is measured on, by name (see the module docstring)."""
    train_x, train_y = _embedded(work, "run-a", "train")
    rows = np.sort(np.random.default_rng(0).choice(len(train_y), CHOICE_ITEMS, replace=False))
    return {
        "choice: run A, 10,000 training items": (train_x[rows], train_y[rows]),
        "report: run B, 10,000 test items": _embedded(work, "run-b", "test"),
        "report: run A, 10,000 test items": _embedded(work, "run-a", "test"),
        "report: 32 PCs of the test pixels": _pixels_pca(),
    }


def spread(x: np.ndarray, y: np.ndarray, rule: dict | None, seeds: list[int]) -> dict:
    """NMI and Hungarian accuracy (in %) of each seed under ``rule`` (None: the shared rule), and
    the median seconds per evaluation."""
    from clusterable.evaluate import EvaluationOptions, evaluate_embeddings

    options = EvaluationOptions(cluster_kwargs=rule)
    scores, seconds = {"nmi": [], "accuracy": []}, []
    for seed in seeds:
        start = time.perf_counter()
        table = evaluate_embeddings(x, y, metrics=["nmi", "accuracy"], seed=seed, options=options)
        seconds.append(time.perf_counter() - start)
        for key in scores:
            scores[key].append(100 * table[key])
    return {**scores, "seconds": float(np.median(seconds)), "rule": table.partition.rule}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/kmeans-spread", help="runs and embeddings")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sets = embeddings(work)
    from clusterable.evaluate import evaluate_embeddings

    evaluate_embeddings(*sets[next(iter(sets))], metrics=["nmi"])  # warm-up, off the clock
    print("| embedding | rule | NMI min-max (spread) | accuracy min-max (spread) | s / eval |")
    print("|---|---|---|---|---|")
    for name, (x, y) in sets.items():
        for label, rule in (("old", OLD_RULE), ("shared", None)):
            got = spread(x, y, rule, args.seeds)
            cells = [
                f"{min(v):.2f}-{max(v):.2f} ({max(v) - min(v):.2f})"
                for v in (got["nmi"], got["accuracy"])
            ]
            print(
                f"| {name} | {label}: {got['rule']} | {' | '.join(cells)} | {got['seconds']:.2f} |"
            )


if __name__ == "__main__":
    main()
