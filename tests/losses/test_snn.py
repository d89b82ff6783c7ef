"""Soft nearest neighbour loss against a loop transcription and pytorch-metric-learning NCALoss."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
from pytorch_metric_learning.distances import LpDistance
from pytorch_metric_learning.losses import NCALoss

from clusterable.data import two_class_subclusters
from clusterable.losses import SoftNearestNeighborLoss, build_loss

from _learning import descend, loo_1nn_accuracy, seeded_batch

DIM = 3
LABEL_SETS = [
    [0, 0, 1, 1, 1, 2, 3],  # 2 and 3 have no partner
    [2, 2, 2, 0, 0, 1, 1, 1],
    [5, 1, 5, 5, 1, 7, 7, 9],
]


make_batch = partial(seeded_batch, dim=DIM)


def reference(x, labels, temperature: float, anchors: int | None = None) -> float:
    """Frosst et al. Eq. 1, -1/b sum_i log(same-label mass / all mass), squared distances.

    The first ``anchors`` items (all by default) are the batch of b items, the rest references:
    they are partners j, k only."""
    anchors = len(labels) if anchors is None else anchors
    total = 0.0
    for i in range(anchors):
        same, everyone = [], []
        for j in range(len(labels)):
            if j == i:
                continue
            logit = -sum((a - b) ** 2 for a, b in zip(x[i], x[j], strict=True)) / temperature
            everyone.append(logit)
            if labels[j] == labels[i]:
                same.append(logit)
        if not same:
            continue
        top = max(everyone)
        log_all = top + math.log(sum(math.exp(v - top) for v in everyone))
        log_same = top + math.log(sum(math.exp(v - top) for v in same))
        total -= log_same - log_all
    return total / anchors


@pytest.mark.parametrize("temperature", [0.1, 1.0, 30.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("labels", LABEL_SETS)
def test_value_matches_reference_loop(temperature, seed, labels):
    x, y = make_batch(labels, seed)
    value = SoftNearestNeighborLoss(temperature)(x, y)
    assert value.item() == pytest.approx(reference(x.tolist(), labels, temperature), rel=1e-9)


@pytest.mark.parametrize("temperature", [0.1, 1.0, 30.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("labels", LABEL_SETS)
def test_references_match_reference_loop(temperature, seed, labels):
    x, y = make_batch(labels, seed)
    reference_labels = [labels[0], 4, 4, labels[-1], 8]  # a partner for some lone items
    r, ry = make_batch(reference_labels, seed + 10)
    value = SoftNearestNeighborLoss(temperature)(x, y, r, ry)
    expected = reference(
        torch.cat([x, r]).tolist(), labels + reference_labels, temperature, anchors=len(labels)
    )
    assert value.item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("temperature", [0.5, 2.0])
@pytest.mark.parametrize("labels", LABEL_SETS)
def test_equals_pytorch_metric_learning_nca_rescaled(temperature, labels):
    """NCALoss (unnormalised squared L2, scale 1/T) is SNN averaged over items with a partner."""
    x, y = make_batch(labels, 3)
    oracle = NCALoss(
        softmax_scale=1.0 / temperature,
        distance=LpDistance(normalize_embeddings=False, p=2, power=2),
    )
    with_partner = sum(labels.count(c) > 1 for c in labels)
    ours = SoftNearestNeighborLoss(temperature)(x, y)
    theirs = oracle(x, y) * with_partner / len(labels)
    torch.testing.assert_close(ours, theirs, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("labels", LABEL_SETS)
def test_gradcheck(labels):
    x, y = make_batch(labels, 4)
    loss = SoftNearestNeighborLoss(0.7)
    assert torch.autograd.gradcheck(lambda f: loss(f, y), (x,))


@pytest.mark.parametrize("temperature", [1e-6, 1e6])
def test_extreme_temperatures_are_finite(temperature):
    x, y = make_batch(LABEL_SETS[1], 5, scale=10.0)
    value = SoftNearestNeighborLoss(temperature)(x, y)
    assert torch.isfinite(value)
    value.backward()
    assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize(
    "labels", [[2] * 6, [0, 1, 2, 3], [1]], ids=["one-class", "distinct", "one"]
)
def test_degenerate_batches_give_zero_and_backpropagate(labels):
    x, y = make_batch(labels, 6)
    value = SoftNearestNeighborLoss()(x, y)
    assert value.item() == pytest.approx(0.0, abs=1e-15)
    value.backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_point_without_partner_contributes_zero_not_a_constant():
    x, y = make_batch([0, 0, 1, 1, 2], 7)
    full = SoftNearestNeighborLoss()(x, y)
    # Removing the lone item changes only the normaliser b (5 -> 4) and the others' denominators.
    x_lone_far = x.detach().clone()
    x_lone_far[4] += 1e3
    far = SoftNearestNeighborLoss()(x_lone_far, y)
    without = SoftNearestNeighborLoss()(x_lone_far[:4], y[:4])
    assert far.item() == pytest.approx(without.item() * 4 / 5, rel=1e-9)
    assert full.item() != far.item()


def test_arguments_are_checked_and_name_is_registered():
    with pytest.raises(ValueError, match="temperature"):
        SoftNearestNeighborLoss(0.0)
    assert build_loss("snn", temperature=3.0).temperature == 3.0


def test_gradient_descent_on_free_points_separates_the_classes():
    data = two_class_subclusters(n=200, std=6.0, seed=0)  # overlapping classes
    assert loo_1nn_accuracy(data.x, data.labels) < 0.9
    points = torch.tensor(0.1 * data.x, requires_grad=True)
    labels = torch.tensor(data.labels)
    loss = SoftNearestNeighborLoss(temperature=1.0)
    optimiser = torch.optim.Adam([points], lr=0.05)
    start = loss(points, labels).item()
    descend(loss, points, labels, 200, optimiser)
    assert loss(points, labels).item() < 0.5 * start
    assert loo_1nn_accuracy(points.detach().numpy(), data.labels) >= 0.95
