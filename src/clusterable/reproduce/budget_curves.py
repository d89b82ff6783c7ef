"""``budget-curves``: whether the paper claims that do not hold here close their gap as the
training budget grows.

Three claims do not hold at the CPU budgets of ``zero-shot-fashion`` and ``msdnn-subclass``:
lifted structure >= triplet and contrastive (Song et al., CVPR 2016, Figs. 5-6), DSCL with the
spectral partition of Algorithm 2 >= without it (Law et al., ICML 2017, Tables 1-3), and MsDNN-AE
above MsDNN (Chauhan et al., IJCNN 2021, Table I). This experiment runs each comparison at three
budgets, epochs and training-set size growing together, with several seeds, and reports the gap
``A - B`` on each claim's metrics (the claim holds where the gap is >= 0): if the papers' claims
only need more training, the gap moves towards and past zero as the budget grows.

Both protocols are those of their reproductions: zero-shot Fashion-MNIST (train on classes 0-4,
retrieve and cluster the unseen 5-9, scored by
:func:`~clusterable.reproduce.zero_shot_fashion.zero_shot_scores`) and MsDNN's sub-class protocol
(train on coarse labels 0-4 vs 5-9, k-means with k = 10 on the training embedding against the fine
classes). The settings of every method are theirs; none is tuned here.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

from clusterable._threads import single_thread
from clusterable.data import (
    MSDNN_COARSE,
    LabelledDataset,
    class_split,
    coarse_labels,
    first_per_class,
    load_dataset,
)
from clusterable.plots import plot_budget_gaps
from clusterable.recipe import RunSpec
from clusterable.reports import Claim, ExperimentReport, Row
from clusterable.reproduce._shared import (
    Method,
    backbone,
    describe_backbone,
    subclass_scores,
    train_and_embed,
)
from clusterable.reproduce.experiment import Budget, experiment
from clusterable.reproduce.msdnn_subclass import training_config as subclass_config
from clusterable.reproduce.zero_shot_fashion import (
    DSCL_DIM,
    EMBEDDING_DIM,
    SEEN,
    UNSEEN,
    zero_shot_scores,
)
from clusterable.reproduce.zero_shot_fashion import training_config as zero_shot_config
from clusterable.train import TrainConfig

#: MsDNN's sigma: the value msdnn-subclass's held-out selection (k-NN accuracy on coarse labels,
#: never the fine labels) chose at its default budget, 2^-3 out of 2^-6, 2^-3, 2^0, 2^3.
MSDNN_SIGMA = 2.0**-3
#: MsDNN-AE's lambda, the weight of the reconstruction term: msdnn-subclass's default value.
RECONSTRUCTION_WEIGHT = 1.0
SUBCLASSES = 10  # k of k-means in the sub-class protocol: the fine Fashion-MNIST classes
MSDNN_DIM = 128  # MsDNN's embedding width for (F-)MNIST


@dataclass(frozen=True)
class BudgetPoint:
    """One point of a curve: epochs and training items grow together."""

    epochs: int
    train_items: int | None  # training images of each protocol (None: its whole training split)

    @property
    def label(self) -> str:
        """The point in words: "10 ep, 6k items"."""
        items = "all" if self.train_items is None else f"{self.train_items / 1000:g}k"
        return f"{self.epochs} ep, {items} items"


@dataclass(frozen=True)
class Comparison:
    """One claim as a difference: scores of ``a`` minus scores of ``b`` on ``metrics``.

    ``a`` and ``b`` are keys of the per-seed score table (``"lifted"``, ``"DSCL (d=5) with SC"``,
    ``"MsDNN-AE"``...). The claim holds where the gap is >= 0 on every metric (``strict``: > 0).
    """

    name: str
    claim: str
    a: str
    b: str
    metrics: tuple[str, ...]
    strict: bool = False


COMPARISONS: tuple[Comparison, ...] = (
    Comparison(
        "lifted - triplet",
        "Batch-level lifted >= triplet in NMI and R@1 (lifted Figs. 5-6)",
        "lifted",
        "triplet (semi-hard)",
        ("nmi", "recall@1"),
    ),
    Comparison(
        "lifted - contrastive",
        "Batch-level lifted >= contrastive in NMI and R@1 (lifted Figs. 5-6)",
        "lifted",
        "contrastive",
        ("nmi", "recall@1"),
    ),
    Comparison(
        "DSCL (d=5): with SC - without SC",
        "DSCL with SC >= without SC in NMI and R@1 (DSCL Tables 1-3), the paper's d = 5 classes",
        "DSCL (d=5) with SC",
        "DSCL (d=5) without SC",
        ("nmi", "recall@1"),
    ),
    Comparison(
        "DSCL (d=64): with SC - without SC",
        "DSCL with SC >= without SC in NMI and R@1 (DSCL Tables 1-3), d = 64",
        "DSCL (d=64) with SC",
        "DSCL (d=64) without SC",
        ("nmi", "recall@1"),
    ),
    Comparison(
        "MsDNN-AE - MsDNN",
        "The autoencoder term helps (MsDNN-AE above MsDNN in NMI and ACC, MsDNN Table I)",
        "MsDNN-AE",
        "MsDNN",
        ("nmi", "accuracy"),
        strict=True,
    ),
)
METRICS = ["nmi", "recall@1", "accuracy"]  # the table's columns: every comparison's metrics
PLOT = "budget_curves.png"
SCORES = "scores.json"  # every seed's scores of every method, the gaps' raw material


@dataclass(frozen=True)
class _Scale:
    """The budgets one mode runs."""

    points: tuple[BudgetPoint, ...]
    test_per_class: int | None  # unseen test images per class of the zero-shot protocol


def _scale(budget: Budget) -> _Scale:
    return budget.pick(
        quick=_Scale((BudgetPoint(1, 500), BudgetPoint(2, 1000)), 60),
        # Two cores shared with other work: about 15 CPU-minutes for 3 budgets x 3 seeds.
        default=_Scale((BudgetPoint(2, 1000), BudgetPoint(4, 2500), BudgetPoint(8, 5000)), 400),
        full=_Scale(
            (BudgetPoint(10, 10_000), BudgetPoint(30, 30_000), BudgetPoint(100, None)), None
        ),
    )


# Zero-shot methods as zero-shot-fashion trains them: (score key, loss, its arguments, embedding
# width, l2-normalised output, also scored with SC).
_ZERO_SHOT_METHODS: tuple[tuple[str, str, dict, int, bool, bool], ...] = (
    ("lifted", "lifted", {"margin": 1.0}, EMBEDDING_DIM, False, False),
    ("contrastive", "contrastive", {"margin": 1.0}, EMBEDDING_DIM, False, False),
    # FaceNet semi-hard triplets live on the unit sphere.
    (
        "triplet (semi-hard)",
        "triplet",
        {"margin": 0.2, "mining": "semi-hard"},
        EMBEDDING_DIM,
        True,
        False,
    ),
    (f"DSCL (d={DSCL_DIM})", "spectral", {}, DSCL_DIM, False, True),
    (f"DSCL (d={EMBEDDING_DIM})", "spectral", {}, EMBEDDING_DIM, False, True),
)


def trained_embeddings(
    spec: RunSpec, config: TrainConfig, train: LabelledDataset, eval_sets: list[LabelledDataset]
) -> list[np.ndarray]:
    """Train ``spec`` on ``train`` (seeded by ``config.seed``: one seed, one initialisation for
    every method) and embed ``eval_sets``."""
    return train_and_embed(Method(spec.loss, spec), train, eval_sets, config)


def gaps(scores: dict[str, dict[str, float]], comparison: Comparison) -> dict[str, float]:
    """``a - b`` of one seed's scores on each metric of ``comparison``."""
    a, b = scores[comparison.a], scores[comparison.b]
    return {m: a[m] - b[m] for m in comparison.metrics}


@dataclass
class _Data:
    """Fashion-MNIST as both protocols read it, loaded once."""

    zero_shot_train: LabelledDataset  # seen classes 0-4, relabelled 0-4
    zero_shot_test: LabelledDataset  # unseen classes 5-9 of the test split
    subclass_train: LabelledDataset  # fine labels, coarsened per budget point


def _load(scale: _Scale) -> _Data:
    train, test = (load_dataset("fashion-mnist", split=s) for s in ("train", "test"))
    unseen = class_split(test, UNSEEN)
    if scale.test_per_class is not None:
        unseen = first_per_class(unseen, scale.test_per_class)
    return _Data(class_split(train, SEEN, relabel=True), unseen, train)


def _first_items(ds: LabelledDataset, items: int | None) -> LabelledDataset:
    """The first ``items / classes`` images of each class (nested: a larger budget holds a
    smaller one's images)."""
    return ds if items is None else first_per_class(ds, items // ds.num_classes)


def _zero_shot_round(
    data: _Data, point: BudgetPoint, seed: int, model: str, model_args: dict, device: str = "auto"
) -> dict[str, dict[str, float]]:
    """Scores of every zero-shot method at one budget point and seed (zero-shot-fashion's run),
    on ``device``."""
    train = _first_items(data.zero_shot_train, point.train_items)
    test = data.zero_shot_test
    config = zero_shot_config(point.epochs, seed, device)
    scores = {}
    for key, loss, loss_args, dim, normalize, with_sc in _ZERO_SHOT_METHODS:
        spec = RunSpec(
            data="fashion-mnist",
            model=model,
            model_args=model_args,
            loss=loss,
            loss_args=loss_args,
            embedding_dim=dim,
            normalize=normalize,
        )
        (embedding,) = trained_embeddings(spec, config, train, [test])
        variants = {" with SC": True, " without SC": False} if with_sc else {"": False}
        for suffix, spectral in variants.items():
            scores[key + suffix] = zero_shot_scores(
                embedding, test.labels, spectral=spectral, seed=seed, device=device
            )
    return scores


def _subclass_round(
    data: _Data, point: BudgetPoint, seed: int, model: str, model_args: dict, device: str = "auto"
) -> dict[str, dict[str, float]]:
    """Scores of MsDNN and MsDNN-AE at one budget point and seed (msdnn-subclass's run), on
    ``device``."""
    train = coarse_labels(_first_items(data.subclass_train, point.train_items), MSDNN_COARSE)
    config = subclass_config(point.epochs, seed, device)
    msdnn = RunSpec(
        data="fashion-mnist",
        labels="coarse",
        model=model,
        model_args=model_args,
        loss="msdnn",
        loss_args={"sigma": MSDNN_SIGMA},
        embedding_dim=MSDNN_DIM,
    )
    # MsDNN-AE = MsDNN plus a mirrored decoder, its reconstruction error weighted by lambda.
    weighted = {**msdnn.loss_args, "reconstruction_weight": RECONSTRUCTION_WEIGHT}
    autoencoder = replace(msdnn, autoencoder=True, loss_args=weighted)
    scores = {}
    for key, spec in (("MsDNN", msdnn), ("MsDNN-AE", autoencoder)):
        (embedding,) = trained_embeddings(spec, config, train, [train])
        scores[key] = subclass_scores(embedding, train.fine_labels, SUBCLASSES, seed, device)
    return scores


@experiment("budget-curves")
def budget_curves(budget: Budget) -> ExperimentReport:
    """Each failing claim's gap at growing budgets, over seeds; see the module docstring."""
    scale = _scale(budget)
    seeds = budget.seed_list(quick=1, default=3, full=5)
    network = backbone(budget)
    data = _load(scale)
    # scores[point][seed][method][metric]
    scores: list[list[dict[str, dict[str, float]]]] = []
    with single_thread():
        for point in scale.points:
            scores.append([])
            for seed in seeds:
                start = time.perf_counter()
                round_scores = _zero_shot_round(data, point, seed, **network, device=budget.device)
                round_scores |= _subclass_round(data, point, seed, **network, device=budget.device)
                scores[-1].append(round_scores)
                print(
                    f"budget-curves: {point.label}, seed {seed}: "
                    f"{time.perf_counter() - start:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
    curves = {
        c.name: [[gaps(by_seed, c) for by_seed in at_point] for at_point in scores]
        for c in COMPARISONS
    }
    (budget.folder / SCORES).write_text(
        json.dumps(
            {
                "points": [asdict(p) for p in scale.points],
                "seeds": seeds,
                "scores": scores,
                "gaps": curves,
            },
            indent=2,
        )
    )
    plot_budget_gaps(curves, [point.label for point in scale.points], budget.folder / PLOT)
    rows = [
        Row.from_runs(f"{name}, {point.label}", runs)
        for name, per_point in curves.items()
        for point, runs in zip(scale.points, per_point, strict=True)
    ]
    report = ExperimentReport(
        name="budget-curves",
        title="Budget curves of the claims that do not hold at the CPU budgets",
        paper=(
            "Song et al. CVPR 2016 (lifted structure); Law, Urtasun, Zemel. ICML 2017 (DSCL); "
            "Chauhan, Davoudi, Komeili. IJCNN 2021 (MsDNN)."
        ),
        setup=_setup(scale, describe_backbone(RunSpec(**network)), data, seeds),
        metrics=METRICS,
        rows=rows,
        claims=[_verdict(c, curves[c.name], scale.points) for c in COMPARISONS],
        plots=[PLOT],
        budget=(
            f"{budget.mode} budget: each claim at every point "
            f"({'; '.join(p.label for p in scale.points)}), judged at the largest; seeds "
            f"{seeds}; search: none (msdnn-subclass's held-out sigma and lambda)"
        ),
        notes=[
            "Table: gap A - B in percentage points (mean ± std over seeds); a claim holds where "
            "its gap is >= 0. Every seed's scores of both methods are in "
            f"`{SCORES}` beside this report.",
            "One seed gives every method the same initial weights (the recipe seeds the build), "
            "so each gap is a paired difference.",
        ],
    )
    report.record = {"seeds": seeds}
    return report


def _mean_std(runs: list[dict[str, float]], metric: str) -> tuple[float, float]:
    values = [run[metric] for run in runs]
    return float(np.mean(values)), float(np.std(values))


def _verdict(
    comparison: Comparison, per_point: list[list[dict[str, float]]], points: tuple[BudgetPoint, ...]
) -> Claim:
    """The claim judged at the largest budget, with the gap at every budget as evidence."""
    largest = [_mean_std(per_point[-1], m)[0] for m in comparison.metrics]
    holds = all(g > 0 if comparison.strict else g >= 0 for g in largest)
    evidence = []
    for metric in comparison.metrics:
        cells = []
        for point, runs in zip(points, per_point, strict=True):
            mean, std = _mean_std(runs, metric)
            cells.append(f"{100 * mean:+.2f} ± {100 * std:.2f} ({point.label})")
        evidence.append(f"{metric} gap: " + ", ".join(cells))
    return Claim(
        f"{comparison.claim}, at the largest budget ({points[-1].label})",
        holds,
        "; ".join(evidence) + " (points, mean ± std over seeds)",
    )


def _setup(scale: _Scale, backbone: str, data: _Data, seeds: list[int]) -> str:
    points = "; ".join(
        f"{p.epochs} epochs on "
        + (
            "the whole training split"
            if p.train_items is None
            else f"{p.train_items:,} training images"
        )
        for p in scale.points
    )
    return (
        f"Budgets (epochs and training images growing together): {points}; seeds {seeds} at "
        "each, the same seeds at every budget. Training images are the first of each class "
        "(zero-shot: the 5 seen classes; sub-class: the 10 fine classes), so a larger budget "
        f"holds a smaller one's. Backbone {backbone} for every method. Zero-shot protocol "
        "(zero-shot-fashion): train on Fashion-MNIST classes 0-4, score on "
        f"{len(data.zero_shot_test):,} test images of the unseen classes 5-9; lifted and "
        "contrastive margin 1.0, triplet semi-hard margin 0.2 on the unit sphere, DSCL at "
        f"d = {DSCL_DIM} and d = {EMBEDDING_DIM} scored with and without SC (Algorithm 2 on "
        "the same embedding); class-balanced batches of 125, Adam 1e-3. Sub-class protocol "
        "(msdnn-subclass): coarse labels 0-4 vs 5-9, k-means (k = 10) on the training "
        f"embedding against the fine classes; MsDNN sigma = {MSDNN_SIGMA:g} (msdnn-subclass's "
        "held-out choice), MsDNN-AE the same plus the decoder with lambda = "
        f"{RECONSTRUCTION_WEIGHT:g}; random batches of 128, Adam 1e-3. Nothing is tuned per "
        "budget."
    )
