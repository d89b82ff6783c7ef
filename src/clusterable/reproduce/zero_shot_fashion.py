"""``zero-shot-fashion``: the lifted-structure / DSCL zero-shot protocol in miniature.

Song, Xiang, Jegelka, Savarese. "Deep Metric Learning via Lifted Structured Feature Embedding",
CVPR 2016 (Sec. 6-7: train on the first half of the classes, cluster and retrieve the unseen other
half; F1, NMI, Recall@K); Law, Urtasun, Zemel. "Deep Spectral Clustering Learning", ICML 2017
(Tables 1-3: NMI and Recall@K with and without the spectral partition of Algorithm 2).

Their CUB-200-2011, CARS196, Stanford Online Products and GoogLeNet are not on this machine: here a
small CNN is trained on Fashion-MNIST classes 0-4 (training split) and evaluated on the unseen
classes 5-9 (test split).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clusterable._threads import single_thread
from clusterable.cluster import spectral_embedding
from clusterable.data import LabelledDataset, class_split, first_per_class, load_dataset
from clusterable.evaluate import EvaluationOptions, evaluate_embeddings
from clusterable.plots import plot_tsne_maps
from clusterable.recipe import RunSpec
from clusterable.reports import Claim, ExperimentReport, Row
from clusterable.reproduce._shared import (
    CLAIM_KMEANS,
    Method,
    Scale,
    Search,
    backbone,
    describe_backbone,
    train_and_embed,
    tune_method,
)
from clusterable.reproduce.experiment import Budget, experiment
from clusterable.train import TrainConfig
from clusterable.tune import parse_parameter
from clusterable.tune.study import values_in_words

SEEN, UNSEEN = range(0, 5), range(5, 10)
METRICS = ["recall@1", "recall@2", "recall@4", "recall@8", "map@r", "nmi", "f1"]
#: The embedding width of every method but DSCL at d = k: the smallest size of the lifted paper.
EMBEDDING_DIM = 64
#: DSCL sets d to the number of training classes on CUB and Cars (Sec. 4.1).
DSCL_DIM = len(SEEN)
ITEMS_PER_CLASS = 25  # class-balanced batches: all 5 seen classes x 25 images = 125
#: What the search maximises on the held-out classes (the Reality Check's MAP@R).
SEARCH_METRIC = "map@r"
#: Searched for every method (Musgrave et al. 2020 tune each method before comparing).
LEARNING_RATES = "lr=log:0.0001:0.01"
#: Margins searched for the pair-based losses: raw embeddings, and the unit sphere (triplet).
MARGINS = {"raw": "margin=float:0.1:2.0", "sphere": "margin=float:0.05:0.5"}


def _scale(budget: Budget) -> Scale:
    """Quick: the fixed settings, no search. Default and full: each method's learning rate and
    margin tuned by class-disjoint cross-validation on the seen classes before the comparison."""
    # Two class-disjoint folds of the five seen classes: each fold holds out 2-3 whole classes,
    # so retrieval among the held-out classes is scored (one held-out class would be trivial).
    return budget.pick(
        quick=Scale(100, 60, 1, tsne_items=200),
        default=Scale(
            1000,
            None,
            4,
            tsne_items=2000,
            search=Search(
                epochs=2, fit_per_class=300, folds=2, trials=12, protocol="class-disjoint"
            ),
        ),
        full=Scale(
            None,
            None,
            40,
            tsne_items=5000,
            search=Search(
                epochs=20, fit_per_class=None, folds=2, trials=30, protocol="class-disjoint"
            ),
        ),
    )


def _method(
    label: str, loss: str, loss_args: dict[str, Any], dim: int, budget: Budget, **settings: Any
) -> Method:
    spec = RunSpec(
        data="fashion-mnist",
        loss=loss,
        loss_args=loss_args,
        embedding_dim=dim,
        **backbone(budget),
        **settings,
    )
    return Method(label, spec)


def _methods(budget: Budget) -> list[tuple[Method, bool, list[str]]]:
    """Each method, whether it is also scored with the spectral partition (Algorithm 2), and the
    ``--param`` texts of what a search tunes for it."""
    return [
        (_method(f"DSCL (d={DSCL_DIM})", "spectral", {}, DSCL_DIM, budget), True, [LEARNING_RATES]),
        (
            _method(f"DSCL (d={EMBEDDING_DIM})", "spectral", {}, EMBEDDING_DIM, budget),
            True,
            [LEARNING_RATES],
        ),
        (
            _method("lifted", "lifted", {"margin": 1.0}, EMBEDDING_DIM, budget),
            False,
            [LEARNING_RATES, MARGINS["raw"]],
        ),
        (
            _method("contrastive", "contrastive", {"margin": 1.0}, EMBEDDING_DIM, budget),
            False,
            [LEARNING_RATES, MARGINS["raw"]],
        ),
        # FaceNet semi-hard triplets live on the unit sphere: the model's output is normalised.
        (
            _method(
                "triplet (semi-hard)",
                "triplet",
                {"margin": 0.2, "mining": "semi-hard"},
                EMBEDDING_DIM,
                budget,
                normalize=True,
            ),
            False,
            [LEARNING_RATES, MARGINS["sphere"]],
        ),
        # DSCL's "softmax regression" baseline, also scored with and without SC there.
        (
            _method("cross-entropy", "cross-entropy", {}, EMBEDDING_DIM, budget),
            True,
            [LEARNING_RATES],
        ),
    ]


def training_config(epochs: int, seed: int, device: str = "auto") -> TrainConfig:
    """Training of every method of the protocol: class-balanced batches of the seen classes,
    Adam 1e-3, no validation during training; on ``device``."""
    return TrainConfig(
        epochs=epochs,
        batch_size=ITEMS_PER_CLASS * len(SEEN),
        sampler="class-balanced",
        items_per_class=ITEMS_PER_CLASS,
        lr=1e-3,
        eval_every=0,
        progress=False,
        seed=seed,
        device=device,
    )


def tuned_methods(
    budget: Budget, scale: Scale, train: LabelledDataset
) -> tuple[list[tuple[Method, bool]], list[str]]:
    """Every method with what the budget's search chose (as they are without one), and a note
    per search. The search folds the seen training classes only: the unseen test classes take
    no part in it."""
    chosen, notes = [], []
    for method, with_spectral, space in _methods(budget):
        search = scale.search
        if search is not None:
            parameters = [parse_parameter(text) for text in space]
            slug = method.label.lower().replace(" ", "-").replace("(", "").replace(")", "")
            method, result = tune_method(
                method,
                parameters,
                search,
                train,
                training_config(search.epochs, seed=0, device=budget.device),
                SEARCH_METRIC,
                budget.folder / "search" / slug.replace("=", ""),
            )
            notes.append(
                f"{method.label}: {values_in_words(result.best_values)} ({SEARCH_METRIC} "
                f"{100 * result.best_score:.2f} % on held-out classes, {search.folds} "
                f"class-disjoint folds, {result.tally()}; searched "
                f"{', '.join(p.describe() for p in parameters)})."
            )
        chosen.append((method, with_spectral))
    return chosen, notes


def _describe(method: Method) -> str:
    """The tuned values of a row (nothing when the budget has no search)."""
    values = [f"lr={method.train_args['lr']:.3g}"] if "lr" in method.train_args else []
    if "lr" in method.train_args and "margin" in method.spec.loss_args:
        values.append(f"margin={method.spec.loss_args['margin']:.3g}")
    return ", ".join(values)


def zero_shot_scores(
    embedding: np.ndarray, labels: np.ndarray, *, spectral: bool, seed: int, device: str = "auto"
) -> dict[str, float]:
    """Retrieval and clustering scores of an unseen-class embedding, DSCL Sec. 4.2.

    Without SC: l2-normalise, then k-means (k = number of classes) and retrieval on the normalised
    features. With SC (Algorithm 2): mean-centre the normalised features, keep the k leading left
    singular vectors, row-normalised (``T``), and run k-means and retrieval on ``T`` — k-means on
    ``T`` is ``clusterable.cluster.spectral(x, k, seed, rank=k)``. Retrieval on ``T`` is our
    reading of DSCL's Tables 1-3, whose Recall@K differs between the two rows of one model.

    Algorithm 2 keeps ``rank(M_t)`` vectors; with the paper's d = k that is k. With d = 64 it
    would whiten 64 directions for 5 classes, giving noise directions the weight of the class
    directions (NMI 11 % against 44 % without SC in a one-epoch trial), so SC keeps k here:
    Algorithm 2 whenever d = k, the Ng-Jordan-Weiss choice otherwise. The search and k-means run
    on ``device``.
    """
    features = embedding / np.linalg.norm(embedding, axis=1, keepdims=True).clip(min=1e-12)
    if spectral:
        features = spectral_embedding(features, rank=len(np.unique(labels)))
    claim = EvaluationOptions(cluster_kwargs=CLAIM_KMEANS)
    table = evaluate_embeddings(
        features, labels, clustering="kmeans", seed=seed, options=claim, device=device
    )
    return {m: float(table[m]) for m in METRICS}


def _verdicts(rows: dict[str, Row]) -> list[Claim]:
    def get(row: str, metric: str) -> float:
        return rows[row].ours[metric]

    def pair(row: str) -> str:
        return f"{row}: NMI {rows[row].cell('nmi')}, R@1 {rows[row].cell('recall@1')}"

    def at_least(better: str, worse: tuple[str, ...]) -> bool:
        return all(get(better, m) >= get(w, m) for w in worse for m in ("nmi", "recall@1"))

    claims = []
    for dim in (DSCL_DIM, EMBEDDING_DIM):
        with_sc, without_sc = f"DSCL (d={dim}) with SC", f"DSCL (d={dim}) without SC"
        setting = "the paper's d = number of training classes" if dim == DSCL_DIM else "d = 64"
        claims.append(
            Claim(
                f"DSCL with SC >= without SC in NMI and R@1 (DSCL Tables 1-3), {setting}",
                at_least(with_sc, (without_sc,)),
                f"{pair(with_sc)}; {pair(without_sc)} (mean ± std over seeds)",
            )
        )
    pair_level = ("triplet (semi-hard)", "contrastive")
    # DSCL is judged at the baselines' d = 64 and with their clustering (without SC), so that only
    # the loss differs; the paper's d = k model is listed beside it.
    dscl, dscl_paper_d = f"DSCL (d={EMBEDDING_DIM}) without SC", f"DSCL (d={DSCL_DIM}) with SC"
    claims.append(
        Claim(
            "Batch-level DSCL >= triplet and contrastive in NMI and R@1 (DSCL Tables 1-2), "
            f"same d = {EMBEDDING_DIM} and clustering as the baselines",
            at_least(dscl, pair_level),
            "; ".join(pair(r) for r in (dscl, *pair_level))
            + f". At the paper's d = {DSCL_DIM}: {pair(dscl_paper_d)}",
        )
    )
    claims.append(
        Claim(
            "Batch-level lifted >= triplet and contrastive in NMI and R@1 (lifted Figs. 5-6)",
            at_least("lifted", pair_level),
            "; ".join(pair(r) for r in ("lifted", *pair_level)),
        )
    )
    return claims


@experiment("zero-shot-fashion")
def zero_shot_fashion(budget: Budget) -> ExperimentReport:
    """Train on Fashion-MNIST classes 0-4, retrieve and cluster classes 5-9; see the module."""
    scale = _scale(budget)
    seeds = budget.seed_list(quick=1, default=2, full=5)
    train = class_split(load_dataset("fashion-mnist", split="train"), SEEN, relabel=True)
    test = class_split(load_dataset("fashion-mnist", split="test"), UNSEEN)
    if scale.train_per_class is not None:
        train = first_per_class(train, scale.train_per_class)
    if scale.test_per_class is not None:
        test = first_per_class(test, scale.test_per_class)

    runs: dict[str, list[dict[str, float]]] = {}
    notes: dict[str, str] = {}
    maps: dict[str, np.ndarray] = {}
    with single_thread():
        methods, search_notes = tuned_methods(budget, scale, train)
        for seed in seeds:
            for method, with_spectral in methods:
                (embedding,) = train_and_embed(
                    method, train, [test], training_config(scale.epochs, seed, budget.device)
                )
                # With SC first, as in DSCL's tables.
                variants = {"with SC": True, "without SC": False} if with_spectral else {"": False}
                for suffix, spectral in variants.items():
                    row = f"{method.label} {suffix}".strip()
                    scores = zero_shot_scores(
                        embedding, test.labels, spectral=spectral, seed=seed, device=budget.device
                    )
                    runs.setdefault(row, []).append(scores)
                    notes[row] = _describe(method)
                if seed == seeds[0] and method.spec.loss in ("spectral", "triplet"):
                    maps[method.label] = embedding

    rows = {r: Row.from_runs(r, scores, note=notes[r]) for r, scores in runs.items()}
    report = ExperimentReport(
        name="zero-shot-fashion",
        title="Zero-shot retrieval and clustering on unseen Fashion-MNIST classes",
        paper=(
            "Song et al. Deep Metric Learning via Lifted Structured Feature Embedding. CVPR 2016; "
            "Law, Urtasun, Zemel. Deep Spectral Clustering Learning. ICML 2017."
        ),
        setup=_setup(scale, methods[0][0].spec, train, test, seeds),
        metrics=METRICS,
        rows=list(rows.values()),
        claims=_verdicts(rows),
        plots=plot_tsne_maps(
            maps, test.labels, budget.folder, scale.tsne_items, title_suffix=", unseen"
        ),
        notes=[
            "The papers' numbers are on CUB-200-2011, CARS196 and Stanford Online Products with "
            "GoogLeNet; none of them is on this machine, so only their claims are checked.",
            "Recall@K and MAP@R: leave-one-out over the unseen test images. NMI and F1 (pairwise): "
            "k-means with k = 5 on the l2-normalised embedding (without SC), or on Algorithm 2's "
            "5 leading row-normalised singular vectors of the centred normalised embedding (with "
            "SC, Algorithm 2 with r = k: the paper's r = rank = d = k when d = k), where Recall@K "
            "is computed too.",
            "Affinity propagation, the lifted paper's clustering, is replaced by k-means as in "
            "DSCL's tables, so that the with/without SC comparison isolates Algorithm 2.",
            *search_notes,
        ],
        budget=scale.budget_line(budget.mode, len(train), seeds, len(SEEN)),
    )
    report.record = {"seeds": seeds}
    return report


def _setup(
    scale: Scale, spec: RunSpec, train: LabelledDataset, test: LabelledDataset, seeds: list[int]
) -> str:
    search = scale.search
    settings = (
        "Lifted and contrastive margin 1.0 on raw embeddings; triplet semi-hard, margin 0.2, "
        "unit-norm embedding"
        if search is None
        else "Each method's learning rate (and margin, for lifted, contrastive and triplet) "
        f"tuned first by {search.folds}-fold class-disjoint cross-validation on the seen classes "
        f"(clusterable tune, {search.trials} trials, {SEARCH_METRIC} on the held-out classes, "
        f"{search.epochs} epochs per fold, {search.fit_per_class or 6000} images per class; "
        "the Reality Check's protocol); triplet semi-hard on the unit-norm embedding"
    )
    adam = "Adam 1e-3" if search is None else "Adam"
    return (
        f"Fashion-MNIST: train on classes 0-4 ({len(train):,} training-split images, the first "
        f"{scale.train_per_class or 6000} of each), test on the unseen classes 5-9 "
        f"({len(test):,} test-split images). Backbone: {describe_backbone(spec)} trained from "
        f"scratch (the papers fine-tune an ImageNet GoogLeNet), {adam}, {scale.epochs} epochs "
        f"of class-balanced batches of {ITEMS_PER_CLASS * len(SEEN)} (5 classes x "
        f"{ITEMS_PER_CLASS}; the papers: 128 and, for DSCL, 1,260 with the large-batch trick, "
        f"not needed at this size), seeds {seeds}. Embedding {EMBEDDING_DIM} for every method; "
        f"DSCL also at d = {DSCL_DIM}, the number of training classes, as the DSCL paper sets it "
        f"for CUB and Cars. {settings}; cross-entropy embedding = the layer before "
        "the class weights. All scores on the l2-normalised embedding."
    )
