"""The shared tensor helpers against brute-force loops."""

from __future__ import annotations

import math

import torch

from clusterable.losses._pairs import (
    euclidean_distances,
    label_masks,
    masked_logsumexp,
    squared_distances,
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


def test_label_masks():
    positive, negative = label_masks(torch.tensor([0, 0, 1]))
    assert positive.tolist() == [[False, True, False], [True, False, False], [False, False, False]]
    assert negative.tolist() == [[False, False, True], [False, False, True], [True, True, False]]


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
