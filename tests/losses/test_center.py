"""Center loss (Wen et al. 2016) against a loop transcription and the centre rule done by hand."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest
import torch

from clusterable.data import two_class_subclusters
from clusterable.losses import CenterLoss, build_loss

from _learning import descend, loo_1nn_accuracy, seeded_batch

CLASSES, DIM = 4, 3
LABEL_SETS = [[0, 0, 1, 1, 1, 2, 3], [2, 2, 2, 0, 1, 1], [3, 1, 3, 3, 0]]


make_batch = partial(seeded_batch, dim=DIM)


def build(seed: int, **kwargs) -> CenterLoss:
    torch.manual_seed(100 + seed)
    loss = CenterLoss(CLASSES, DIM, **kwargs).double()
    # Non-zero centres, so the centre term and the update are exercised from the first call.
    loss.centers.copy_(torch.randn(CLASSES, DIM, generator=torch.Generator().manual_seed(seed)))
    return loss


def reference_value(x, labels, weight, centers, lam: float) -> float:
    """Wen et al. Eq. 5 divided by the batch size: softmax CE + (lam / 2) ||h - c_y||^2."""
    total = 0.0
    for h, y in zip(x, labels, strict=True):
        logits = [sum(a * b for a, b in zip(h, w, strict=True)) for w in weight]
        top = max(logits)
        log_norm = top + math.log(sum(math.exp(v - top) for v in logits))
        total += log_norm - logits[y]
        total += lam / 2 * sum((a - b) ** 2 for a, b in zip(h, centers[y], strict=True))
    return total / len(labels)


def reference_update(x, labels, centers, alpha: float):
    """Wen et al. Eq. 4: c_j -= alpha * sum_{i: y_i = j} (c_j - x_i) / (1 + n_j)."""
    updated = [list(c) for c in centers]
    for j in range(len(centers)):
        members = [h for h, y in zip(x, labels, strict=True) if y == j]
        for k in range(len(centers[j])):
            delta = sum(centers[j][k] - h[k] for h in members) / (1 + len(members))
            updated[j][k] = centers[j][k] - alpha * delta
    return updated


@pytest.mark.parametrize("lam", [0.003, 0.5, 2.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("labels", LABEL_SETS)
def test_value_matches_reference_loop(lam, seed, labels):
    x, y = make_batch(labels, seed)
    loss = build(seed, lam=lam)
    expected = reference_value(
        x.tolist(), labels, loss.classifier.weight.tolist(), loss.centers.tolist(), lam
    )
    assert loss(x, y).item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("alpha", [0.5, 0.1, 1.0])
@pytest.mark.parametrize("labels", LABEL_SETS)
def test_centre_update_is_wen_et_al_rule(alpha, labels):
    x, y = make_batch(labels, 3)
    loss = build(3, alpha=alpha)
    before = loss.centers.tolist()
    value = loss(x, y)
    # The value uses the centres before the step (Algorithm 1: loss, then update).
    expected_value = reference_value(
        x.tolist(), labels, loss.classifier.weight.tolist(), before, loss.lam
    )
    assert value.item() == pytest.approx(expected_value, rel=1e-9)
    expected = reference_update(x.tolist(), labels, before, alpha)
    np.testing.assert_allclose(loss.centers.numpy(), np.array(expected), rtol=1e-12, atol=1e-15)
    value.backward()  # the in-place update must not break backward
    assert torch.isfinite(x.grad).all()


def test_centres_are_frozen_in_eval_mode_and_never_get_gradient():
    x, y = make_batch(LABEL_SETS[0], 4)
    loss = build(4)
    before = loss.centers.clone()
    loss.eval()
    loss(x, y).backward()
    assert torch.equal(loss.centers, before)
    assert "centers" not in dict(loss.named_parameters())
    assert "centers" in dict(loss.named_buffers())


def test_gradient_treats_centres_as_constants():
    x, y = make_batch(LABEL_SETS[1], 5)
    loss = build(5, lam=0.7)
    centers = loss.centers.clone()
    weight = loss.classifier.weight.detach()
    loss(x, y).backward()
    x_ref = x.detach().clone().requires_grad_()
    logits = x_ref @ weight.T
    reference = torch.nn.functional.cross_entropy(logits, y) + 0.35 * (
        (x_ref - centers[y]).square().sum(1).mean()
    )
    reference.backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-12, atol=1e-14)


def test_gradcheck_in_eval_mode():
    x, y = make_batch(LABEL_SETS[0], 6)
    loss = build(6, lam=0.5).eval()
    weight = loss.classifier.weight.detach().clone().requires_grad_()

    def value(embeddings, class_matrix):
        return torch.func.functional_call(
            loss, {"classifier.weight": class_matrix}, (embeddings, y)
        )

    assert torch.autograd.gradcheck(value, (x, weight))


def test_predict_is_argmax_of_softmax_logits():
    x, _ = make_batch([0] * 15, 7)
    loss = build(7)
    logits = [
        [sum(a * b for a, b in zip(h, w, strict=True)) for w in loss.classifier.weight.tolist()]
        for h in x.tolist()
    ]
    expected = [max(range(CLASSES), key=row.__getitem__) for row in logits]
    assert loss.predict(x).tolist() == expected


def test_defaults_are_wen_et_al_and_arguments_are_checked():
    loss = build_loss("center", num_classes=CLASSES, embedding_dim=DIM)
    assert loss.lam == 0.003 and loss.alpha == 0.5
    assert torch.equal(loss.centers, torch.zeros(CLASSES, DIM))
    with pytest.raises(ValueError, match="alpha"):
        CenterLoss(CLASSES, DIM, alpha=0.0)
    with pytest.raises(ValueError, match="lam"):
        CenterLoss(CLASSES, DIM, lam=-1.0)
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        loss(torch.randn(2, DIM), torch.tensor([0, 4]))


@pytest.mark.parametrize(
    "labels", [[2] * 6, [0, 1, 2, 3], [1]], ids=["one-class", "distinct", "one"]
)
def test_degenerate_batches_are_finite_and_backpropagate(labels):
    x, y = make_batch(labels, 8)
    loss = build(8)
    value = loss(x, y)
    assert torch.isfinite(value)
    value.backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    assert torch.isfinite(loss.centers).all()


def test_gradient_descent_on_free_points_separates_the_classes():
    data = two_class_subclusters(n=200, std=6.0, seed=0)  # overlapping classes
    assert loo_1nn_accuracy(data.x, data.labels) < 0.9
    torch.manual_seed(0)
    points = torch.tensor(0.1 * data.x, requires_grad=True)
    labels = torch.tensor(data.labels)
    loss = CenterLoss(num_classes=2, embedding_dim=2, lam=0.5).double()
    optimiser = torch.optim.Adam([points, *loss.parameters()], lr=0.05)
    start = loss(points, labels).item()
    descend(loss, points, labels, 200, optimiser)
    assert loss.eval()(points, labels).item() < start - 0.1
    assert loo_1nn_accuracy(points.detach().numpy(), data.labels) >= 0.95
    assert (loss.predict(points) == labels).float().mean() >= 0.95
    # The centres have followed the class means of the moving points.
    for j in range(2):
        mean = points.detach()[labels == j].mean(0)
        assert torch.linalg.norm(loss.centers[j] - mean) < 0.1 * torch.linalg.norm(mean)
