"""In-batch triplet mining against brute-force enumeration and pytorch-metric-learning's miners."""

from __future__ import annotations

import pytest
import torch
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import miners as pml_miners

from clusterable.losses._pairs import squared_distances
from clusterable.mining import (
    all_triplets,
    batch_hard_triplets,
    mine_triplets,
    positive_pairs,
    semi_hard_triplets,
)

SEEDS = [0, 1, 2, 3]


def random_batch(seed: int, n: int = 15) -> tuple[torch.Tensor, torch.Tensor]:
    """Squared distances of random points, labels with repeats and two singletons."""
    generator = torch.Generator().manual_seed(seed)
    points = torch.randn(n, 3, generator=generator, dtype=torch.float64)
    labels = torch.cat([torch.randint(0, 3, (n - 2,), generator=generator), torch.tensor([7, 8])])
    return torch.cdist(points, points).square(), labels


def as_set(triplets: tuple[torch.Tensor, ...]) -> set[tuple[int, ...]]:
    rows = list(zip(*(t.tolist() for t in triplets), strict=True))
    assert len(rows) == len(set(rows)), "a triplet was mined twice"
    return set(rows)


def brute_force(distances: torch.Tensor, labels: torch.Tensor, rule: str, margin: float = 0.0):
    n = len(labels)
    y, d = labels.tolist(), distances.tolist()
    found = set()
    for a in range(n):
        for p in range(n):
            if p == a or y[p] != y[a]:
                continue
            for k in range(n):
                if y[k] == y[a]:
                    continue
                if rule == "all" or d[a][p] < d[a][k] < d[a][p] + margin:
                    found.add((a, p, k))
    return found


@pytest.mark.parametrize("seed", SEEDS)
def test_positive_pairs_are_every_ordered_same_label_pair(seed):
    _, labels = random_batch(seed)
    y = labels.tolist()
    expected = {(i, j) for i in range(len(y)) for j in range(len(y)) if i != j and y[i] == y[j]}
    assert as_set(positive_pairs(labels)) == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_all_triplets_equal_brute_force(seed):
    distances, labels = random_batch(seed)
    assert as_set(all_triplets(labels)) == brute_force(distances, labels, "all")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("margin", [0.2, 1.0, 5.0])
def test_semi_hard_equal_brute_force_and_satisfy_the_inequality(seed, margin):
    distances, labels = random_batch(seed)
    anchor, positive, negative = semi_hard_triplets(distances, labels, margin)
    mined = as_set((anchor, positive, negative))
    assert mined == brute_force(distances, labels, "semi-hard", margin)
    assert mined, "the case should mine something"
    d_ap, d_an = distances[anchor, positive], distances[anchor, negative]
    assert (d_ap < d_an).all() and (d_an < d_ap + margin).all()
    assert (labels[anchor] == labels[positive]).all() and (anchor != positive).all()
    assert (labels[anchor] != labels[negative]).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_semi_hard_equal_pytorch_metric_learning_miner(seed):
    generator = torch.Generator().manual_seed(seed)
    points = torch.randn(20, 4, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 4, (20,), generator=generator)
    distance = pml_distances.LpDistance(power=2, normalize_embeddings=False)
    miner = pml_miners.TripletMarginMiner(
        margin=0.5, type_of_triplets="semihard", distance=distance
    )
    ours = semi_hard_triplets(torch.cdist(points, points).square(), labels, 0.5)
    assert as_set(ours) == as_set(miner(points, labels))


@pytest.mark.parametrize("seed", SEEDS)
def test_batch_hard_picks_farthest_positive_and_nearest_negative(seed):
    distances, labels = random_batch(seed)
    y, d = labels.tolist(), distances.tolist()
    expected = set()
    for a in range(len(y)):
        positives = [p for p in range(len(y)) if p != a and y[p] == y[a]]
        negatives = [k for k in range(len(y)) if y[k] != y[a]]
        if positives and negatives:
            expected.add(
                (a, max(positives, key=lambda p: d[a][p]), min(negatives, key=lambda k: d[a][k]))
            )
    assert as_set(batch_hard_triplets(distances, labels)) == expected
    assert len(expected) == len(y) - 2  # the two singletons have no positive


@pytest.mark.parametrize("strategy", ["all", "semi-hard", "batch-hard"])
@pytest.mark.parametrize("labels", [[3] * 5, [0, 1, 2, 3, 4]], ids=["one-class", "distinct"])
def test_nothing_to_mine_gives_empty_long_tensors(strategy, labels):
    labels = torch.tensor(labels)
    distances = torch.rand(5, 5, dtype=torch.float64)
    triplets = mine_triplets(strategy, distances, labels, margin=10.0)
    assert all(t.dtype == torch.long and t.numel() == 0 for t in triplets)


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_dispatcher_routes_each_strategy(seed):
    distances, labels = random_batch(seed)
    assert as_set(mine_triplets("all", distances, labels, 0.3)) == as_set(all_triplets(labels))
    assert as_set(mine_triplets("semi-hard", distances, labels, 0.3)) == as_set(
        semi_hard_triplets(distances, labels, 0.3)
    )
    assert as_set(mine_triplets("batch-hard", distances, labels, 0.3)) == as_set(
        batch_hard_triplets(distances, labels)
    )


def test_unknown_strategy_names_the_choices():
    distances, labels = random_batch(0)
    with pytest.raises(ValueError, match="choose one of: all, semi-hard, batch-hard"):
        mine_triplets("hardest", distances, labels, 0.2)


@pytest.mark.parametrize("strategy", ["all", "semi-hard", "batch-hard"])
def test_labels_of_shape_n_by_1_are_refused_naming_the_fix(strategy):
    """A column of labels (``(n, 1)``, as a data loader may stack them) broadcast into a wrong
    ``(n, n)`` comparison: batch-hard returned 2-D "triplets", the others failed unpacking."""
    distances, labels = random_batch(0)
    with pytest.raises(ValueError, match=r"labels must be 1-D.*labels\.reshape\(-1\)"):
        mine_triplets(strategy, distances, labels[:, None], 0.3)


@pytest.mark.parametrize("strategy", ["all", "semi-hard", "batch-hard"])
def test_labels_that_are_no_integer_tensor_are_refused(strategy):
    distances, labels = random_batch(0)
    with pytest.raises(TypeError, match=r"torch\.as_tensor"):
        mine_triplets(strategy, distances, labels.tolist(), 0.3)
    with pytest.raises(ValueError, match=r"integer class ids.*\.long\(\)"):
        mine_triplets(strategy, distances, labels.float(), 0.3)


@pytest.mark.parametrize("strategy", ["semi-hard", "batch-hard"])
def test_distances_of_another_batch_size_are_refused(strategy):
    distances, labels = random_batch(0)
    with pytest.raises(ValueError, match=r"distances must have shape \(13, 13\)"):
        mine_triplets(strategy, distances, labels[:13], 0.3)
    references = torch.tensor([0, 1])
    with pytest.raises(ValueError, match=r"distances must have shape \(15, 17\)"):
        mine_triplets(strategy, distances, labels, 0.3, ref_labels=references)


def test_mining_does_not_track_gradient():
    distances, labels = random_batch(1)
    distances.requires_grad_(True)
    for triplets in (
        semi_hard_triplets(distances, labels, 1.0),
        batch_hard_triplets(distances, labels),
    ):
        assert all(not t.requires_grad for t in triplets)


@pytest.mark.parametrize("strategy", ["semi-hard", "batch-hard"])
def test_float32_mining_equals_float64_near_duplicates_far_from_the_origin(strategy):
    """Issue 9: mined from the losses' distances, float32 picks the triplets float64 picks on the
    same values, with a cross-class pair 4e-4 apart in a batch 1e3 from the origin."""
    generator = torch.Generator().manual_seed(0)
    points = torch.randn(40, 5, generator=generator, dtype=torch.float64)
    labels = torch.arange(40) % 8
    points[1] = points[0] + 4e-4 / 5**0.5  # label 1 next to label 0
    points = (points + 1e3).float()
    mined = [
        as_set(mine_triplets(strategy, squared_distances(points.to(dtype)), labels, margin=1.0))
        for dtype in (torch.float32, torch.float64)
    ]
    assert mined[0] == mined[1]
