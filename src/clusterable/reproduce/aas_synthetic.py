"""``aas-synthetic``: OPML Fig. 5, Authority Ascent Shift against k-means on a noisy 2-D set.

Dutta, Harandi and Sekhar, "Unsupervised Deep Metric Learning via Orthogonality based Probabilistic
Loss", IEEE TAI 2020, Section V-A and Fig. 5: 3 crescents + 3 Gaussians (900 points) and 300
uniform noise points; AAS scores NMI 80.9 / F 82.9, k-means (k = 6) 50.0 / 42.7.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clusterable.cluster import aas, kmeans
from clusterable.data import SyntheticSet, crescents_and_gaussians, labelled_mask
from clusterable.evaluate import nmi, pairwise_f1
from clusterable.plots import plot_partitions
from clusterable.reports import Claim, ExperimentReport, Row
from clusterable.reproduce.experiment import Budget, experiment

#: AAS settings reported, by name: the paper's two recommended ones (Section V-A, conclusion 3)
#: and the clustering engineer's k_graph = 100 variant (two thirds of a class; not a paper setting).
AAS_SETTINGS: dict[str, dict[str, Any]] = {
    "AAS, paper defaults (k_graph 50, eps 0.65, theta_min 0)": {
        "k_graph": 50,
        "eps": 0.65,
        "theta_min": 0.0,
    },
    "AAS, noise removal (k_graph 50, eps 0.9, theta_min 1)": {
        "k_graph": 50,
        "eps": 0.9,
        "theta_min": 1.0,
    },
    "AAS, noise removal (k_graph 50, eps 0.9, theta_min 5)": {
        "k_graph": 50,
        "eps": 0.9,
        "theta_min": 5.0,
    },
    "AAS, k_graph 100, eps 0.9, theta_min 1 (not a paper setting)": {
        "k_graph": 100,
        "eps": 0.9,
        "theta_min": 1.0,
    },
}
PAPER_DEFAULTS = next(iter(AAS_SETTINGS))
NOISE_REMOVAL = list(AAS_SETTINGS)[1]
KMEANS = "k-means (k = 6)"
#: The figure: ground truth, AAS and k-means on the first seed's data (OPML Fig. 5).
PLOT = "aas_vs_kmeans.png"
#: OPML Fig. 5's numbers (all 1,200 points scored, see ``partition_scores``).
PAPER = {
    KMEANS: {"NMI": 0.500, "F": 0.427},
    PAPER_DEFAULTS: {"NMI": 0.809, "F": 0.829},
}
METRICS = [
    "NMI",
    "F",
    "NMI (900 shape points)",
    "F (900 shape points)",
    "NMI (kept)",
    "F (kept)",
    "kept",
]
NOTES = [
    "The paper does not say which AAS setting produced Fig. 5; its numbers are put beside "
    "the paper defaults (k_graph 50, gamma 100, eps 0.65, theta_min 0).",
    "An earlier layout of ours (shapes 4 apart on a grid) let k-means separate all six "
    "shapes (NMI 72.9), unlike the paper's figure; there the paper defaults lost to "
    "k-means (67.2 / 56.8).",
]


def partition_scores(labels: np.ndarray, clusters: np.ndarray) -> dict[str, float]:
    """NMI and pairwise precision, recall and F of a clustering, scored two ways.

    ``NMI``, ``F``, ``precision``, ``recall``: every point, label -1 (ground-truth noise) one
    class and cluster -1 (AAS noise) one cluster, so that putting noise aside is rewarded where
    it is noise and penalised where it is not. (The library's ``nmi`` would count each -1 item as
    a singleton cluster, so -1 is renamed first.) ``NMI (kept)``, ``F (kept)``: only the points
    the method keeps (not -1), the scoring the OPML paper's Tables III-IV imply: there noise
    removal leaves precision unchanged and raises recall (79.7 / 48.7 -> 79.8 / 61.3), which
    neither one noise cluster (precision would drop) nor noise singletons (recall would drop)
    gives. ``kept``: the share of points kept.
    """
    kept = clusters >= 0
    renamed = np.where(kept, clusters, clusters.max() + 1)
    precision, recall, f1 = pairwise_f1(labels, renamed)
    scores = {"NMI": nmi(labels, renamed), "F": f1, "precision": precision, "recall": recall}
    if kept.any():
        scores["NMI (kept)"] = nmi(labels[kept], clusters[kept])
        scores["F (kept)"] = pairwise_f1(labels[kept], clusters[kept])[2]
    scores["kept"] = float(kept.mean())
    return scores


@dataclass
class Fig5Runs:
    """Every method's scores on each seed's data (OPML Fig. 5), in row order: k-means, then the
    AAS settings."""

    scores: dict[str, list[dict[str, float]]] = field(
        default_factory=lambda: {name: [] for name in [KMEANS, *AAS_SETTINGS]}
    )
    #: The number of clusters each AAS setting found, per seed.
    n_clusters: dict[str, list[int]] = field(
        default_factory=lambda: {name: [] for name in AAS_SETTINGS}
    )
    #: The share of the uniform noise points the noise-removal setting calls noise, per seed.
    noise_found: list[float] = field(default_factory=list)


def cluster_one_seed(seed: int, device: str) -> tuple[SyntheticSet, dict[str, np.ndarray]]:
    """One seed's noisy set and its partitions: k-means (k = 6, on ``device``), then every AAS
    setting."""
    data = crescents_and_gaussians(seed=seed)
    found = {KMEANS: kmeans(data.x, 6, seed=seed, device=device)}
    found |= {name: aas(data.x, **setting) for name, setting in AAS_SETTINGS.items()}
    return data, found


def scores_with_shapes(
    labels: np.ndarray, clusters: np.ndarray, shapes: np.ndarray
) -> dict[str, float]:
    """``partition_scores`` over all points, then NMI and F over the 900 shape points alone."""
    scores = partition_scores(labels, clusters)
    shape_scores = partition_scores(labels[shapes], clusters[shapes])
    scores |= {"NMI (900 shape points)": shape_scores["NMI"]}
    scores |= {"F (900 shape points)": shape_scores["F"]}
    return scores


def run_seeds(seeds: list[int], budget: Budget) -> Fig5Runs:
    """Cluster and score every seed's data; draw OPML Fig. 5 from the first seed's."""
    runs = Fig5Runs()
    for seed in seeds:
        data, found = cluster_one_seed(seed, budget.device)
        shapes = labelled_mask(data.labels)  # the 900 crescent and Gaussian points
        for name, clusters in found.items():
            runs.scores[name].append(scores_with_shapes(data.labels, clusters, shapes))
            if name in runs.n_clusters:
                runs.n_clusters[name].append(int(clusters.max()) + 1)
        runs.noise_found.append(float((found[NOISE_REMOVAL][~shapes] == -1).mean()))
        if seed == seeds[0]:
            plot_partitions(data.x, fig5_panels(data.labels, found), budget.folder / PLOT, size=3.6)
    return runs


def fig5_rows(runs: Fig5Runs) -> list[Row]:
    """One row per method, mean ± std over seeds, the paper's Fig. 5 numbers beside k-means and
    the paper defaults, each AAS setting's mean number of clusters as its note."""
    notes = {name: f"{np.mean(counts):.1f} clusters" for name, counts in runs.n_clusters.items()}
    return [
        Row.from_runs(name, method_runs, paper=PAPER.get(name), note=notes.get(name, ""))
        for name, method_runs in runs.scores.items()
    ]


def fig5_claims(rows: list[Row], noise_found: list[float], n_seeds: int) -> list[Claim]:
    """OPML Section V-A on Fig. 5: AAS beats k-means, reaches the paper's numbers, removes noise."""
    by_name = {row.method: row.ours for row in rows}
    km = by_name[KMEANS]
    best_paper_setting = max(
        (by_name[name] for name in list(AAS_SETTINGS)[:3]), key=lambda s: s["NMI"]
    )
    defaults = by_name[PAPER_DEFAULTS]
    return [
        Claim(
            "AAS (paper defaults) clusters the noisy set better than k-means in NMI and F",
            defaults["NMI"] > km["NMI"] and defaults["F"] > km["F"],
            f"NMI {100 * defaults['NMI']:.1f} vs {100 * km['NMI']:.1f}, "
            f"F {100 * defaults['F']:.1f} vs {100 * km['F']:.1f} (mean of {n_seeds} seeds)",
        ),
        Claim(
            "AAS reaches NMI 80.9 / F 82.9 on the set (all 1,200 points scored)",
            best_paper_setting["NMI"] >= 0.80 and best_paper_setting["F"] >= 0.80,
            f"best paper setting: NMI {100 * best_paper_setting['NMI']:.1f}, "
            f"F {100 * best_paper_setting['F']:.1f}",
        ),
        Claim(
            "AAS filters out the uniform noise",
            bool(np.mean(noise_found) >= 0.5),
            f"eps 0.9, theta_min 1 labels {100 * np.mean(noise_found):.0f} % of the noise "
            "points as noise; with theta_min 0 none is",
        ),
    ]


def fig5_report(
    budget: Budget, seeds: list[int], rows: list[Row], claims: list[Claim]
) -> ExperimentReport:
    """The report of OPML Fig. 5: the data, the scoring, the rows and claims, the figure."""
    report = ExperimentReport(
        name="aas-synthetic",
        title="AAS vs k-means on crescents, Gaussians and noise (OPML Fig. 5)",
        paper="Dutta, Harandi, Sekhar, IEEE TAI 2020, Section V-A, Fig. 5",
        setup=(
            "3 interleaved crescents + 3 Gaussians (150 points each) + 300 uniform noise points "
            "(`crescents_and_gaussians`; the paper gives no parameters: the layout was calibrated "
            "on k-means alone, to land near the paper's k-means score, never on AAS). AAS with "
            "gamma = 100 throughout. NMI, F, precision and recall score all 1,200 points, "
            "ground-truth noise as a seventh class and AAS noise as one cluster: the paper's "
            "k-means (k = 6, 'the number of classes') cannot leave noise out, and its 50.0 matches "
            "this scoring (on the 900 shape points alone k-means scores ~73), so we read the "
            "paper's numbers as over all points; '900 shape points' scores those only, "
            "'kept' the points AAS does not call noise (the scoring the paper's Tables III-IV "
            "imply on MNIST; see `partition_scores`). "
            f"Mean ± std over {len(seeds)} seeds of the data (k-means seeded alike)."
        ),
        metrics=METRICS,
        rows=rows,
        claims=claims,
        plots=[PLOT],
        notes=NOTES,
    )
    report.budget = f"{budget.mode} budget: seeds {seeds}; search: none (the paper's settings)"
    report.record = {"seeds": seeds}
    return report


@experiment("aas-synthetic")
def aas_synthetic(budget: Budget) -> ExperimentReport:
    """OPML Fig. 5: AAS (paper settings) against k-means (k = 6), NMI and F over seeds, scatters."""
    seeds = budget.seed_list(quick=2, default=10, full=30)
    runs = run_seeds(seeds, budget)
    rows = fig5_rows(runs)
    return fig5_report(budget, seeds, rows, fig5_claims(rows, runs.noise_found, len(seeds)))


def fig5_panels(labels: np.ndarray, found: dict[str, np.ndarray]) -> list[tuple[np.ndarray, str]]:
    """Ground truth, AAS (paper defaults and noise removal) and k-means with their scores, the
    panels of OPML Fig. 5."""
    titles = {
        PAPER_DEFAULTS: "AAS, paper defaults\n(k_graph 50, eps 0.65, theta_min 0)",
        NOISE_REMOVAL: "AAS, noise removal\n(k_graph 50, eps 0.9, theta_min 1)",
        KMEANS: "k-means (k = 6)\n",
    }
    panels = [(labels, "ground truth (noise grey)\n")]
    for name, title in titles.items():
        scores = partition_scores(labels, found[name])
        panels.append(
            (found[name], f"{title}\nNMI {100 * scores['NMI']:.1f}, F {100 * scores['F']:.1f}")
        )
    return panels
