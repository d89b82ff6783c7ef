"""``opml-fashion``: the OPML paper's unsupervised Fashion-MNIST experiment and its ablations.

Dutta, Harandi, Sekhar, IEEE TAI 2020, Sec. V-B (Tables V and IX) and Sec. V-C: OPML learned on
pseudo-labels from t-SNE + AAS, without orthogonality, without the weight function, and with
k-means pseudo-labels; NMI, pairwise F and Recall@K on the test images
(:mod:`clusterable.unsupervised.protocol`).
"""

from __future__ import annotations

from clusterable.reproduce.experiment import Budget, experiment
from clusterable.reproduce.report import Claim, ExperimentReport, Row
from clusterable.unsupervised.protocol import COLUMNS, PAPER, run_protocol

RAW = "raw pixels (no learning)"


@experiment("opml-fashion")
def opml_fashion(budget: Budget) -> ExperimentReport:
    per_class = budget.pick(20, 200)
    distractors = budget.pick(10, 150)
    maxiter = budget.pick(2, 30)
    seeds = budget.seed_list(1, 1, 3)
    runs = [
        run_protocol(
            seed=seed, per_class=per_class, distractors_per_class=distractors, maxiter=maxiter
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
    )
    report.record = {"seeds": seeds}
    return report
