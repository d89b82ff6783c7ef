"""Semi-hard triplets counted and listed from sorted rows (``losses/_triplets.py``).

References: :func:`clusterable.mining.semi_hard_triplets` (the ``(|P|, n)`` mask rule the helpers
replace), a brute-force triple loop for the counts, and the old gathered-triplet triplet loss.
The batches have ties (duplicated points, hence equal distances) and windows that end exactly
on a distance, where ``<`` and ``<=`` differ.
"""

from __future__ import annotations

import pytest
import torch

from clusterable.losses import TripletMarginLoss
from clusterable.losses._pairs import partner_masks, squared_distances
from clusterable.losses._triplets import semi_hard_triplet_list, violation_counts
from clusterable.mining import mine_triplets, semi_hard_triplets

SEEDS = [0, 1, 2, 3]


def tied_batch(seed: int, n: int = 24, references: int = 0):
    """Integer points (many equal distances), some duplicated; labels of 4 classes."""
    generator = torch.Generator().manual_seed(seed)
    points = torch.randint(0, 3, (n + references, 3), generator=generator).double()
    points[1] = points[0]
    labels = torch.randint(0, 4, (n + references,), generator=generator)
    distances = squared_distances(points[:n], points)  # (n, n + m)
    ref_labels = labels[n:] if references else None
    positive, negative = partner_masks(labels[:n], ref_labels)
    return distances, labels[:n], ref_labels, positive, negative


def brute_force_counts(distances, positive, negative, margin, semi_hard):
    as_positive = torch.zeros_like(distances, dtype=torch.int64)
    as_negative = torch.zeros_like(as_positive)
    for a in range(distances.shape[0]):
        for p in positive[a].nonzero().flatten().tolist():
            for q in negative[a].nonzero().flatten().tolist():
                d_ap, d_aq = distances[a, p], distances[a, q]
                if d_aq < d_ap + margin and (not semi_hard or d_ap < d_aq):
                    as_positive[a, p] += 1
                    as_negative[a, q] += 1
    return as_positive, as_negative


@pytest.mark.parametrize("semi_hard", [True, False])
@pytest.mark.parametrize("margin", [1.0, 2.0, 0.5])  # 1.0 and 2.0 end windows on distances
@pytest.mark.parametrize("seed", SEEDS)
def test_counts_match_a_triple_loop(seed, margin, semi_hard):
    distances, _, _, positive, negative = tied_batch(seed, references=5)
    counts = violation_counts(distances, positive, negative, margin, semi_hard=semi_hard)
    expected = brute_force_counts(distances, positive, negative, margin, semi_hard)
    assert torch.equal(counts[0].long(), expected[0])
    assert torch.equal(counts[1].long(), expected[1])


@pytest.mark.parametrize("references", [0, 5])
@pytest.mark.parametrize("margin", [1.0, 0.5])
@pytest.mark.parametrize("seed", SEEDS)
def test_listed_triplets_are_the_miners(seed, margin, references):
    distances, labels, ref_labels, positive, negative = tied_batch(seed, references=references)
    listed = torch.stack(semi_hard_triplet_list(distances, positive, negative, margin), 1)
    mined = torch.stack(semi_hard_triplets(distances, labels, margin, ref_labels), 1)
    assert listed.shape == mined.shape and listed.shape[0] > 0
    # Same set; ordered by anchor like the miner (by distance within an anchor).
    assert torch.equal(torch.unique(listed, dim=0), torch.unique(mined, dim=0))
    assert torch.equal(listed[:, 0], mined[:, 0])


def test_an_empty_window_lists_nothing():
    distances, _, _, positive, negative = tied_batch(0)
    anchor, partner, negative_index = semi_hard_triplet_list(distances, positive, negative, 1e-30)
    assert anchor.numel() == partner.numel() == negative_index.numel() == 0


def gathered_triplet_loss(loss: TripletMarginLoss, embeddings, labels):
    """The loss as it was computed before the counts: on the listed triplets, by autograd."""
    points = torch.nn.functional.normalize(embeddings, dim=1) if loss.normalize else embeddings
    distances = squared_distances(points)
    anchor, positive, negative = mine_triplets(loss.mining, distances, labels, loss.margin)
    hinge = (distances[anchor, positive] - distances[anchor, negative] + loss.margin).clamp_min(0)
    return hinge.sum() / max(hinge.numel(), 1)


@pytest.mark.parametrize("mining", ["semi-hard", "all"])
@pytest.mark.parametrize("seed", SEEDS)
def test_loss_from_counts_equals_the_loss_on_listed_triplets(seed, mining):
    """Value and gradient of the count form against autograd on the gathered triplets, on a
    batch of float32 classes of 8 (the benchmark's shape, smaller)."""
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(64, 16, generator=generator, requires_grad=True)
    labels = torch.arange(64) % 8
    loss = TripletMarginLoss(margin=0.2, mining=mining)
    value = loss(embeddings, labels)
    (grad,) = torch.autograd.grad(value, embeddings)
    expected = gathered_triplet_loss(loss, embeddings, labels)
    (expected_grad,) = torch.autograd.grad(expected, embeddings)
    assert value.item() == pytest.approx(expected.item(), rel=1e-5)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-7)


def largest_allocation(step) -> int:
    """Bytes of the largest allocation one operation makes in one call of ``step``, on the CPU
    (all of an operation's outputs together: a sort's values and indices are one)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    return max(event.cpu_memory_usage for event in prof.events())


@pytest.mark.parametrize("mining", ["semi-hard", "all"])
def test_memory_is_quadratic_not_cubic(mining):
    """Two classes of 96: the miner's (|P|, n) mask is n^3 / 2 elements (3.5 MB as bool, 14 MB
    as distances), and the triplets 430 thousand (all) or tens of thousands (semi-hard). The
    count form allocates nothing larger than an (n, n) sort's values and indices, 12 n^2 bytes."""
    n = 192
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(n, 8, generator=generator, requires_grad=True)
    labels = torch.arange(n) % 2
    loss = TripletMarginLoss(margin=0.2, mining=mining)

    def step():
        loss(embeddings, labels).backward()

    assert largest_allocation(step) <= 12 * n * n
