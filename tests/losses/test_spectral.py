"""DSCL loss (Law et al., ICML 2017, Eq. 8-10) against independent references.

References: the paper's formula ``k - tr(C F F^+)`` transcribed entry by entry with numpy's
pseudo-inverse; autograd through ``torch.linalg.pinv``; central finite differences; sklearn 1-NN.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from clusterable.data import load_dataset, two_class_subclusters
from clusterable.losses import SpectralClusteringLoss, build_loss
from clusterable.losses.spectral import _SpectralLossFunction
from clusterable.models import build_model
from clusterable.train import TrainConfig, Trainer

from _learning import PlainDescent, descend, loo_1nn_accuracy

SEEDS = [0, 1, 2, 3]


def reference_value(features: np.ndarray, labels: np.ndarray) -> float:
    """Eq. (10), ``k - tr(C F F^+)``, with ``C_ij = 1 / n_c`` when ``y_i = y_j = c`` (``Y Y^+``)."""
    n, d = features.shape
    counts = {c: int((labels == c).sum()) for c in set(labels.tolist())}
    singular = np.linalg.svd(features, compute_uv=False)
    tolerance = max(n, d) * np.finfo(np.float64).eps  # relative to max(s), as numpy's rcond
    projection = features @ np.linalg.pinv(features, rcond=tolerance)  # F F^+
    trace = 0.0
    for i in range(n):
        for j in range(n):
            if labels[i] == labels[j]:
                trace += projection[j, i] / counts[labels[i]]
    assert singular.max() > 0
    return len(counts) - trace


def autograd_pinv_loss(features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The same loss differentiated by autograd through ``torch.linalg.pinv`` (dense ``C``)."""
    onehot = torch.nn.functional.one_hot(torch.unique(labels, return_inverse=True)[1]).to(features)
    clustering = onehot @ torch.linalg.pinv(onehot)  # C = Y Y^+
    return onehot.shape[1] - torch.trace(clustering @ features @ torch.linalg.pinv(features))


def random_batch(seed: int, n: int = 14, d: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 features and labels with repeated classes and singletons."""
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(n, d, generator=generator, dtype=torch.float64)
    repeated = torch.randint(0, 3, (n - 3,), generator=generator)
    labels = torch.cat([repeated, torch.tensor([7, 8, 9])])  # three singletons
    return features, labels


def loss_and_grad(features: torch.Tensor, labels: torch.Tensor) -> tuple[float, torch.Tensor]:
    features = features.detach().clone().requires_grad_(True)
    value = SpectralClusteringLoss()(features, labels)
    value.backward()
    return value.item(), features.grad


@pytest.mark.parametrize("seed", SEEDS)
def test_value_matches_paper_formula(seed):
    features, labels = random_batch(seed)
    value = SpectralClusteringLoss()(features, labels)
    assert value.dtype == torch.float64
    expected = reference_value(features.numpy(), labels.numpy())
    assert value.item() == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_gradient_matches_autograd_through_pinv(seed):
    features, labels = random_batch(seed)
    _, grad = loss_and_grad(features, labels)
    reference = features.clone().requires_grad_(True)
    autograd_pinv_loss(reference, labels).backward()
    torch.testing.assert_close(grad, reference.grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_gradient_matches_central_differences(seed):
    features, labels = random_batch(seed, n=9, d=3)
    _, grad = loss_and_grad(features, labels)
    step = 1e-6
    numeric = np.zeros(features.shape)
    for i in range(features.shape[0]):
        for j in range(features.shape[1]):
            plus, minus = features.clone(), features.clone()
            plus[i, j] += step
            minus[i, j] -= step
            numeric[i, j] = (
                reference_value(plus.numpy(), labels.numpy())
                - reference_value(minus.numpy(), labels.numpy())
            ) / (2 * step)
    np.testing.assert_allclose(grad.numpy(), numeric, rtol=1e-5, atol=1e-7)


def test_gradcheck_at_full_column_rank():
    features, labels = random_batch(5, n=10, d=4)
    features.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda f: SpectralClusteringLoss()(f, labels), (features,))


def test_gradient_is_the_true_one_not_the_rescaled_g():
    """dLoss/dF = -2 (I - F F^+) C (F^+)^T, written densely here (the loss avoids n x n)."""
    features, labels = random_batch(3)
    _, grad = loss_and_grad(features, labels)
    onehot = torch.nn.functional.one_hot(torch.unique(labels, return_inverse=True)[1]).double()
    clustering = onehot @ torch.linalg.pinv(onehot)
    pinv = torch.linalg.pinv(features)
    identity = torch.eye(features.shape[0], dtype=torch.float64)
    expected = -2 * (identity - features @ pinv) @ clustering @ pinv.T
    torch.testing.assert_close(grad, expected, rtol=1e-8, atol=1e-10)


def test_duplicate_columns_value_and_gradient():
    """F = [A, A] has rank d(A); F^+ = [A^+; A^+] / 2, so the gradient is [g_A, g_A] / 2."""
    reduced, labels = random_batch(4, n=12, d=3)
    duplicated = torch.cat([reduced, reduced], dim=1)  # (12, 6), rank 3
    value, grad = loss_and_grad(duplicated, labels)
    reduced_value, reduced_grad = loss_and_grad(reduced, labels)
    assert torch.isfinite(grad).all()
    assert value == pytest.approx(reference_value(duplicated.numpy(), labels.numpy()), rel=1e-9)
    assert value == pytest.approx(reduced_value, rel=1e-9)
    torch.testing.assert_close(
        grad, torch.cat([reduced_grad, reduced_grad], 1) / 2, atol=1e-9, rtol=1e-7
    )


def test_more_dimensions_than_items():
    """d > n: F F^+ = I, so tr(C) = k and the loss and its gradient vanish."""
    features, labels = random_batch(6, n=8, d=20)
    value, grad = loss_and_grad(features, labels)
    assert value == pytest.approx(0.0, abs=1e-10)
    assert value == pytest.approx(reference_value(features.numpy(), labels.numpy()), abs=1e-10)
    assert torch.isfinite(grad).all()
    assert grad.abs().max() < 1e-10


def test_value_is_k_when_features_are_orthogonal_to_class_indicators():
    generator = torch.Generator().manual_seed(0)
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 3])
    onehot = torch.nn.functional.one_hot(labels).double()  # (12, 4)
    residual = torch.eye(12, dtype=torch.float64) - onehot @ torch.linalg.pinv(onehot)
    features = residual @ torch.randn(12, 5, generator=generator, dtype=torch.float64)
    value, grad = loss_and_grad(features, labels)
    assert value == pytest.approx(4.0, rel=1e-9)
    assert torch.isfinite(grad).all()


def test_value_is_zero_when_features_span_class_indicators():
    labels = torch.tensor([3, 3, 1, 1, 1, 0, 5, 5])
    onehot = torch.nn.functional.one_hot(torch.unique(labels, return_inverse=True)[1]).double()
    assert loss_and_grad(onehot, labels)[0] == pytest.approx(0.0, abs=1e-12)
    mixing = torch.randn(4, 7, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    value, grad = loss_and_grad(onehot @ mixing, labels)  # each class at its own point
    assert value == pytest.approx(0.0, abs=1e-10)
    assert grad.abs().max() < 1e-9


@pytest.mark.parametrize("seed", SEEDS)
def test_value_lies_in_zero_k(seed):
    features, labels = random_batch(seed, n=20, d=2)
    value = float(SpectralClusteringLoss()(features, labels))
    k = len(set(labels.tolist()))
    assert 0.0 <= value <= k
    assert value >= k - 2 - 1e-12  # rank(F) = 2 caps the trace


def test_degenerate_batches():
    """One class: 1 - ||P_F 1||^2 / n (not 0: it still pulls the class together).

    Distinct labels: C = I, so the loss is n - rank(F) with a zero gradient.
    """
    features, _ = random_batch(0, n=8, d=3)
    one_class = torch.zeros(8, dtype=torch.long)
    value, grad = loss_and_grad(features, one_class)
    assert value == pytest.approx(reference_value(features.numpy(), one_class.numpy()), rel=1e-9)
    assert torch.isfinite(grad).all()
    distinct = torch.arange(8)
    value, grad = loss_and_grad(features, distinct)
    assert value == pytest.approx(8 - 3, rel=1e-9)
    assert grad.abs().max() < 1e-10
    value, grad = loss_and_grad(
        torch.ones(6, 4, dtype=torch.float64), torch.tensor([0, 0, 1, 1, 2, 2])
    )
    assert np.isfinite(value) and torch.isfinite(grad).all()
    value, grad = loss_and_grad(torch.zeros(4, 3, dtype=torch.float64), torch.tensor([0, 0, 1, 1]))
    assert value == pytest.approx(2.0) and torch.equal(grad, torch.zeros(4, 3, dtype=torch.float64))


def test_float32_matches_float64():
    features, labels = random_batch(2)
    value64, grad64 = loss_and_grad(features, labels)
    value32, grad32 = loss_and_grad(features.float(), labels)
    assert value32 == pytest.approx(value64, rel=1e-4)
    torch.testing.assert_close(grad32.double(), grad64, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_float32_through_the_gram_matrix_matches_float64_svd(seed, wide):
    """Below float64 the triplets come from the float64 Gram matrix of the thin side (n >= d:
    F^T F; n < d: F F^T). On a spread spectrum (singular values 1 to 1e-4, then two zeros), the
    float32 loss must cut the rank where a float64 SVD of the same values cuts it at float32's
    tolerance, and match that SVD's value and gradient."""
    generator = torch.Generator().manual_seed(seed)
    n, d = (12, 30) if wide else (40, 8)
    rank = min(n, d) - 2
    left, _ = torch.linalg.qr(torch.randn(n, rank, generator=generator, dtype=torch.float64))
    right, _ = torch.linalg.qr(torch.randn(d, rank, generator=generator, dtype=torch.float64))
    spectrum = torch.logspace(0, -4, rank, dtype=torch.float64)
    features = ((left * spectrum) @ right.T).float()  # (n, d), rank n - 2 or d - 2
    labels = torch.randint(0, 4, (n,), generator=generator)
    value32, grad32 = loss_and_grad(features, labels)
    _, classes, counts = torch.unique(labels, return_inverse=True, return_counts=True)
    reference = features.double().requires_grad_(True)
    value64 = _SpectralLossFunction.apply(
        reference, classes, counts.double(), torch.finfo(torch.float32).eps
    )
    value64.backward()
    assert value32 == pytest.approx(value64.detach().item(), rel=1e-5, abs=1e-6)
    error = (grad32.double() - reference.grad).abs().max() / reference.grad.abs().max()
    assert error < 1e-4, error


@pytest.mark.parametrize("seed", SEEDS)
def test_float16_rank_is_decided_at_half_precision(seed):
    """Issue 9: a rank-3 F given in float16 has rank 3; after the upcast, float32's tolerance would
    count its half-precision rounding as 3 more dimensions (1.76 instead of 2.83 for seed 0)."""
    generator = torch.Generator().manual_seed(seed)
    low_rank = torch.randn(12, 3, generator=generator, dtype=torch.float64)
    features = low_rank @ torch.randn(3, 6, generator=generator, dtype=torch.float64)  # (12, 6)
    labels = torch.arange(12) % 4
    loss = SpectralClusteringLoss()
    exact = float(loss(features, labels))
    assert float(loss(features.half(), labels)) == pytest.approx(exact, abs=1e-3)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("n", "d", "k"), [(256, 64, 16), (1260, 100, 100)])  # the paper's batch
def test_half_precision_input_gives_the_float64_loss_of_its_values(dtype, n, d, k):
    """A full-rank batch given in bfloat16 or float16 (autocast's output) has its full rank: at
    bfloat16's eps numpy's tolerance ``max(s) max(n, d) eps`` cut every singular value from
    ``max(n, d) = 128`` up, a loss of ``k`` and no gradient (16.0 against 12.02 for 256 x 64)."""
    generator = torch.Generator().manual_seed(n)
    features = torch.randn(n, d, generator=generator).to(dtype)  # (n, d)
    labels = torch.arange(n) % k
    loss = SpectralClusteringLoss()
    reference = features.double().requires_grad_(True)
    expected = loss(reference, labels)
    expected.backward()
    given = features.clone().requires_grad_(True)
    value = loss(given, labels)
    value.backward()
    assert given.grad.dtype == dtype
    assert float(value) == pytest.approx(float(expected), rel=1e-5)
    error = (given.grad.double() - reference.grad).abs().max() / reference.grad.abs().max()
    assert error < 1e-2, error  # the gradient rounded to the input's precision


def test_bf16_autocast_training_descends():
    """``--precision bf16`` (the default on CUDA) gives the loss the network's bfloat16 output:
    its steps must move the embedding (the rank cut to one or none, the loss stayed near ``k``:
    9.01, 9.005, 9.004 over these epochs, against 4.1, 2.9, 2.3 now)."""
    train = load_dataset("digits", split="train").subset(np.arange(512))
    model = build_model("mlp", train.input_shape, 16)
    config = TrainConfig(
        epochs=3, batch_size=128, eval_every=0, precision="bf16", device="cpu", progress=False
    )
    history = Trainer(model, SpectralClusteringLoss(), train, config=config).fit().history
    losses = [epoch["loss"] for epoch in history]  # k = 10 classes in every batch
    assert losses[-1] < 0.75 * losses[0], losses


def test_registered_without_arguments():
    assert isinstance(build_loss("spectral"), SpectralClusteringLoss)
    with pytest.raises(ValueError, match="none"):
        build_loss("spectral", margin=1.0)


def test_gradient_descent_on_free_points_separates_classes():
    data = two_class_subclusters(n=120, std=6.0, seed=0)
    points = torch.tensor(data.x / data.x.std(), requires_grad=True)  # (120, 2)
    labels = torch.as_tensor(data.labels)
    assert loo_1nn_accuracy(data.x, data.labels) < 0.9
    loss = SpectralClusteringLoss()
    first = loss(points, labels).item()
    descend(loss, points, labels, 60, PlainDescent([points], lr=5.0))
    assert loss(points, labels).item() < 0.1 * first
    assert loo_1nn_accuracy(points.detach().numpy(), data.labels) >= 0.95
