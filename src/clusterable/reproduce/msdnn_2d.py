"""``msdnn-2d``: MsDNN Fig. 1, gradient descent of the MsDNN loss on free 2-D points.

Chauhan, Davoudi and Komeili, "Multi-scale Deep Nearest Neighbors", IJCNN 2021, Section IV-A and
Fig. 1: 500 points, two classes of two Gaussian sub-classes each, moved by gradient descent on the
loss itself (no network). With sigma = 1 the classes separate and the sub-classes stay; with
sigma = 25 the classes separate and the sub-classes merge. The paper gives no numbers and no
layout; we score sub-class NMI (k-means, k = 4, against the sub-classes) and leave-one-out 1-NN
class accuracy before and after.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from clusterable._threads import single_thread
from clusterable.data.synthetic import (
    SyntheticSet,
    interleaved_subclusters,
    two_class_subclusters,
)
from clusterable.evaluate import knn_accuracy
from clusterable.losses import MsDNNLoss
from clusterable.plots import plot_layouts
from clusterable.reports import Claim, ExperimentReport, Row
from clusterable.reproduce._shared import subclass_scores
from clusterable.reproduce.experiment import Budget, experiment

SIGMAS = (1.0, 25.0)  # the paper's small and large kernel scales
LEARNING_RATE = 10.0  # SGD on the mean loss; the losses' own Fig. 1 tests use the same
LAYOUTS: dict[str, Callable[..., SyntheticSet]] = {
    "side by side": two_class_subclusters,  # classes left/right, sub-classes 12 apart vertically
    "interleaved": interleaved_subclusters,  # sub-classes 0, 1, 0, 1 along a line, 6 apart
}
METRICS = [
    "sub-class NMI (before)",
    "sub-class NMI (after)",
    "1-NN accuracy (before)",
    "1-NN accuracy (after)",
]


def subclass_nmi(
    points: np.ndarray, subclasses: np.ndarray, seed: int, device: str = "auto"
) -> float:
    """NMI of k-means (k = 4, on ``device``) against the sub-classes: high while the sub-classes
    are apart."""
    return subclass_scores(points, subclasses, 4, seed, device)["nmi"]


def descend(points: np.ndarray, labels: np.ndarray, sigma: float, steps: int) -> np.ndarray:
    """Move the points themselves by SGD on the MsDNN loss (detached weights, Algorithm 1)."""
    free = torch.tensor(points, dtype=torch.float64, requires_grad=True)  # (n, 2)
    target = torch.as_tensor(labels)
    loss = MsDNNLoss(sigma=sigma)
    optimiser = torch.optim.SGD([free], lr=LEARNING_RATE)
    with single_thread():  # (n, n) with n <= 500
        for _ in range(steps):
            optimiser.zero_grad()
            loss(free, target).backward()
            optimiser.step()
    return free.detach().numpy()


def subclass_gap(points: np.ndarray, subclasses: np.ndarray) -> float:
    """Mean distance between the two sub-class centres of each class (0-1 and 2-3)."""
    centres = np.stack([points[subclasses == s].mean(0) for s in range(4)])
    return float(
        (np.linalg.norm(centres[0] - centres[1]) + np.linalg.norm(centres[2] - centres[3])) / 2
    )


@experiment("msdnn-2d")
def msdnn_2d(budget: Budget) -> ExperimentReport:
    """MsDNN Fig. 1 on two layouts and two point scales, sigma 1 and 25, over seeds."""
    seeds = budget.seed_list(quick=1, default=2, full=5)
    device = budget.device  # where the k-means and the 1-NN search run (the descent: the CPU)
    n_points = budget.pick(200, 500)
    steps = budget.pick(150, 300, 1000)
    # Scale 0.1 brings the margins to O(1) (in layout units they are ~100 and softplus(-r) has no
    # gradient); sigma is scaled with the points, so it is still 1 and 25 in layout units.
    scales = budget.pick((0.1,), (0.1, 1.0))
    runs: dict[str, list[dict[str, float]]] = {}
    gaps: dict[str, list[float]] = {}
    for layout, make in LAYOUTS.items():
        for scale in scales:
            for seed in seeds:
                data = make(n=n_points, seed=seed)
                start = scale * data.x
                before = {
                    "sub-class NMI (before)": subclass_nmi(start, data.subclasses, seed, device),
                    "1-NN accuracy (before)": knn_accuracy(start, data.labels, k=1, device=device),
                }
                moved = {}
                for sigma in SIGMAS:
                    points = descend(start, data.labels, sigma * scale, steps)
                    moved[sigma] = points
                    name = f"{layout}, scale {scale:g}, sigma {sigma:g}"
                    runs.setdefault(name, []).append(
                        before
                        | {
                            "sub-class NMI (after)": subclass_nmi(
                                points, data.subclasses, seed, device
                            ),
                            "1-NN accuracy (after)": knn_accuracy(
                                points, data.labels, k=1, device=device
                            ),
                        }
                    )
                    gaps.setdefault(name, []).append(
                        subclass_gap(points, data.subclasses) / subclass_gap(start, data.subclasses)
                    )
                if seed == seeds[0]:
                    stages = [(start, f"{layout}, scale {scale:g}: before")]
                    stages += [
                        (points, f"after, sigma {sigma:g}") for sigma, points in moved.items()
                    ]
                    plot_layouts(stages, data.subclasses, budget.folder / plot_name(layout, scale))

    rows = [
        Row.from_runs(
            name,
            name_runs,
            note=f"sub-class gap after/before {np.mean(gaps[name]):.2f}",
        )
        for name, name_runs in runs.items()
    ]
    ours = {row.method: row.ours for row in rows}
    small = [name for name in ours if name.endswith("sigma 1")]
    large = [name for name in ours if name.endswith("sigma 25")]
    merged = [name for name in large if ours[name]["sub-class NMI (after)"] <= 0.75]
    claims = [
        Claim(
            "sigma = 1: the classes separate and the sub-classes are kept",
            all(
                ours[n]["1-NN accuracy (after)"] >= 0.95 and ours[n]["sub-class NMI (after)"] >= 0.9
                for n in small
            ),
            "; ".join(
                f"{n}: NMI {100 * ours[n]['sub-class NMI (after)']:.0f}, "
                f"1-NN {100 * ours[n]['1-NN accuracy (after)']:.0f}"
                for n in small
            ),
        ),
        Claim(
            "sigma = 25: the classes separate and the sub-classes merge "
            "(sub-class NMI <= 75 after)",
            bool(merged),
            "; ".join(
                f"{n}: NMI {100 * ours[n]['sub-class NMI (after)']:.0f}, "
                f"1-NN {100 * ours[n]['1-NN accuracy (after)']:.0f}"
                for n in large
            ),
        ),
        Claim(
            "Weaker reading: sigma = 25 brings a class's sub-classes together and sigma = 1 "
            "does not (sub-class gap after/before < 0.5 and >= 1)",
            any(
                np.mean(gaps[n]) < 0.5 and np.mean(gaps[n.replace("sigma 25", "sigma 1")]) >= 1.0
                for n in large
            ),
            "; ".join(
                f"{n.removesuffix(', sigma 25')}: gap {np.mean(gaps[n]):.2f} (sigma 25) vs "
                f"{np.mean(gaps[n.replace('sigma 25', 'sigma 1')]):.2f} (sigma 1)"
                for n in large
            ),
        ),
    ]
    report = ExperimentReport(
        name="msdnn-2d",
        title="MsDNN on free 2-D points, small and large sigma (MsDNN Fig. 1)",
        paper="Chauhan, Davoudi, Komeili, IJCNN 2021, Section IV-A, Fig. 1",
        setup=(
            f"{n_points} points, two classes of two Gaussian sub-classes (std 1.5) each, in two "
            "layouts: 'side by side' (`two_class_subclusters`: classes 16 apart left/right, "
            "sub-classes 12 apart vertically; the classes start separated) and 'interleaved' "
            "(`interleaved_subclusters`: sub-classes of classes 0, 1, 0, 1 in a row 6 apart; "
            "the classes start mixed, our reading of the paper's 'the two classes become "
            "separated'). Points multiplied by the scale, sigma by the same factor (so sigma is "
            f"1 and 25 in layout units); {steps} steps of SGD (lr {LEARNING_RATE:g}) on the mean "
            "MsDNN loss with detached nearest-hit/miss probabilities (Algorithm 1), Euclidean "
            "kernel distances. Sub-class NMI: k-means (k = 4) against the 4 sub-classes; "
            f"1-NN accuracy: leave-one-out, classes. Mean over seeds {seeds}. The paper gives "
            "no numbers and no layout."
        ),
        metrics=METRICS,
        rows=rows,
        claims=claims,
        plots=[plot_name(layout, scale) for layout in LAYOUTS for scale in scales],
        notes=[
            "Sub-class gap: mean distance between the two sub-class centres of a class, after "
            "over before; merging would bring it towards 0.",
            "Why sigma = 25 does not merge the side-by-side layout: with near-uniform kernel "
            "weights the expected hit and miss of every point of a class are the class means, "
            "so the pull on a class is the same for all its points (a translation across the "
            "sub-class axis) and only the logistic weight sigmoid(-r_i) differs. In the "
            "interleaved layout that difference does the work: the sub-class lying among the "
            "other class has the lower margin, moves faster along the class axis and catches "
            "up with its sibling, until the loss saturates (r ~ a few units) and the two stop "
            "side by side, touching but still two groups to k-means.",
            "Tried before settling on this protocol (losses engineer and us; none was chosen for "
            "its result): SGD and Adam, lr 1-100, 300-400 steps, point scales 0.03-1, sigma "
            "25-1000, detached and differentiable weights, side-by-side, interleaved and XOR "
            "layouts; the sub-class NMI <= 75 criterion is the losses' own Fig. 1(c) test.",
        ],
    )
    report.budget = (
        f"{budget.mode} budget: {n_points} points, {steps} SGD steps, scales {list(scales)}, "
        f"seeds {seeds}; search: none (the paper's sigma = 1 and 25)"
    )
    report.record = {"seeds": seeds}
    return report


def plot_name(layout: str, scale: float) -> str:
    """The file of a layout's figure at one scale: before, after sigma = 1, after sigma = 25."""
    return f"{layout.replace(' ', '_')}_scale_{scale:g}.png"
