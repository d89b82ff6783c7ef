"""The shared tensor helpers against brute-force loops, and in float32 against float64."""

from __future__ import annotations

import math

import pytest
import torch

from clusterable.losses import _pairs
from clusterable.losses._pairs import (
    euclidean_distances,
    masked_logsumexp,
    masked_softmax,
    partner_distances,
    partner_masks,
    squared_distances,
    unit_rows,
)


def test_distances_match_a_loop():
    x = torch.randn(7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    expected = torch.tensor(
        [[float(((a - b) ** 2).sum()) for b in x] for a in x], dtype=torch.float64
    )
    torch.testing.assert_close(squared_distances(x), expected, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(euclidean_distances(x), expected.sqrt())
    assert (squared_distances(x).diagonal() == 0).all()


def test_distance_gradient_is_finite_for_identical_points():
    x = torch.ones(4, 3, dtype=torch.float64, requires_grad=True)
    euclidean_distances(x).sum().backward()
    assert torch.isfinite(x.grad).all()


def loop_distance_gradient(x, y, weights):
    """``d/dx_i sum_ij w_ij ||x_i - y_j||`` (and for y), by a loop: 0 where two points coincide."""
    grad_x, grad_y = torch.zeros_like(x), torch.zeros_like(y)
    for i in range(len(x)):
        for j in range(len(y)):
            difference = x[i] - y[j]
            norm = difference.norm()
            if norm > 0:
                grad_x[i] += weights[i, j] * difference / norm
                grad_y[j] -= weights[i, j] * difference / norm
    return grad_x, grad_y


@pytest.mark.parametrize("with_references", [False, True])
def test_every_zero_distance_has_gradient_zero_and_no_nan(with_references):
    """Duplicates at the batch's centre (whose Gram-form norms are 0), duplicates away from it,
    and a reference equal to a batch item: each zero distance contributes 0, the rest their
    ``(x_i - y_j) / D_ij``."""
    x = torch.tensor(
        [[1.0, 1.0], [1.0, 1.0], [3.0, -1.0], [3.0, -1.0], [-1.0, 3.0], [-1.0, 3.0]],
        dtype=torch.float64,
    )  # the mean is (1, 1): rows 0 and 1 are at the centre
    y = torch.tensor([[3.0, -1.0], [0.0, 2.0]], dtype=torch.float64) if with_references else None
    leaves = [x.clone().requires_grad_(True)] + (
        [y.clone().requires_grad_(True)] if y is not None else []
    )
    distances = euclidean_distances(*leaves)
    weights = torch.rand(
        distances.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    gradients = torch.autograd.grad((weights * distances).sum(), leaves)
    expected_x, expected_y = loop_distance_gradient(x, x if y is None else y, weights)
    if y is None:
        expected_x = expected_x + expected_y  # x is both ends of every pair
    assert all(torch.isfinite(g).all() for g in gradients)
    torch.testing.assert_close(gradients[0], expected_x)
    if y is not None:
        torch.testing.assert_close(gradients[1], expected_y)


def test_partner_masks():
    positive, negative = partner_masks(torch.tensor([0, 0, 1]))
    assert positive.tolist() == [[False, True, False], [True, False, False], [False, False, False]]
    assert negative.tolist() == [[False, False, True], [False, False, True], [True, True, False]]


def test_partner_masks_with_references_exclude_only_the_anchor_itself():
    positive, negative = partner_masks(torch.tensor([0, 1]), torch.tensor([0, 0, 1]))
    assert positive.int().tolist() == [[0, 0, 1, 1, 0], [0, 0, 0, 0, 1]]
    assert negative.int().tolist() == [[0, 1, 0, 0, 1], [1, 0, 1, 1, 0]]


def test_partner_distances_are_the_batch_block_then_the_reference_block():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(5, 3, dtype=torch.float64, generator=generator)
    references = torch.randn(4, 3, dtype=torch.float64, generator=generator)
    partners = torch.cat([x, references])
    expected = torch.tensor(
        [[float(((a - b) ** 2).sum()) for b in partners] for a in x], dtype=torch.float64
    )
    got = partner_distances(x, references, squared=True)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(partner_distances(x, references), expected.sqrt())
    assert torch.equal(partner_distances(x), euclidean_distances(x))


def test_masked_logsumexp_matches_a_loop_and_handles_empty_rows():
    x = torch.tensor([[1000.0, 1.0, -3.0], [2.0, 5.0, 7.0]], dtype=torch.float64)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    x.requires_grad_()
    out = masked_logsumexp(x, mask, dim=1, empty=-5.0)
    expected_first = 1000.0 + math.log(1.0 + math.exp(-1003.0))
    torch.testing.assert_close(
        out.detach(), torch.tensor([expected_first, -5.0], dtype=torch.float64)
    )
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert x.grad[1].abs().sum() == 0 and x.grad[0, 1] == 0


def values_and_mask(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Generator]:
    """``(5, 6)`` float64 values needing a gradient, a random mask with an empty row and an
    empty column, and the generator, to draw more from."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(5, 6, generator=generator, dtype=torch.float64, requires_grad=True)
    mask = torch.rand(5, 6, generator=generator) < 0.5
    mask[2] = False
    mask[:, 3] = False
    return x, mask, generator


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_masked_logsumexp_gradient_is_the_masked_softmax(dim):
    """The closed-form backward (the slice's softmax weights, saved in the forward pass) against
    autograd through torch.logsumexp of the kept entries, empty slices and 0-d grads included."""
    x, mask, generator = values_and_mask(seed=0)
    out = masked_logsumexp(x, mask, dim=dim)
    weights = torch.rand(out.shape, generator=generator, dtype=torch.float64)
    (grad,) = torch.autograd.grad((out * weights).sum(), x)
    kept = x.masked_fill(~mask, float("-inf"))
    reference = torch.logsumexp(kept, dim=dim)
    reference = torch.where(mask.any(dim=dim), reference, 0.0)
    (expected,) = torch.autograd.grad((reference * weights).sum(), x)
    torch.testing.assert_close(grad, torch.nan_to_num(expected), rtol=1e-12, atol=1e-14)
    assert torch.autograd.gradcheck(lambda t: masked_logsumexp(t, mask, dim=dim), (x,))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_masked_softmax_and_its_gradient_match_autograd_through_torch_softmax(dim):
    x, mask, generator = values_and_mask(seed=2)
    out = masked_softmax(x, mask, dim=dim)
    reference = torch.nan_to_num(torch.softmax(x.masked_fill(~mask, float("-inf")), dim=dim))
    torch.testing.assert_close(out, reference, rtol=1e-12, atol=1e-15)
    weights = torch.rand(out.shape, generator=generator, dtype=torch.float64)
    (grad,) = torch.autograd.grad((out * weights).sum(), x)
    (expected,) = torch.autograd.grad((reference * weights).sum(), x)
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-14)
    assert torch.autograd.gradcheck(lambda t: masked_softmax(t, mask, dim=dim), (x,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_masked_logsumexp_leaves_no_subnormal_weight(dtype):
    """A weight below the dtype's smallest normal number is taken as 0 (a CPU computes with
    subnormals tens of times slower, and the losses multiply these weights into (n, n)
    products); the value and the other weights are float64's to the last units."""
    tiny = torch.finfo(dtype).tiny
    # exp of each gap: 1, 3.7e-44 (subnormal in float32), ~1e-310 (subnormal in float64), 0.
    gaps = [0.0, -100.0, -713.0, -800.0, -1.0]
    x = torch.tensor([gaps], dtype=dtype, requires_grad=True)
    mask = torch.ones(1, 5, dtype=torch.bool)
    out = masked_logsumexp(x, mask, dim=1)
    (weights,) = torch.autograd.grad(out.sum(), x)
    assert not ((weights != 0) & (weights.abs() < tiny)).any(), weights
    exact = torch.tensor([gaps], dtype=torch.float64)
    torch.testing.assert_close(out.double(), torch.logsumexp(exact, dim=1), rtol=0, atol=1e-6)
    kept = exact.softmax(dim=1)
    kept[kept < tiny * 5] = 0.0
    torch.testing.assert_close(weights.double(), kept, rtol=2e-7, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_entry_weights_are_the_masked_weights_of_a_sparse_mask(dtype):
    """The gathered form of a mask of a few entries a row gives the dense masked softmax's
    weights and log-sums: an empty row (log-sum 0), a row with one entry, subnormal weights
    taken as 0, and logits far from 0."""
    generator = torch.Generator().manual_seed(3)
    x = (torch.randn(6, 9, generator=generator, dtype=torch.float64) * 40 - 300).to(dtype)
    x[2, 4] = x[2, 1] - 200.0  # exp(-200): subnormal in float32 beside x[2, 1]
    mask = torch.rand(6, 9, generator=generator) < 0.3
    mask[0] = False  # no entry
    mask[1] = False
    mask[1, 5] = True  # one entry
    mask[2, [1, 4]] = True
    rows, cols = mask.nonzero(as_tuple=True)
    weights, log_sums = _pairs.entry_weights(x[rows, cols], rows, 6, 9)
    dense_weights, dense_log_sums = _pairs._masked_weights(x, mask, dim=1)
    torch.testing.assert_close(weights, dense_weights[rows, cols], rtol=4e-7, atol=0)
    torch.testing.assert_close(log_sums, dense_log_sums.squeeze(1))
    assert log_sums[0] == 0 and weights[(rows == 1).nonzero()] == 1
    if dtype == torch.float32:
        assert weights[(rows == 2) & (cols == 4)] == 0


# ---------------------------------------------------------------- float32 accuracy (issue 9)


def float32_and_float64(function, *inputs: torch.Tensor, seed: int = 0):
    """Values and input gradients of ``(w * function(*inputs)).sum()``, w random, in both dtypes.

    The float64 pass runs on the float32 values upcast: only the arithmetic differs.
    """
    results, weights = [], None
    for dtype in (torch.float32, torch.float64):
        leaves = [t.detach().to(dtype).requires_grad_(True) for t in inputs]
        out = function(*leaves)
        if weights is None:
            weights = torch.rand(out.shape, generator=torch.Generator().manual_seed(seed))
        gradients = torch.autograd.grad((weights.to(dtype) * out).sum(), leaves)
        results.append((out.detach(), gradients))
    return results


def relative(approximate: torch.Tensor, exact: torch.Tensor) -> float:
    return float((approximate.double() - exact).abs().max() / exact.abs().max())


def near_duplicates(offset: float = 0.0) -> torch.Tensor:
    """A 40 x 5 float32 batch whose items 0 and 1 are 4e-4 apart, shifted by ``offset``."""
    x = torch.randn(40, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x[1] = x[0] + 4e-4 * torch.nn.functional.normalize(torch.ones(5, dtype=torch.float64), dim=0)
    return (x + offset).float()


@pytest.mark.parametrize("offset", [0.0, 1e3])
@pytest.mark.parametrize("function", [squared_distances, euclidean_distances])
def test_distances_and_gradients_are_float32_exact(function, offset):
    x = near_duplicates(offset)
    (d32, (g32,)), (d64, (g64,)) = float32_and_float64(function, x)
    # Every entry to its own relative precision, the near pair's 1.6e-7 squared distance included.
    off_diagonal = ~torch.eye(40, dtype=torch.bool)
    pair_errors = (d32.double() - d64).abs()[off_diagonal] / d64[off_diagonal]
    assert float(pair_errors.max()) < 1e-5
    assert relative(g32, g64) < 1e-5


def test_distances_to_a_reference_set_are_float32_exact():
    x = near_duplicates(1e3)
    references = torch.cat([x[:1] + 1e-3, x[5:8] + 0.5]).detach()  # (4, d), one near x_0
    (d32, grads32), (d64, grads64) = float32_and_float64(squared_distances, x, references)
    assert float(((d32.double() - d64).abs() / d64).max()) < 1e-5
    for g32, g64 in zip(grads32, grads64, strict=True):
        assert relative(g32, g64) < 1e-5


def test_near_pairs_in_many_blocks(monkeypatch):
    """Two collapsed clusters (every within-cluster pair near) go through the blocks 4 pairs at a
    time."""
    monkeypatch.setattr(_pairs, "DIFFERENCE_BLOCK", 16)
    centres = torch.tensor([[1.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    noise = 1e-4 * torch.randn(
        30, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    x = (1e3 + centres.repeat(15, 1) + noise).float()  # (30, 4)
    (d32, (g32,)), (d64, (g64,)) = float32_and_float64(euclidean_distances, x)
    assert relative(d32, d64) < 1e-5
    assert relative(g32, g64) < 1e-5


@pytest.mark.parametrize("scale", [1e-19, 1e-30, 1e19, 1e30])
def test_euclidean_distances_keep_their_geometry_at_any_scale(scale):
    """D is 1-homogeneous: D(s x) = s D(x), and the gradient of sum w D is scale-free."""
    x = torch.randn(9, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    (d_unit, (g_unit,)), _ = float32_and_float64(euclidean_distances, x)
    (d_scaled, (g_scaled,)), _ = float32_and_float64(euclidean_distances, x * scale)
    assert relative(d_scaled.double() / scale, d_unit.double()) < 1e-6
    assert relative(g_scaled, g_unit.double()) < 1e-6


@pytest.mark.parametrize(
    ("scale", "message"),
    [(1e20, "beyond the torch.float32 range"), (1e-25, "cannot be told apart")],
)
def test_unrepresentable_squared_distances_raise(scale, message):
    x = (scale * torch.randn(5, 3, generator=torch.Generator().manual_seed(3))).float()
    with pytest.raises(ValueError, match=f"{message}.*float64"):
        squared_distances(x)


@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_unit_rows_at_any_scale(scale):
    x = torch.tensor([[3.0, -4.0], [0.0, 0.0], [1.0, 1.0]])
    expected = torch.nn.functional.normalize(x, dim=1)
    torch.testing.assert_close(unit_rows((x.double() * scale).float()), expected)
