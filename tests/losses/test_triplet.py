"""Triplet loss (lifted-structure paper, Eq. 2; FaceNet mining) against independent references.

References: Eq. (2) over triplets enumerated by a brute-force triple loop for each mining rule;
pytorch-metric-learning's ``TripletMarginLoss`` with ``TripletMarginMiner("semihard")`` /
``BatchHardMiner``; gradcheck; sklearn 1-NN.

pytorch-metric-learning vs ours: it averages the non-zero triplet losses (``AvgNonZeroReducer``);
semi-hard triplets are all non-zero, so the comparison uses its default there and ``MeanReducer``
for ``all`` and ``batch-hard``. Its semi-hard miner keeps ``D_an <= D_ap + margin`` (ours ``<``),
which differs only on exact ties. ``LpDistance(power=2)`` gives FaceNet's squared distances.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners
from pytorch_metric_learning import reducers as pml_reducers
from pytorch_metric_learning.utils import loss_and_miner_utils as pml_utils

from clusterable.data import two_class_subclusters
from clusterable.losses import TripletMarginLoss, build_loss

from _learning import PlainDescent, descend, loo_1nn_accuracy

SEEDS = [0, 1, 2, 3]
MININGS = ["all", "semi-hard", "batch-hard"]


def squared_distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(sum((a[t] - b[t]) ** 2 for t in range(len(a))))


def brute_force_triplets(
    points: np.ndarray, labels: np.ndarray, mining: str, margin: float, anchors: int | None = None
) -> list[tuple[int, int, int]]:
    """Triplets chosen by each rule, by enumerating every (anchor, positive, negative); the
    anchors are the first ``anchors`` points (all by default), the rest references."""
    n = len(points)
    chosen = []
    for a in range(n if anchors is None else anchors):
        positives = [p for p in range(n) if p != a and labels[p] == labels[a]]
        negatives = [k for k in range(n) if labels[k] != labels[a]]
        if mining == "batch-hard":
            if positives and negatives:
                farthest = max(positives, key=lambda p: squared_distance(points[a], points[p]))
                nearest = min(negatives, key=lambda k: squared_distance(points[a], points[k]))
                chosen.append((a, farthest, nearest))
            continue
        for p in positives:
            d_ap = squared_distance(points[a], points[p])
            for k in negatives:
                d_an = squared_distance(points[a], points[k])
                if mining == "all" or d_ap < d_an < d_ap + margin:
                    chosen.append((a, p, k))
    return chosen


def reference_loss(
    points: np.ndarray, labels: np.ndarray, mining: str, margin: float, anchors: int | None = None
) -> float:
    """Eq. (2) summand [D_ap^2 - D_an^2 + a]_+, averaged over the mined triplets."""
    triplets = brute_force_triplets(points, labels, mining, margin, anchors)
    total = 0.0
    for a, p, k in triplets:
        total += max(
            0.0,
            squared_distance(points[a], points[p])
            - squared_distance(points[a], points[k])
            + margin,
        )
    return total / len(triplets) if triplets else 0.0


def random_batch(seed: int, n: int = 14, d: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 embeddings; repeated labels and two singletons."""
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(n, d, generator=generator, dtype=torch.float64)
    repeated = torch.randint(0, 3, (n - 2,), generator=generator)
    return embeddings, torch.cat([repeated, torch.tensor([5, 6])])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mining", MININGS)
@pytest.mark.parametrize("normalize", [True, False])
def test_matches_paper_formula_with_brute_force_mining(seed, mining, normalize):
    embeddings, labels = random_batch(seed)
    margin = 0.2 if normalize else 1.0
    value = TripletMarginLoss(margin=margin, mining=mining, normalize=normalize)(embeddings, labels)
    points = torch.nn.functional.normalize(embeddings, dim=1) if normalize else embeddings
    expected = reference_loss(points.numpy(), labels.numpy(), mining, margin)
    assert expected > 0
    assert value.item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mining", MININGS)
@pytest.mark.parametrize("normalize", [True, False])
def test_references_match_paper_formula_with_brute_force_mining(seed, mining, normalize):
    embeddings, labels = random_batch(seed)
    references, reference_labels = random_batch(seed + 10, n=9)
    margin = 0.2 if normalize else 1.0
    loss = TripletMarginLoss(margin=margin, mining=mining, normalize=normalize)
    value = loss(embeddings, labels, references, reference_labels)
    points = torch.cat([embeddings, references])
    if normalize:
        points = torch.nn.functional.normalize(points, dim=1)
    partner_labels = torch.cat([labels, reference_labels]).numpy()
    expected = reference_loss(points.numpy(), partner_labels, mining, margin, anchors=14)
    assert expected > 0
    assert value.item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mining", MININGS)
def test_references_match_pytorch_metric_learning_ref_emb(seed, mining):
    """PML's miners and loss with ``ref_emb`` = the batch then the references, self pairs
    removed as its CrossBatchMemory does (semi-hard: our rule is its ``semihard`` one)."""
    embeddings, labels = random_batch(seed, n=24, d=4)
    references, reference_labels = random_batch(seed + 10, n=15, d=4)
    partners = torch.cat([embeddings, references])
    partner_labels = torch.cat([labels, reference_labels])
    distance = pml_distances.LpDistance(power=2)
    if mining == "all":
        triplets = pml_utils.get_all_triplets_indices(labels, partner_labels)
    elif mining == "semi-hard":
        miner = pml_miners.TripletMarginMiner(
            margin=0.2, type_of_triplets="semihard", distance=distance
        )
        triplets = miner(embeddings, labels, partners, partner_labels)
    else:
        # Its hardest positive of an anchor is never the anchor itself (distance 0) as long as
        # the anchor has another positive, which every anchor here has.
        triplets = pml_miners.BatchHardMiner(distance=distance)(
            embeddings, labels, partners, partner_labels
        )
    triplets = pml_utils.remove_self_comparisons(triplets, torch.arange(24), len(partners))
    theirs = pml_losses.TripletMarginLoss(
        margin=0.2, distance=distance, reducer=pml_reducers.MeanReducer()
    )(embeddings, labels, triplets, partners, partner_labels)
    ours = TripletMarginLoss(margin=0.2, mining=mining)(
        embeddings, labels, references, reference_labels
    )
    assert ours.item() > 0
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_semi_hard_matches_pytorch_metric_learning(seed):
    embeddings, labels = random_batch(seed, n=24, d=4)
    distance = pml_distances.LpDistance(power=2)
    miner = pml_miners.TripletMarginMiner(
        margin=0.2, type_of_triplets="semihard", distance=distance
    )
    theirs = pml_losses.TripletMarginLoss(margin=0.2, distance=distance)
    expected = theirs(embeddings, labels, miner(embeddings, labels))
    ours = TripletMarginLoss()(embeddings, labels)
    assert ours.item() > 0
    assert ours.item() == pytest.approx(expected.item(), rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mining", ["all", "batch-hard"])
def test_all_and_batch_hard_match_pytorch_metric_learning(seed, mining):
    embeddings, labels = random_batch(seed, n=24, d=4)
    distance = pml_distances.LpDistance(power=2)
    theirs = pml_losses.TripletMarginLoss(
        margin=0.2, distance=distance, reducer=pml_reducers.MeanReducer()
    )
    if mining == "all":
        expected = theirs(embeddings, labels)
    else:
        miner = pml_miners.BatchHardMiner(distance=distance)
        expected = theirs(embeddings, labels, miner(embeddings, labels))
    ours = TripletMarginLoss(margin=0.2, mining=mining)(embeddings, labels)
    assert ours.item() == pytest.approx(expected.item(), rel=1e-9)


@pytest.mark.parametrize("mining", MININGS)
def test_gradcheck(mining):
    embeddings, labels = random_batch(2, n=9, d=3)
    embeddings.requires_grad_(True)
    loss = TripletMarginLoss(margin=0.5, mining=mining)
    assert loss(embeddings, labels).item() > 0
    assert torch.autograd.gradcheck(lambda x: loss(x, labels), (embeddings,))


def test_unknown_mining_is_rejected_at_construction():
    with pytest.raises(ValueError, match=r"unknown mining strategy 'hard'.*semi-hard"):
        TripletMarginLoss(mining="hard")
    with pytest.raises(ValueError, match="choose one of"):
        build_loss("triplet", mining="semihard")


@pytest.mark.parametrize("mining", MININGS)
@pytest.mark.parametrize(
    "labels", [[4] * 6, [0, 1, 2, 3, 4, 5], [0]], ids=["one-class", "distinct", "single-item"]
)
def test_no_triplet_gives_zero_that_backpropagates(mining, labels):
    embeddings = torch.randn(len(labels), 3, dtype=torch.float64, requires_grad=True)
    value = TripletMarginLoss(mining=mining)(embeddings, torch.tensor(labels))
    assert value.item() == 0.0
    value.backward()
    assert torch.equal(embeddings.grad, torch.zeros_like(embeddings))


@pytest.mark.parametrize("mining", ["all", "batch-hard"])
def test_identical_points_give_no_nan(mining):
    points = torch.ones(6, 3, dtype=torch.float64, requires_grad=True)
    value = TripletMarginLoss(mining=mining)(points, torch.tensor([0, 0, 1, 1, 2, 2]))
    value.backward()
    assert value.item() == pytest.approx(0.2)  # every triplet sits at D_ap = D_an = 0
    assert torch.isfinite(points.grad).all()


def test_registered_with_facenet_defaults():
    loss = build_loss("triplet")
    assert isinstance(loss, TripletMarginLoss)
    assert (loss.margin, loss.mining, loss.normalize) == (0.2, "semi-hard", True)


def test_gradient_descent_on_free_points_separates_classes():
    data = two_class_subclusters(n=80, std=6.0, seed=0)
    points = torch.tensor(data.x / data.x.std(), requires_grad=True)  # (80, 2)
    labels = torch.as_tensor(data.labels)
    assert loo_1nn_accuracy(data.x, data.labels) < 0.9
    loss = TripletMarginLoss()
    first = loss(points, labels).item()
    descend(loss, points, labels, 40, PlainDescent([points], lr=50.0))
    assert loss(points, labels).item() < 0.1 * first
    # The loss lives on the unit circle: score the points where it sees them.
    unit = torch.nn.functional.normalize(points.detach(), dim=1).numpy()
    assert loo_1nn_accuracy(unit, data.labels) >= 0.95
