"""The OPML paper's Fashion-MNIST experiment (Sec. V-B, Tables V and IX, ablations of Sec. V-C).

Dutta, Harandi, Sekhar, "Unsupervised Deep Metric Learning via Orthogonality based Probabilistic
Loss", IEEE TAI 2020. Learn on the first 200 images per class of the training split plus
distractors, evaluate on the first 200 per class of the test split; raw pixels, l2-normalised;
``l = 128``, ``alpha = 45``, 30 RCGD iterations; NMI and pairwise F of k-means (k = 10) and
Recall@1, 2, 4, 8 on the test embeddings ``x L``.

Distractors: the paper adds the first 150 MNIST digits of each class with pixel noise. MNIST is not
available here, so scikit-learn's 8x8 digits upscaled to 28x28 with Gaussian pixel noise stand in
(:func:`clusterable.data.noisy_digit_distractors`, 150 per class).

Run: ``clusterable reproduce opml-fashion`` (:mod:`clusterable.reproduce.opml_fashion`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clusterable.data import first_per_class, load_dataset, noisy_digit_distractors
from clusterable.data import with_distractors as add_distractors
from clusterable.evaluate import evaluate_embeddings
from clusterable.unsupervised.deep import flat_features
from clusterable.unsupervised.opml import OPML
from clusterable.unsupervised.pseudo_labels import pseudo_labels

#: The paper's Fashion-MNIST row of OPML (Tables V and IX), in percent.
PAPER = {
    "OPML": {"nmi": 63.9, "f1": 49.7, "recall@1": 78.0, "recall@2": 86.5, "recall@4": 91.6,
             "recall@8": 95.7},
    "OPML w/o orthogonality": {"nmi": 54.8, "f1": 42.5, "recall@1": 76.6, "recall@2": 84.6,
                               "recall@4": 91.7, "recall@8": 95.3},
}  # fmt: skip
COLUMNS = ("nmi", "f1", "recall@1", "recall@2", "recall@4", "recall@8")


@dataclass
class Variant:
    """One row of the table: how pseudo-labels are made and which OPML switches are on."""

    name: str
    method: str = "aas"  # pseudo-labels: "aas" (the paper) or "kmeans" (k = 10, Sec. V-C)
    opml: dict[str, Any] = field(default_factory=dict)  # OPML keyword overrides


VARIANTS = (
    Variant("OPML"),
    Variant("OPML w/o orthogonality", opml={"orthogonal": False}),
    Variant("OPML w/o weight function", opml={"weighted": False}),
    Variant("OPML, k-means pseudo-labels", method="kmeans"),
)


def fashion_protocol_data(
    root: str | None = None, seed: int = 0, per_class: int = 200, distractors_per_class: int = 150
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Training features (``10 * per_class`` images + ``10 * distractors_per_class`` distractors,
    784), their labels (-1: distractor), test features (``10 * per_class``) and labels; every row
    l2-normalised. The paper: 200 and 150."""
    train = first_per_class(load_dataset("fashion-mnist", root=root, split="train"), per_class)
    distractors = noisy_digit_distractors(n_per_class=distractors_per_class, seed=seed)
    train = add_distractors(train, distractors)
    test = first_per_class(load_dataset("fashion-mnist", root=root, split="test"), per_class)
    return flat_features(train), train.labels, flat_features(test), test.labels


def run_protocol(
    root: str | None = None,
    seed: int = 0,
    variants: tuple[Variant, ...] = VARIANTS,
    per_class: int = 200,
    distractors_per_class: int = 150,
    maxiter: int = 30,
) -> dict[str, dict[str, float]]:
    """Every variant's test table (fractions in [0, 1]), plus the raw pixels as a baseline.

    Training labels are read only to count the classes for the k-means ablation (k = 10, as the
    paper sets k to the number of classes); nothing is tuned on the test split.
    """
    train_x, train_y, test_x, test_y = fashion_protocol_data(
        root, seed, per_class, distractors_per_class
    )
    print(
        f"train: {int((train_y >= 0).sum())} Fashion-MNIST images + {int((train_y < 0).sum())} "
        "distractors (scikit-learn digits upscaled to 28x28 with Gaussian pixel noise, "
        f"{distractors_per_class} per class; the paper used noisy MNIST digits, not available here)"
    )
    print(f"test: {len(test_y)} Fashion-MNIST images, raw pixels l2-normalised")
    tables = {"raw pixels (no learning)": evaluate_embeddings(test_x, test_y, seed=seed)}
    labels_of: dict[str, np.ndarray] = {}
    for variant in variants:
        start = time.perf_counter()
        if variant.method not in labels_of:
            k = len(np.unique(train_y[train_y >= 0])) if variant.method == "kmeans" else None
            labels_of[variant.method] = pseudo_labels(
                train_x, variant.method, seed=seed, n_clusters=k
            )
        labels = labels_of[variant.method]
        model = OPML(seed=seed, maxiter=maxiter, **variant.opml).fit(train_x, labels)
        tables[variant.name] = evaluate_embeddings(model.transform(test_x), test_y, seed=seed)
        print(
            f"{variant.name}: {len(np.unique(labels[labels >= 0]))} pseudo-classes, "
            f"{int((labels < 0).sum())} noise; {model.n_triplets_} triplets; cost "
            f"{model.cost_history_[0]:.4f} -> {model.cost_history_[1]:.4f}; mean m_i "
            f"{model.mean_margin_term_[0]:.4f} -> {model.mean_margin_term_[1]:.4f}; mean w "
            f"{model.mean_weight_[0]:.4f} -> {model.mean_weight_[1]:.4f}; "
            f"{time.perf_counter() - start:.1f} s"
        )
    return tables
