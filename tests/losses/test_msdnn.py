"""MsDNN loss (Chauhan et al. 2021, Eq. 2-6) against a loop transcription, gradients and Fig. 1."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.metrics import normalized_mutual_info_score

from clusterable.data import two_class_subclusters
from clusterable.losses import MsDNNLoss, build_loss
from clusterable.losses.msdnn import expected_margin

from _learning import descend, loo_1nn_accuracy, seeded_batch

DIM = 3
LABEL_SETS = [
    [0, 0, 1, 1, 1, 2, 3],  # repeats and singletons (2 and 3 have no hit)
    [2, 2, 2, 0, 0, 1, 1, 1],
    [5, 1, 5, 5, 1, 7, 7],
]


make_batch = partial(seeded_batch, dim=DIM)


def distance(u, v, squared: bool) -> float:
    total = sum((a - b) ** 2 for a, b in zip(u, v, strict=True))
    return total if squared else math.sqrt(total)


def reference_probabilities(x, labels, sigma: float, squared: bool, anchors: int | None = None):
    """Eq. 3 and 4: nearest-hit and nearest-miss probabilities, row by row (log-domain).

    The first ``anchors`` items (all by default) are the batch, the rest references: they are
    hits and misses only, with no row of their own."""
    n = len(labels)
    anchors = n if anchors is None else anchors
    hit = [[0.0] * n for _ in range(anchors)]
    miss = [[0.0] * n for _ in range(anchors)]
    for i in range(anchors):
        for table, same in ((hit, True), (miss, False)):
            members = [j for j in range(n) if j != i and (labels[j] == labels[i]) == same]
            if not members:
                continue
            logits = {j: -distance(x[i], x[j], squared) / sigma for j in members}
            top = max(logits.values())
            norm = sum(math.exp(v - top) for v in logits.values())
            for j in members:
                table[i][j] = math.exp(logits[j] - top) / norm
    return hit, miss


def reference_margins(x, labels, sigma: float, squared: bool, anchors: int | None = None):
    """Eq. 2 per item; None where the item has no hit or no miss."""
    hit, miss = reference_probabilities(x, labels, sigma, squared, anchors)
    margins = []
    for i in range(len(hit)):
        if sum(hit[i]) == 0 or sum(miss[i]) == 0:
            margins.append(None)
            continue
        expected_hit = [sum(hit[i][j] * x[j][k] for j in range(len(x))) for k in range(DIM)]
        expected_miss = [sum(miss[i][j] * x[j][k] for j in range(len(x))) for k in range(DIM)]
        margins.append(distance(x[i], expected_miss, True) - distance(x[i], expected_hit, True))
    return margins


def reference_loss(x, labels, sigma: float, squared: bool, anchors: int | None = None) -> float:
    """Eq. 5 divided by the batch size; items without a hit or a miss give 0."""
    total = 0.0
    margins = reference_margins(x, labels, sigma, squared, anchors)
    for r in margins:
        if r is not None:
            total += math.log1p(math.exp(-r)) if r > -30 else -r
    return total / len(margins)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 8.0])
@pytest.mark.parametrize("squared", [False, True])
@pytest.mark.parametrize("detach", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("labels", LABEL_SETS)
def test_value_matches_reference_loop(sigma, squared, detach, seed, labels):
    x, y = make_batch(labels, seed)
    loss = MsDNNLoss(sigma=sigma, squared=squared, detach_weights=detach)
    expected = reference_loss(x.tolist(), labels, sigma, squared)
    assert loss(x, y).item() == pytest.approx(expected, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 8.0])
@pytest.mark.parametrize("squared", [False, True])
@pytest.mark.parametrize("detach", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("labels", LABEL_SETS)
def test_references_match_reference_loop(sigma, squared, detach, seed, labels):
    x, y = make_batch(labels, seed)
    reference_labels = [labels[0], 4, labels[-1], 4, 6]
    r, ry = make_batch(reference_labels, seed + 10)
    loss = MsDNNLoss(sigma=sigma, squared=squared, detach_weights=detach)
    points = torch.cat([x, r]).tolist()
    expected = reference_loss(points, labels + reference_labels, sigma, squared, len(labels))
    assert loss(x, y, r, ry).item() == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_expected_margin_matches_reference_and_marks_items_without_hit_or_miss():
    x, y = make_batch(LABEL_SETS[0], 3)
    margin, valid = expected_margin(x, y, sigma=0.7)
    expected = reference_margins(x.tolist(), LABEL_SETS[0], 0.7, False)
    assert valid.tolist() == [r is not None for r in expected]
    for got, want in zip(margin.tolist(), expected, strict=True):
        assert got == pytest.approx(0.0 if want is None else want, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("squared", [False, True])
@pytest.mark.parametrize("labels", LABEL_SETS)
def test_detached_gradient_treats_probabilities_as_constants(squared, labels):
    """Algorithm 1: P_NH, P_NM from the current point, then a gradient of Eq. 5 with them fixed."""
    x, y = make_batch(labels, 4)
    loss = MsDNNLoss(sigma=0.8, squared=squared, detach_weights=True)
    loss(x, y).backward()

    hit, miss = reference_probabilities(x.tolist(), labels, 0.8, squared)
    hit, miss = torch.tensor(hit, dtype=torch.float64), torch.tensor(miss, dtype=torch.float64)
    f = x.detach().clone().requires_grad_()
    margin = (f - miss @ f).square().sum(1) - (f - hit @ f).square().sum(1)
    has_both = (hit.sum(1) > 0) & (miss.sum(1) > 0)
    (torch.nn.functional.softplus(-margin[has_both]).sum() / len(labels)).backward()
    torch.testing.assert_close(x.grad, f.grad, rtol=1e-9, atol=1e-13)

    # The differentiable variant has the same value and a different gradient.
    x2 = x.detach().clone().requires_grad_()
    MsDNNLoss(sigma=0.8, squared=squared, detach_weights=False)(x2, y).backward()
    assert not torch.allclose(x2.grad, x.grad)


@pytest.mark.parametrize("squared", [False, True])
@pytest.mark.parametrize("labels", LABEL_SETS)
def test_gradcheck_differentiable_variant(squared, labels):
    x, y = make_batch(labels, 5)
    loss = MsDNNLoss(sigma=0.9, squared=squared, detach_weights=False)
    assert torch.autograd.gradcheck(lambda f: loss(f, y), (x,))


def test_gradcheck_detached_variant_against_frozen_probabilities():
    """gradcheck cannot perturb through the detach, so check the frozen-probability function."""
    labels = LABEL_SETS[1]
    x, y = make_batch(labels, 6)
    hit, miss = reference_probabilities(x.tolist(), labels, 1.0, False)
    hit, miss = torch.tensor(hit, dtype=torch.float64), torch.tensor(miss, dtype=torch.float64)

    def frozen(f):
        margin = (f - miss @ f).square().sum(1) - (f - hit @ f).square().sum(1)
        return torch.nn.functional.softplus(-margin).sum() / len(labels)

    assert torch.autograd.gradcheck(frozen, (x,))
    x_detached = x.detach().clone().requires_grad_()
    MsDNNLoss(sigma=1.0)(x_detached, y).backward()
    x_frozen = x.detach().clone().requires_grad_()
    frozen(x_frozen).backward()
    torch.testing.assert_close(x_detached.grad, x_frozen.grad, rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("detach", [True, False])
@pytest.mark.parametrize("sigma", [1e-4, 1e-8, 1e4, 1e8])
def test_extreme_sigma_is_finite(sigma, detach):
    x, y = make_batch(LABEL_SETS[1], 7, scale=5.0)
    value = MsDNNLoss(sigma=sigma, detach_weights=detach)(x, y)
    assert torch.isfinite(value)
    value.backward()
    assert torch.isfinite(x.grad).all()


def test_tiny_sigma_gives_the_hard_nearest_hit_and_miss_margin():
    """sigma -> 0 turns Eq. 2 into Eq. 1 (squared distances): nearest miss minus nearest hit."""
    labels = LABEL_SETS[1]
    x, y = make_batch(labels, 8)
    margin, _ = expected_margin(x, y, sigma=1e-4)
    points = x.tolist()
    for i, got in enumerate(margin.tolist()):
        hits = [j for j in range(len(labels)) if j != i and labels[j] == labels[i]]
        misses = [j for j in range(len(labels)) if labels[j] != labels[i]]
        nearest_hit = min(hits, key=lambda j: distance(points[i], points[j], False))
        nearest_miss = min(misses, key=lambda j: distance(points[i], points[j], False))
        want = distance(points[i], points[nearest_miss], True) - distance(
            points[i], points[nearest_hit], True
        )
        assert got == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize(
    "labels", [[2] * 6, [0, 1, 2, 3], [1]], ids=["one-class", "distinct", "one"]
)
@pytest.mark.parametrize("detach", [True, False])
def test_batches_without_hits_or_misses_give_zero_and_backpropagate(labels, detach):
    x, y = make_batch(labels, 9)
    value = MsDNNLoss(detach_weights=detach)(x, y)
    assert value.item() == 0.0
    value.backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="sigma"):
        MsDNNLoss(sigma=0.0)


def subclass_nmi(points: np.ndarray, subclasses: np.ndarray) -> float:
    clusters = KMeans(n_clusters=4, n_init=10, random_state=0).fit_predict(points)
    return float(normalized_mutual_info_score(subclasses, clusters))


def descend_from(points: np.ndarray, labels: np.ndarray, loss, steps: int, lr: float) -> tuple:
    free = torch.tensor(points, requires_grad=True)
    target = torch.tensor(labels)
    start = loss(free, target).item()
    descend(loss, free, target, steps, torch.optim.SGD([free], lr=lr))
    return start, loss(free, target).item(), free.detach().numpy()


def test_gradient_descent_on_free_points_separates_overlapping_classes():
    data = two_class_subclusters(n=200, std=6.0, seed=0)
    assert loo_1nn_accuracy(data.x, data.labels) < 0.9
    start, end, points = descend_from(0.1 * data.x, data.labels, MsDNNLoss(sigma=0.1), 200, 2.0)
    assert end < 0.5 * start
    assert loo_1nn_accuracy(points, data.labels) >= 0.95


# MsDNN Fig. 1 on the library's layout (sub-classes 12 apart within a class, 16 across). In its own
# units the margins are ~250 and softplus(-r) ~ 1e-41: nothing moves. The points are scaled by 0.1
# (and sigma with them, so sigma is still 1 and 25 in the layout's units) to make the margins O(1).
SCALE = 0.1


def test_fig1_small_sigma_keeps_the_four_subclasses():
    data = two_class_subclusters(n=200, seed=0)
    loss = MsDNNLoss(sigma=1.0 * SCALE)
    start, end, points = descend_from(SCALE * data.x, data.labels, loss, 300, 10.0)
    assert end < 0.1 * start  # the loss acted on the points
    assert loo_1nn_accuracy(points, data.labels) >= 0.95
    assert subclass_nmi(points, data.subclasses) >= 0.9


@pytest.mark.xfail(
    strict=True,
    reason=(
        "MsDNN Fig. 1(c) does not reproduce on two_class_subclusters: with sub-classes 12 apart "
        "and classes 16 apart, sigma = 25 makes E[hit] sit between a point's own sub-class and "
        "the other, but E[miss] nearer the same-height miss sub-class, so the anchor term pushes "
        "sub-classes apart while the hit terms pull them together; the classes separate first and "
        "the logistic loss saturates (tried SGD/Adam, lr 1-100, 300-400 steps, scales 0.03-1, "
        "sigma 25-1000, detached and differentiable weights: within-class sub-class distance "
        "stays 12-14, NMI 1.0). As sigma -> inf, E[hit] and E[miss] become class means and the "
        "pull on a class's points sums to zero, so no merging is expected there either."
    ),
)
def test_fig1_large_sigma_merges_the_subclasses():
    data = two_class_subclusters(n=200, seed=0)
    loss = MsDNNLoss(sigma=25.0 * SCALE)
    start, end, points = descend_from(SCALE * data.x, data.labels, loss, 300, 10.0)
    assert end < 0.1 * start
    assert loo_1nn_accuracy(points, data.labels) >= 0.95
    assert subclass_nmi(points, data.subclasses) <= 0.75


def test_registered_name_builds_the_loss():
    loss = build_loss("msdnn", sigma=2.0, squared=True, detach_weights=False)
    assert isinstance(loss, MsDNNLoss)
    assert (loss.sigma, loss.squared, loss.detach_weights) == (2.0, True, False)
