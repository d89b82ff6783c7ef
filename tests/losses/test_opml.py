"""OPML loss (Dutta et al. 2020, Eq. 3-5) against a loop transcription, gradients and ablations."""

from __future__ import annotations

import copy
import math
from functools import partial

import numpy as np
import pytest
import torch
from _hard_batches import relative_error

from clusterable.data import two_class_subclusters
from clusterable.losses import OPMLLoss, build_loss

from _learning import descend, loo_1nn_accuracy, seeded_batch

DIM, METRIC = 5, 3
LABEL_SETS = [
    [0, 0, 1, 1, 1, 2, 3, 3],  # 2 is a singleton
    [2, 2, 2, 0, 0, 1, 1, 1, 1],
    [5, 1, 5, 5, 1, 7, 7, 9],
]
WIDE = 3.0  # a wide semi-hard window, so that random batches mine many triplets


make_batch = partial(seeded_batch, dim=DIM)


def build(seed: int = 0, perturb: bool = True, **kwargs) -> OPMLLoss:
    loss = OPMLLoss(DIM, metric_dim=METRIC, seed=seed, **kwargs).double()
    if perturb:
        # Leave the initial state: R != L, and L not orthonormal.
        generator = torch.Generator().manual_seed(50 + seed)
        with torch.no_grad():
            loss.R.add_(0.5 * torch.randn(DIM, METRIC, generator=generator, dtype=torch.float64))
            loss.L.add_(0.3 * torch.randn(DIM, METRIC, generator=generator, dtype=torch.float64))
    return loss


def sigmoid(v: float) -> float:
    return 1 / (1 + math.exp(-v)) if v >= 0 else math.exp(v) / (1 + math.exp(v))


def softplus(v: float) -> float:
    return max(v, 0.0) + math.log1p(math.exp(-abs(v)))


def reference(x, labels, L, R, alpha_deg, margin, orthogonal, weighted):
    """Semi-hard triplets on ||M^T(.)||^2, then Eq. 3-5 averaged; returns (loss, mean m, mean w)."""
    metric = np.linalg.qr(np.array(L))[0].tolist() if orthogonal else L
    x = [list(row) for row in x]
    d, l_dim = len(metric), len(metric[0])

    def project(v, matrix):
        return [sum(matrix[r][c] * v[r] for r in range(d)) for c in range(l_dim)]

    def sq(u, v):
        return sum((a - b) ** 2 for a, b in zip(u, v, strict=True))

    def inner(u, v):
        return sum(a * b for a, b in zip(u, v, strict=True))

    projected = [project(v, metric) for v in x]
    through_r = [project(v, R) for v in x]
    factor = 4 * math.tan(math.radians(alpha_deg)) ** 2
    terms, margins, weights = [], [], []
    n = len(labels)
    for a in range(n):
        for p in range(n):
            if p == a or labels[p] != labels[a]:
                continue
            d_ap = sq(projected[a], projected[p])
            for q in range(n):
                if labels[q] == labels[a]:
                    continue
                d_an = sq(projected[a], projected[q])
                if not d_ap < d_an < d_ap + margin:
                    continue
                middle = [(u + v) / 2 for u, v in zip(projected[a], projected[p], strict=True)]
                z = d_ap - factor * sq(projected[q], middle)
                m_i = softplus(z)
                if weighted:
                    middle_r = [
                        (u + v) / 2 for u, v in zip(through_r[a], through_r[p], strict=True)
                    ]
                    w_plus = sigmoid(inner(through_r[a], through_r[p]))
                    w_minus = 1 - sigmoid(inner(middle_r, through_r[q]))
                    w = (w_plus + w_minus) / 2
                else:
                    w = 1.0
                terms.append(softplus(w * m_i))
                margins.append(m_i)
                weights.append(w)
    if not terms:
        return 0.0, None, None
    return sum(terms) / len(terms), sum(margins) / len(margins), sum(weights) / len(weights)


@pytest.mark.parametrize("orthogonal", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("alpha_deg", [45.0, 30.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("labels", LABEL_SETS)
def test_value_and_diagnostics_match_reference_loop(orthogonal, weighted, alpha_deg, seed, labels):
    x, y = make_batch(labels, seed)
    loss = build(seed, orthogonal=orthogonal, weighted=weighted, alpha_deg=alpha_deg, margin=WIDE)
    value = loss(x, y)
    expected, mean_margin, mean_weight = reference(
        x.tolist(), labels, loss.L.tolist(), loss.R.tolist(), alpha_deg, WIDE, orthogonal, weighted
    )
    assert loss.last_num_triplets > 0
    assert value.item() == pytest.approx(expected, rel=1e-9)
    assert loss.last_mean_margin_term == pytest.approx(mean_margin, rel=1e-9)
    assert loss.last_mean_weight == pytest.approx(mean_weight, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_noise_items_are_in_no_triplet(seed):
    """Items labelled -1 (the noise of ``pseudo_labels``, which ``RiemannianOPMLLoss`` leaves
    out) were mined as a class of their own, pulling the noise together: the loss of a batch
    with them is the loss of the batch without them, and they get no gradient."""
    labels = [0, -1, 0, 1, -1, 1, 1, -1, 2, 2]
    x, y = make_batch(labels, seed)
    clean = y >= 0
    loss = build(seed, margin=WIDE)
    value = loss(x, y)
    (gradient,) = torch.autograd.grad(value, x)
    x_clean = x.detach()[clean].requires_grad_(True)
    clean_value = loss(x_clean, y[clean])
    (clean_gradient,) = torch.autograd.grad(clean_value, x_clean)
    expected, _, _ = reference(
        x_clean.tolist(),
        y[clean].tolist(),
        loss.L.tolist(),
        loss.R.tolist(),
        45.0,
        WIDE,
        orthogonal=True,
        weighted=True,
    )
    assert loss.last_num_triplets > 0
    assert value.item() == pytest.approx(expected, rel=1e-9)
    assert value.item() == pytest.approx(clean_value.item(), rel=1e-12)
    assert torch.allclose(gradient[clean], clean_gradient, rtol=1e-10, atol=1e-14)
    assert gradient[~clean].abs().max() == 0


def test_default_margin_is_facenet_semi_hard_on_metric_distances():
    x, y = make_batch(LABEL_SETS[1], 3)
    loss = build(3)
    value = loss(x, y)
    expected, _, _ = reference(
        x.tolist(), LABEL_SETS[1], loss.L.tolist(), loss.R.tolist(), 45.0, 0.2, True, True
    )
    assert loss.margin == 0.2
    assert value.item() == pytest.approx(expected, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("orthogonal", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_gradcheck_embeddings_R_and_L(orthogonal, weighted):
    x, y = make_batch(LABEL_SETS[1], 4)
    loss = build(4, orthogonal=orthogonal, weighted=weighted, margin=WIDE)
    L = loss.L.detach().clone().requires_grad_()
    R = loss.R.detach().clone().requires_grad_()

    def value(embeddings, metric, weights):
        return torch.func.functional_call(loss, {"L": metric, "R": weights}, (embeddings, y))

    assert torch.autograd.gradcheck(value, (x, L, R))


def test_angular_constraint_in_blocks_of_triplets(monkeypatch):
    """z (Eq. 3) is computed and differentiated in blocks of triplets: blocks of 2 triplets give
    the value and gradients of a single block, and pass gradcheck."""
    from clusterable.losses import opml

    x, y = make_batch(LABEL_SETS[1], 4)
    loss = build(4, margin=WIDE)

    def value_and_gradients():
        embeddings = x.detach().clone().requires_grad_()
        loss.zero_grad()
        value = loss(embeddings, y)
        value.backward()
        return value.detach(), embeddings.grad, loss.L.grad.clone(), loss.R.grad.clone()

    whole = value_and_gradients()
    monkeypatch.setattr(opml, "TRIPLET_BLOCK", 2 * METRIC)
    assert loss.last_num_triplets > 4  # several blocks
    for blocked, single in zip(value_and_gradients(), whole, strict=True):
        torch.testing.assert_close(blocked, single, rtol=1e-12, atol=1e-14)
    assert torch.autograd.gradcheck(lambda e: loss(e, y), (x.detach().clone().requires_grad_(),))


def test_mining_memory_is_quadratic_not_cubic():
    """Two classes of 96: the miner's (|P|, n) mask would be n^3 / 2 distances (14 MB); no
    operation here allocates more than an (n, n) sort's values and indices."""
    from torch.profiler import ProfilerActivity, profile

    n = 192
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(n, DIM, generator=generator, requires_grad=True)
    loss = OPMLLoss(DIM, metric_dim=METRIC, margin=0.1)  # 15 thousand triplets
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        loss(embeddings, torch.arange(n) % 2).backward()
    assert loss.last_num_triplets > 0
    assert max(event.cpu_memory_usage for event in prof.events()) <= 12 * n * n


def test_gradient_reaches_R_and_L():
    x, y = make_batch(LABEL_SETS[0], 5)
    loss = build(5, margin=WIDE)
    loss(x, y).backward()
    assert loss.R.grad is not None and loss.R.grad.abs().sum() > 0
    assert loss.L.grad is not None and loss.L.grad.abs().sum() > 0


def test_orthonormalize_makes_L_orthonormal_and_keeps_its_span_and_the_loss():
    x, y = make_batch(LABEL_SETS[2], 6)
    loss = build(6, margin=WIDE)
    before = loss(x, y).item()
    old = loss.L.detach().clone()
    assert not torch.allclose(old.T @ old, torch.eye(METRIC, dtype=torch.float64))
    returned = loss.orthonormalize_()
    assert returned is loss
    L = loss.L.detach()
    torch.testing.assert_close(L.T @ L, torch.eye(METRIC, dtype=torch.float64))
    # Same column space: projecting the old columns on span(L) gives them back.
    torch.testing.assert_close(L @ (L.T @ old), old)
    assert loss(x, y).item() == pytest.approx(before, rel=1e-9)


def above_ln2(loss: OPMLLoss, x: torch.Tensor, y: torch.Tensor) -> float:
    """The loss minus its floor ln 2, where the differences between variants show."""
    return loss(x, y).item() - math.log(2)


def test_orthogonal_loss_depends_only_on_the_span_of_L():
    x, y = make_batch(LABEL_SETS[1], 7)
    # alpha = 20 degrees keeps m_i large enough that the value is not ln 2 to 3 digits.
    loss = build(7, margin=WIDE, alpha_deg=20.0)
    free = build(7, margin=WIDE, alpha_deg=20.0, orthogonal=False)
    before, before_free = above_ln2(loss, x, y), above_ln2(free, x, y)
    mixing = torch.tensor([[2.0, 0.5, 0.0], [0.0, 1.0, -0.3], [0.1, 0.0, 0.7]], dtype=torch.float64)
    with torch.no_grad():
        loss.L.copy_(loss.L @ mixing)
        free.L.copy_(free.L @ mixing)
    assert above_ln2(loss, x, y) == pytest.approx(before, rel=1e-9)
    assert above_ln2(free, x, y) != pytest.approx(before_free, rel=0.05)


def test_ablations_change_the_value():
    x, y = make_batch(LABEL_SETS[0], 8)
    settings = {"margin": WIDE, "alpha_deg": 20.0}
    full = above_ln2(build(8, **settings), x, y)
    unweighted = above_ln2(build(8, weighted=False, **settings), x, y)
    free = above_ln2(build(8, orthogonal=False, **settings), x, y)
    assert unweighted != pytest.approx(full, rel=0.05)
    assert free != pytest.approx(full, rel=0.05)


def test_initialisation_is_seeded_orthonormal_and_R_equals_L():
    first, second = OPMLLoss(8, metric_dim=4, seed=3), OPMLLoss(8, metric_dim=4, seed=3)
    assert torch.equal(first.L, second.L)
    assert not torch.equal(first.L, OPMLLoss(8, metric_dim=4, seed=4).L)
    torch.testing.assert_close(first.L.T @ first.L, torch.eye(4), atol=1e-6, rtol=0)
    assert torch.equal(first.R, first.L)
    assert first.last_mean_margin_term is None and first.last_mean_weight is None


@pytest.mark.parametrize(
    "labels", [[2] * 6, [0, 1, 2, 3], [1]], ids=["one-class", "distinct", "one"]
)
def test_no_triplet_gives_zero_that_backpropagates(labels):
    x, y = make_batch(labels, 9)
    loss = build(9, margin=WIDE)
    value = loss(x, y)
    assert value.item() == 0.0 and not math.copysign(1.0, value.item()) < 0
    value.backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert loss.R.grad is not None and loss.L.grad is not None
    assert loss.last_num_triplets == 0 and loss.last_mean_margin_term is None


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="metric_dim"):
        OPMLLoss(4, metric_dim=5)
    with pytest.raises(ValueError, match="alpha_deg"):
        OPMLLoss(4, metric_dim=2, alpha_deg=90.0)
    with pytest.raises(ValueError, match="margin"):
        OPMLLoss(4, metric_dim=2, margin=0.0)
    with pytest.raises(ValueError, match="embedding_dim=4"):
        OPMLLoss(4, metric_dim=2)(torch.randn(3, 5), torch.tensor([0, 0, 1]))
    loss = build_loss("opml", embedding_dim=6, metric_dim=2, alpha_deg=30.0)
    assert loss.L.shape == (6, 2) and loss.alpha_deg == 30.0


def test_gradient_descent_lowers_the_margin_term_and_separates_the_classes():
    """Training must lower mean m_i (the goal), not only reach ln 2 through w -> 0."""
    data = two_class_subclusters(n=100, std=6.0, seed=0)  # overlapping classes
    assert loo_1nn_accuracy(data.x, data.labels) < 0.9
    points = torch.tensor(0.1 * data.x, requires_grad=True)
    labels = torch.tensor(data.labels)
    loss = OPMLLoss(embedding_dim=2, metric_dim=2).double()
    optimiser = torch.optim.Adam([points, *loss.parameters()], lr=0.05)
    start = loss(points, labels).item()
    start_margin = loss.last_mean_margin_term
    descend(loss, points, labels, 150, optimiser, after_step=loss.orthonormalize_)
    end = loss(points, labels).item()
    assert end < start
    assert end >= math.log(2) - 1e-12  # softplus of a non-negative number
    assert loss.last_mean_margin_term < 0.01 * start_margin
    assert loo_1nn_accuracy(points.detach().numpy(), data.labels) >= 0.95


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("orthogonal", [True, False])
def test_half_precision_loss_matches_float64_of_its_values(dtype, orthogonal):
    """A loss converted with ``.to(dtype)`` (a model and loss trained in bfloat16): its ``L`` is
    decomposed in float32 (torch has no half-precision QR), and the value and the gradients of
    the embeddings, ``R`` and ``L`` match float64 on the same rounded values."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(256, 64, generator=generator).to(dtype).requires_grad_(True)
    y = torch.arange(256) % 16
    loss = OPMLLoss(64, metric_dim=32, alpha_deg=30.0, margin=WIDE, orthogonal=orthogonal)
    loss = loss.to(dtype)
    exact = copy.deepcopy(loss).double()
    x64 = x.detach().double().requires_grad_(True)
    value, value64 = loss(x, y), exact(x64, y)
    value.backward()
    value64.backward()
    # The semi-hard window may take or leave a triplet at its edge (1 of 58,000 here).
    assert value.item() == pytest.approx(value64.item(), rel=1e-4)
    for low, high in [(x, x64), (loss.R, exact.R), (loss.L, exact.L)]:
        assert low.grad.dtype == dtype
        assert relative_error(low.grad, high.grad) < 1e-2
    loss.orthonormalize_()
    metric = loss.L.detach().double()  # (64, 32), orthonormal to the dtype's rounding
    assert loss.L.dtype == dtype
    assert (metric.T @ metric - torch.eye(32, dtype=torch.float64)).abs().max() < 2e-2
