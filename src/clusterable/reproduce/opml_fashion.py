"""``opml-fashion``: the OPML paper's unsupervised Fashion-MNIST experiment and its ablations.

Dutta, Harandi, Sekhar, "Unsupervised Deep Metric Learning via Orthogonality based Probabilistic
Loss", IEEE TAI 2020, Sec. V-B (Tables V and IX) and Sec. V-C: OPML learned on pseudo-labels from
t-SNE + AAS, without orthogonality, without the weight function, and with k-means pseudo-labels.
Learn on the first 200 images per class of the training split plus distractors, evaluate on the
first 200 per class of the test split; raw pixels, l2-normalised; ``l = 128``, ``alpha = 45``, 30
RCGD iterations; NMI and pairwise F of k-means (k = 10) and Recall@1, 2, 4, 8 on the test
embeddings ``x L``.

Distractors: the paper adds the first 150 MNIST digits of each class with pixel noise. MNIST is not
available here, so scikit-learn's 8x8 digits upscaled to 28x28 with Gaussian pixel noise stand in
(:func:`clusterable.data.noisy_digit_distractors`, 150 per class).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from clusterable.data import first_per_class, load_dataset, noisy_digit_distractors
from clusterable.data import with_distractors as add_distractors
from clusterable.evaluate import Evaluation, EvaluationOptions, evaluate_embeddings
from clusterable.reports import Claim, ExperimentReport, Row
from clusterable.reproduce._shared import CLAIM_KMEANS, log
from clusterable.reproduce.experiment import Budget, experiment
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
RAW = "raw pixels (no learning)"


@dataclass
class Variant:
    """One row of the table: how pseudo-labels are made and which OPML switches are on."""

    name: str
    # Pseudo-labels: "aas" (the paper) or "kmeans" (k = 10, Sec. V-C).
    method: Literal["aas", "kmeans"] = "aas"
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
    device: str = "auto",
) -> dict[str, Evaluation]:
    """Every variant's test table (fractions in [0, 1]), plus the raw pixels as a baseline.

    Training labels are read only to count the classes for the k-means ablation (k = 10, as the
    paper sets k to the number of classes); nothing is tuned on the test split. The searches
    and k-means run on ``device`` (OPML itself: float64, on the CPU). What each
    variant learned (pseudo-classes, triplets, cost) goes to the ``clusterable.reproduce`` log.
    """
    train_x, train_y, test_x, test_y = fashion_protocol_data(
        root, seed, per_class, distractors_per_class
    )
    log.info(
        "opml-fashion: train %d Fashion-MNIST images + %d distractors, test %d images",
        int((train_y >= 0).sum()),
        int((train_y < 0).sum()),
        len(test_y),
    )
    claim = EvaluationOptions(cluster_kwargs=CLAIM_KMEANS)
    tables = {RAW: evaluate_embeddings(test_x, test_y, seed=seed, options=claim, device=device)}
    labels_of: dict[str, np.ndarray] = {}
    for variant in variants:
        start = time.perf_counter()
        if variant.method not in labels_of:
            k = len(np.unique(train_y[train_y >= 0])) if variant.method == "kmeans" else None
            labels_of[variant.method] = pseudo_labels(
                train_x, variant.method, seed=seed, n_clusters=k, device=device
            )
        labels = labels_of[variant.method]
        model = OPML(seed=seed, maxiter=maxiter, **variant.opml).fit(train_x, labels)
        tables[variant.name] = evaluate_embeddings(
            model.transform(test_x), test_y, seed=seed, options=claim, device=device
        )
        log.info(
            "opml-fashion: %s: %d pseudo-classes, %d noise; %d triplets; cost %.4f -> %.4f; "
            "mean m_i %.4f -> %.4f; mean w %.4f -> %.4f; %.1f s",
            variant.name,
            len(np.unique(labels[labels >= 0])),
            int((labels < 0).sum()),
            model.n_triplets_,
            model.cost_history_[0],
            model.cost_history_[1],
            model.mean_margin_term_[0],
            model.mean_margin_term_[1],
            model.mean_weight_[0],
            model.mean_weight_[1],
            time.perf_counter() - start,
        )
    return tables


@experiment("opml-fashion")
def opml_fashion(budget: Budget) -> ExperimentReport:
    """The OPML paper's Fashion-MNIST experiment and its ablations at ``budget``'s scale."""
    per_class = budget.pick(20, 200)
    distractors = budget.pick(10, 150)
    maxiter = budget.pick(2, 30)
    seeds = budget.seed_list(1, 1, 3)
    runs = [
        run_protocol(
            seed=seed,
            per_class=per_class,
            distractors_per_class=distractors,
            maxiter=maxiter,
            device=budget.device,
        )
        for seed in seeds
    ]
    paper = {name: {k: v / 100 for k, v in row.items()} for name, row in PAPER.items()}
    rows = [Row.from_runs(name, [run[name] for run in runs], paper.get(name)) for name in runs[0]]
    by_name = {row.method: row for row in rows}
    opml, raw = by_name["OPML"], by_name[RAW]
    no_orthogonality = by_name["OPML w/o orthogonality"]
    no_weight = by_name["OPML w/o weight function"]
    kmeans = by_name["OPML, k-means pseudo-labels"]

    def compare(a: Row, b: Row, metric: str) -> str:
        return f"{metric}: {100 * a.ours[metric]:.1f} vs {100 * b.ours[metric]:.1f}"

    claims = [
        Claim(
            "OPML improves on the raw features (NMI, F, R@1)",
            all(opml.ours[m] > raw.ours[m] for m in ("nmi", "f1", "recall@1")),
            "; ".join(compare(opml, raw, m) for m in ("nmi", "f1", "recall@1")),
        ),
        Claim(
            "orthogonality helps (OPML > OPML w/o orthogonality)",
            opml.ours["nmi"] > no_orthogonality.ours["nmi"],
            compare(opml, no_orthogonality, "nmi"),
        ),
        Claim(
            "the weight function helps (OPML > OPML w/o weight function)",
            opml.ours["nmi"] > no_weight.ours["nmi"],
            compare(opml, no_weight, "nmi") + " (the paper shows only convergence, Fig. 6)",
        ),
        Claim(
            "AAS pseudo-labels beat k-means pseudo-labels",
            opml.ours["nmi"] > kmeans.ours["nmi"],
            compare(opml, kmeans, "nmi"),
        ),
    ]
    report = ExperimentReport(
        name="opml-fashion",
        title="OPML on Fashion-MNIST with distractors, unsupervised",
        paper="Dutta, Harandi, Sekhar. Unsupervised Deep Metric Learning via Orthogonality based "
        "Probabilistic Loss. IEEE TAI 2020 — Tables V, IX; Sec. V-C",
        setup=(
            f"First {per_class} training images per class plus {10 * distractors} distractors "
            "(scikit-learn digits upscaled to 28x28 with Gaussian pixel noise: the paper's noisy "
            f"MNIST digits are not available here) to learn; first {per_class} test images per "
            f"class to evaluate; raw l2-normalised pixels; l = 128, alpha = 45 degrees, "
            f"{maxiter} Riemannian conjugate-gradient iterations (pymanopt) on Euclidean x "
            "Grassmann; pseudo-labels from openTSNE + AAS (k_graph 50, gamma 100, eps 0.65). "
            "NMI and F from k-means (k = 10) on the test embeddings. "
            + ("" if per_class == 200 else "Quick mode: a reduced subset, not the paper's sizes.")
        ),
        metrics=list(COLUMNS),
        rows=rows,
        claims=claims,
        notes=["No training label is used: labels only score the test embeddings."],
        budget=f"{budget.mode} budget: {per_class} images per class + {10 * distractors} "
        f"distractors, {maxiter} RCGD iterations, seeds {seeds}; search: none (the paper's "
        "settings)",
    )
    report.record = {"seeds": seeds}
    return report
