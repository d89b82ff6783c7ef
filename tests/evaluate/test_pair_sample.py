"""The pairs of a verification view: all of them up to the cap, a seeded stratified sample
beyond, each pair's distance as the evaluation measures it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from clusterable.evaluate.pair_sample import pair_distances


def blobs(n: int = 40, classes: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    return rng.normal(size=(n, 6)).astype(np.float32), labels


def as_dict(pairs) -> dict[tuple[int, int], tuple[float, bool]]:
    """Unordered pair -> (distance, same), checking that no pair comes twice."""
    keys = [tuple(sorted(p)) for p in zip(pairs.first.tolist(), pairs.second.tolist(), strict=True)]
    assert len(set(keys)) == len(keys)
    return dict(
        zip(keys, zip(pairs.distances.tolist(), pairs.same.tolist(), strict=True), strict=True)
    )


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_below_the_cap_every_pair_is_taken_with_its_distance(distance):
    x, y = blobs()
    pairs = pair_distances(x, y, distance=distance)
    points = x.astype(np.float64)
    if distance == "cosine":
        points /= np.linalg.norm(points, axis=1, keepdims=True)
    expected = {}
    for i, j in itertools.combinations(range(len(y)), 2):
        gap = np.linalg.norm(points[i] - points[j])
        expected[(i, j)] = (
            gap if distance == "euclidean" else 1 - points[i] @ points[j],
            y[i] == y[j],
        )
    found = as_dict(pairs)
    assert found.keys() == expected.keys()
    for key, (gap, same) in expected.items():
        assert found[key][1] == same
        # Cosine: the evaluation normalises float32 rows in float32, so 1e-7 apart from exact.
        assert found[key][0] == pytest.approx(gap, abs=1e-12 if distance == "euclidean" else 1e-6)
    assert pairs.seed is None and pairs.total == 780
    assert pairs.positives == sum(same for _, same in expected.values()) == pairs.same.sum()
    assert pairs.describe() == f"all 780 pairs, {pairs.positives} same-class"


def test_query_gallery_pairs_are_every_query_with_every_gallery_item():
    x, y = blobs()
    queries = np.arange(len(y)) % 3 == 0
    pairs = pair_distances(x, y, queries=queries)
    assert set(zip(pairs.first.tolist(), pairs.second.tolist(), strict=True)) == set(
        itertools.product(np.flatnonzero(queries).tolist(), np.flatnonzero(~queries).tolist())
    )
    assert len(pairs.first) == pairs.total == queries.sum() * (~queries).sum()
    assert np.array_equal(pairs.same, y[pairs.first] == y[pairs.second])
    gaps = np.linalg.norm(x[pairs.first].astype(np.float64) - x[pairs.second], axis=1)
    np.testing.assert_allclose(pairs.distances, gaps, rtol=0, atol=1e-12)


def test_at_the_cap_all_pairs_above_it_a_sample_of_the_cap():
    x, y = blobs()
    assert pair_distances(x, y, max_pairs=780).seed is None
    sample = pair_distances(x, y, max_pairs=779, seed=5)
    assert sample.seed == 5 and len(sample.distances) == 779 and sample.total == 780
    assert sample.describe().startswith("a sample of 779 of 780 pairs (seed 5), ")
    everything = as_dict(pair_distances(x, y))
    for key, value in as_dict(sample).items():  # true pairs, true distances, no repeat
        assert everything[key] == value


def test_the_sample_keeps_the_share_of_positives_and_depends_on_the_seed_only():
    x, y = blobs(200, classes=20)
    first = pair_distances(x, y, max_pairs=1000, seed=3)
    again = pair_distances(x, y, max_pairs=1000, seed=3)
    other = pair_distances(x, y, max_pairs=1000, seed=4)
    assert np.array_equal(first.first, again.first) and np.array_equal(first.second, again.second)
    assert np.array_equal(first.distances, again.distances)
    assert as_dict(first).keys() != as_dict(other).keys()
    expected_positives = round(1000 * first.positives / first.total)
    assert first.same.sum() == other.same.sum() == expected_positives
    assert np.array_equal(first.same, y[first.first] == y[first.second])


def test_a_rare_positive_stratum_is_still_present():
    x, _ = blobs(300)
    y = np.arange(300)  # all different classes ...
    y[1] = y[0]  # ... but one pair
    pairs = pair_distances(x, y, max_pairs=100, seed=0)
    assert pairs.positives == 1 and pairs.same.sum() == 1  # 100 / 44,850 of it would round to 0
    assert set(pairs.first[pairs.same].tolist() + pairs.second[pairs.same].tolist()) == {0, 1}


def test_each_pair_of_a_stratum_is_equally_likely():
    x, y = blobs(12, classes=3, seed=1)
    everything = as_dict(pair_distances(x, y))
    counts = dict.fromkeys(everything, 0)
    draws = 600
    for seed in range(draws):
        for key in as_dict(pair_distances(x, y, max_pairs=22, seed=seed)):
            counts[key] += 1
    for same in (True, False):
        stratum = [counts[k] for k, (_, s) in everything.items() if s == same]
        taken = sum(stratum) / draws  # pairs of the stratum per sample
        expected = draws * taken / len(stratum)
        # Binomial spread of one pair's count: a row-biased mapping would miss by far more.
        assert max(abs(c - expected) for c in stratum) < 5 * np.sqrt(expected)


@pytest.mark.parametrize(
    ("labels", "queries", "message"),
    [
        ([0], None, "no pair"),
        ([0, 1], [True, True], "no pair"),
        ([0, 1], [1, 0], "one boolean per item"),
    ],
)
def test_inputs_with_no_pair_or_bad_roles_are_refused(labels, queries, message):
    x = np.zeros((len(labels), 2), np.float32)
    with pytest.raises(ValueError, match=message):
        pair_distances(x, labels, queries=None if queries is None else np.array(queries))


def test_max_pairs_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="max_pairs"):
        pair_distances(np.zeros((3, 2)), [0, 0, 1], max_pairs=0)
