"""Expected triplet loss (MsDNN paper, Sec. III) against a loop transcription."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch

from clusterable.data import two_class_subclusters
from clusterable.losses import ExpectedTripletLoss, MsDNNLoss, build_loss

from _learning import descend, loo_1nn_accuracy, seeded_batch

DIM = 3
LABEL_SETS = [
    [0, 0, 1, 1, 1, 2, 3],
    [2, 2, 2, 0, 0, 1, 1, 1],
    [5, 1, 5, 5, 1, 7, 7],
]


make_batch = partial(seeded_batch, dim=DIM)


def reference(
    x, labels, sigma: float, margin: float, squared: bool, anchors: int | None = None
) -> float:
    """Triplet hinge with the positive and negative replaced by kernel expectations; the first
    ``anchors`` items (all by default) are the batch, the rest references (partners only)."""

    def sq(u, v):
        return sum((a - b) ** 2 for a, b in zip(u, v, strict=True))

    total = 0.0
    n = len(labels)
    anchors = n if anchors is None else anchors
    for i in range(anchors):
        expectations = []
        for same in (True, False):
            members = [j for j in range(n) if j != i and (labels[j] == labels[i]) == same]
            if not members:
                break
            kernel = {
                j: -(sq(x[i], x[j]) if squared else math.sqrt(sq(x[i], x[j]))) / sigma
                for j in members
            }
            top = max(kernel.values())
            weights = {j: math.exp(v - top) for j, v in kernel.items()}
            norm = sum(weights.values())
            expectations.append(
                [sum(weights[j] * x[j][k] for j in members) / norm for k in range(DIM)]
            )
        if len(expectations) < 2:
            continue
        positive, negative = expectations
        total += max(0.0, sq(x[i], positive) - sq(x[i], negative) + margin)
    return total / anchors


@pytest.mark.parametrize("sigma, margin", [(1.0, 1.0), (0.3, 0.2), (5.0, 4.0)])
@pytest.mark.parametrize("squared", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("labels", LABEL_SETS)
def test_value_matches_reference_loop(sigma, margin, squared, seed, labels):
    x, y = make_batch(labels, seed)
    loss = ExpectedTripletLoss(sigma=sigma, margin=margin, squared=squared)
    expected = reference(x.tolist(), labels, sigma, margin, squared)
    assert loss(x, y).item() == pytest.approx(expected, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("sigma, margin", [(1.0, 1.0), (0.3, 0.2), (5.0, 4.0)])
@pytest.mark.parametrize("squared", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("labels", LABEL_SETS)
def test_references_match_reference_loop(sigma, margin, squared, seed, labels):
    x, y = make_batch(labels, seed)
    reference_labels = [labels[0], 4, labels[-1], 4]
    r, ry = make_batch(reference_labels, seed + 10)
    loss = ExpectedTripletLoss(sigma=sigma, margin=margin, squared=squared)
    points = torch.cat([x, r]).tolist()
    expected = reference(
        points, labels + reference_labels, sigma, margin, squared, anchors=len(labels)
    )
    assert loss(x, y, r, ry).item() == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_hinge_is_active_only_below_the_margin():
    """Far-apart classes give 0 and no gradient; MsDNN's logistic loss still gives a little."""
    x, y = make_batch([0, 0, 0, 1, 1, 1], 3, scale=0.1)
    with torch.no_grad():
        x[3:] += 10.0
    value = ExpectedTripletLoss(margin=1.0)(x, y)
    assert value.item() == 0.0
    value.backward()
    assert torch.equal(x.grad, torch.zeros_like(x))
    assert MsDNNLoss()(x, y).item() > 0.0


@pytest.mark.parametrize("labels", LABEL_SETS)
def test_gradcheck_differentiable_variant(labels):
    x, y = make_batch(labels, 4)
    loss = ExpectedTripletLoss(sigma=1.0, margin=3.0, detach_weights=False)
    assert torch.autograd.gradcheck(lambda f: loss(f, y), (x,))


@pytest.mark.parametrize("sigma", [1e-6, 1e6])
def test_extreme_sigma_is_finite(sigma):
    x, y = make_batch(LABEL_SETS[1], 5, scale=5.0)
    value = ExpectedTripletLoss(sigma=sigma)(x, y)
    assert torch.isfinite(value)
    value.backward()
    assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize(
    "labels", [[2] * 6, [0, 1, 2, 3], [1]], ids=["one-class", "distinct", "one"]
)
def test_degenerate_batches_give_zero_and_backpropagate(labels):
    x, y = make_batch(labels, 6)
    value = ExpectedTripletLoss()(x, y)
    assert value.item() == 0.0
    value.backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_arguments_are_checked_and_name_is_registered():
    with pytest.raises(ValueError, match="sigma"):
        ExpectedTripletLoss(sigma=-1.0)
    with pytest.raises(ValueError, match="margin"):
        ExpectedTripletLoss(margin=-0.1)
    loss = build_loss("expected-triplet", sigma=2.0, margin=0.5)
    assert (loss.sigma, loss.margin) == (2.0, 0.5)


def test_gradient_descent_on_free_points_separates_the_classes():
    data = two_class_subclusters(n=200, std=6.0, seed=0)  # overlapping classes
    assert loo_1nn_accuracy(data.x, data.labels) < 0.9
    points = torch.tensor(0.1 * data.x, requires_grad=True)
    labels = torch.tensor(data.labels)
    loss = ExpectedTripletLoss(sigma=0.1, margin=1.0)
    optimiser = torch.optim.Adam([points], lr=0.05)
    start = loss(points, labels).item()
    descend(loss, points, labels, 200, optimiser)
    assert loss(points, labels).item() < 0.1 * start
    assert loo_1nn_accuracy(points.detach().numpy(), data.labels) >= 0.95
