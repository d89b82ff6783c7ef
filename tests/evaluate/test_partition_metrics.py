"""Partition metrics against scikit-learn, pair loops and permutation search; silhouette."""

from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from clusterable.evaluate import (
    ari,
    cluster_accuracy,
    contingency_table,
    nmi,
    pairwise_f1,
    silhouette,
    v_measure,
)
from clusterable.evaluate import partition_metrics as pm

label_lists = st.lists(st.integers(0, 5), min_size=2, max_size=40)

RNG = np.random.default_rng(12345)


def paired(data):
    labels = np.array(data.draw(label_lists))
    clusters = np.array(
        data.draw(st.lists(st.integers(0, 6), min_size=len(labels), max_size=len(labels)))
    )
    return labels, clusters


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_against_sklearn(data):
    y, c = paired(data)
    assert nmi(y, c) == pytest.approx(skm.normalized_mutual_info_score(y, c), abs=1e-10)
    assert ari(y, c) == pytest.approx(skm.adjusted_rand_score(y, c), abs=1e-10)
    assert v_measure(y, c) == pytest.approx(skm.v_measure_score(y, c), abs=1e-10)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 3000),
    st.integers(1, 60),
    st.integers(1, 60),
    st.floats(0.0, 1.0),
    st.integers(0, 2**32 - 1),
)
def test_large_random_tables_against_sklearn(n, classes, clusters, agreement, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    c = np.where(rng.random(n) < agreement, y % clusters, rng.integers(0, clusters, n))
    table = contingency_table(y, c)
    assert pm.nmi_from_table(table) == pytest.approx(
        skm.normalized_mutual_info_score(y, c), abs=1e-10
    )
    assert pm.ari_from_table(table) == pytest.approx(skm.adjusted_rand_score(y, c), abs=1e-10)
    assert pm.v_measure_from_table(table) == pytest.approx(skm.v_measure_score(y, c), abs=1e-10)


def test_clusters_equal_to_the_classes_score_exactly_one():
    y = np.random.default_rng(4).integers(0, 50, 5000)
    assert nmi(y, y) == v_measure(y, y) == ari(y, y) == 1.0


def loop_pairwise(y, c):
    tp = fp = fn = 0
    for i, j in itertools.combinations(range(len(y)), 2):
        same_class, same_cluster = y[i] == y[j], c[i] == c[j]
        tp += same_class and same_cluster
        fp += same_cluster and not same_class
        fn += same_class and not same_cluster
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def permutation_accuracy(y, c):
    classes, clusters = np.unique(y), np.unique(c)
    best = 0
    if len(clusters) <= len(classes):
        for perm in itertools.permutations(classes, len(clusters)):
            pairs = zip(clusters, perm, strict=True)
            best = max(best, sum(((c == k) & (y == v)).sum() for k, v in pairs))
    else:
        for perm in itertools.permutations(clusters, len(classes)):
            pairs = zip(classes, perm, strict=True)
            best = max(best, sum(((y == v) & (c == k)).sum() for v, k in pairs))
    return best / len(y)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_pairwise_f1_against_pair_loop(data):
    y, c = paired(data)
    np.testing.assert_allclose(pairwise_f1(y, c), loop_pairwise(y, c), atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=12), st.data())
def test_hungarian_against_all_permutations(labels, data):
    y = np.array(labels)
    c = np.array(data.draw(st.lists(st.integers(0, 5), min_size=len(y), max_size=len(y))))
    assert cluster_accuracy(y, c) == pytest.approx(permutation_accuracy(y, c))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_sparse_and_dense_assignment_agree(data):
    y, c = paired(data)
    table = contingency_table(y, c)
    dense = pm.cluster_accuracy_from_table(table)
    original = pm.DENSE_ASSIGNMENT_LIMIT
    try:
        pm.DENSE_ASSIGNMENT_LIMIT = 0
        assert pm.cluster_accuracy_from_table(table) == pytest.approx(dense)
    finally:
        pm.DENSE_ASSIGNMENT_LIMIT = original


def test_sparse_assignment_at_scale_matches_dense():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 300, 3000)
    c = np.where(rng.random(3000) < 0.7, y * 7 % 310, rng.integers(0, 310, 3000))
    table = contingency_table(y, c)
    dense = pm.cluster_accuracy_from_table(table)
    classes, clusters = pm._sparse_assignment(table)
    lookup = {(r, k): v for r, k, v in zip(table.rows, table.cols, table.counts, strict=True)}
    shared = sum(lookup.get(pair, 0) for pair in zip(classes, clusters, strict=True))
    assert shared / 3000 == pytest.approx(dense)


@settings(max_examples=40, deadline=None)
@given(st.data(), st.permutations(range(7)))
def test_renaming_clusters_changes_nothing(data, perm):
    y, c = paired(data)
    renamed = np.array(perm)[c] * 3 + 11
    for metric in (nmi, ari, v_measure, cluster_accuracy):
        assert metric(y, renamed) == pytest.approx(metric(y, c), abs=1e-12)
    np.testing.assert_allclose(pairwise_f1(y, renamed), pairwise_f1(y, c), atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(label_lists, st.permutations(range(6)))
def test_perfect_clustering_scores_one(labels, perm):
    y = np.array(labels)
    c = np.array(perm)[y]
    for metric in (nmi, ari, v_measure, cluster_accuracy):
        assert metric(y, c) == pytest.approx(1.0)
    assert pairwise_f1(y, c) == pytest.approx((1.0, 1.0, 1.0))


def test_noise_counts_as_singletons():
    y = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    c = np.array([0, 0, -1, 1, 1, -1, -1, 2])
    singletons = np.array([0, 0, 10, 1, 1, 11, 12, 2])
    for metric in (nmi, ari, v_measure, cluster_accuracy):
        assert metric(y, c) == metric(y, singletons)
    assert pairwise_f1(y, c) == pairwise_f1(y, singletons)
    assert pairwise_f1(y, c)[0] == 1.0  # noise forms no pair, so claims none wrongly


def test_torch_and_numpy_inputs_agree():
    y, c = np.array([0, 0, 1, 1, 2, 2]), np.array([1, 1, 0, 0, 0, 2])
    assert nmi(torch.from_numpy(y), torch.from_numpy(c)) == nmi(y, c)
    assert pairwise_f1(torch.from_numpy(y), c) == pairwise_f1(y, c)


def test_large_counts_do_not_overflow():
    n = 200_000
    y, c = np.arange(n) % 2, np.zeros(n, dtype=int)
    assert ari(y, c) == pytest.approx(skm.adjusted_rand_score(y, c), abs=1e-12)
    assert pairwise_f1(y, c)[1] == 1.0


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_silhouette_against_sklearn(metric):
    rng = np.random.default_rng(0)
    c = rng.integers(0, 5, 400)
    x = rng.standard_normal((5, 6))[c] * 2 + rng.standard_normal((400, 6))
    c[:3] = [7, 8, 9]  # singleton clusters score 0 on both sides
    assert silhouette(x, c, distance=metric) == pytest.approx(
        skm.silhouette_score(x, c, metric=metric), abs=1e-5
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_silhouette_over_blocks_of_rows_equals_sklearn(monkeypatch, dtype):
    silhouette_module = importlib.import_module("clusterable.evaluate.silhouette")
    rng = np.random.default_rng(1)
    c = rng.integers(0, 5, 400)
    x = (rng.standard_normal((5, 6))[c] * 2 + rng.standard_normal((400, 6))).astype(dtype)
    whole = silhouette(x, c)
    # Blocks of 37 rows through one reused buffer, the last block shorter.
    monkeypatch.setattr(silhouette_module, "_BLOCK", 1)
    monkeypatch.setattr(silhouette_module, "_MIN_BLOCK_ROWS", 37)
    blocked = silhouette(x, c)
    assert blocked == pytest.approx(skm.silhouette_score(x, c), abs=1e-5)
    assert blocked == pytest.approx(whole, abs=1e-12)


def test_silhouette_blocks_stay_within_their_memory_bound():
    silhouette_module = importlib.import_module("clusterable.evaluate.silhouette")
    rows = silhouette_module._rows_per_block
    bound = silhouette_module._MAX_BLOCK
    for n in (10, 2_000, 5_924, 60_502, 1_000_000, 20_000_000):
        assert 1 <= rows(n, 500) <= 500
        assert rows(n, 500) == 1 or rows(n, 500) * n <= bound
    assert rows(1_000_000, 500) == 8  # not the 128-row floor: 512 MB
    assert rows(60_502, 500) == silhouette_module._MIN_BLOCK_ROWS
    assert rows(2_000, 50) == 50


def test_silhouette_sample_is_seeded_and_close():
    rng = np.random.default_rng(1)
    c = rng.integers(0, 4, 3000)
    x = rng.standard_normal((4, 5))[c] * 3 + rng.standard_normal((3000, 5))
    full = silhouette(x, c, sample_size=None)
    a = silhouette(x, c, sample_size=800, seed=3)
    assert a == silhouette(x, c, sample_size=800, seed=3)
    assert a != silhouette(x, c, sample_size=800, seed=4)
    assert a == pytest.approx(full, abs=0.02)


def test_silhouette_auto_scores_every_item_of_a_small_set_and_a_budget_of_a_large_one():
    rng = np.random.default_rng(2)
    c = rng.integers(0, 4, 12_000)
    x = rng.standard_normal((4, 3))[c] * 3 + rng.standard_normal((12_000, 3))
    # 5e6 / 4,000 = 1,250 items scored of 4,000; 500 (the least) of 12,000; all of 2,000.
    assert silhouette(x[:4000], c[:4000], seed=5) == silhouette(
        x[:4000], c[:4000], sample_size=1250, seed=5
    )
    assert silhouette(x, c, seed=5) == silhouette(x, c, sample_size=500, seed=5)
    assert silhouette(x[:2000], c[:2000]) == silhouette(x[:2000], c[:2000], sample_size=None)


def test_silhouette_sample_keeps_small_clusters_whole():
    # 300 clusters of 4: re-partitioning a 10 % sample would leave nearly every item alone (score
    # 0); scoring sampled items against the whole set keeps the estimate near the full value.
    rng = np.random.default_rng(2)
    c = np.repeat(np.arange(300), 4)
    x = rng.standard_normal((300, 8))[c] * 4 + rng.standard_normal((1200, 8))
    full = silhouette(x, c, sample_size=None)
    assert full > 0.4
    assert silhouette(x, c, sample_size=120, seed=0) == pytest.approx(full, abs=0.05)


def test_silhouette_noise_scores_zero():
    x = np.array([[0.0], [0.1], [5.0], [5.1], [20.0]])
    with_noise = silhouette(x, [0, 0, 1, 1, -1])
    assert with_noise == pytest.approx(skm.silhouette_score(x, [0, 0, 1, 1, 2]), abs=1e-5)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: nmi([0, 1, 1], [0, 1]), "2 entries but there are 3 items"),
        (lambda: nmi([[0, 1], [1, 1]], [0, 1]), "1-D"),
        (lambda: ari([0, 1, 1], [0, -2, 1]), "below -1"),
        (lambda: pairwise_f1([0, 1, 1], [0.5, 1, 1]), "integer"),
        (lambda: cluster_accuracy([], []), "empty"),
        (lambda: silhouette(RNG.random((5, 2)), [0, 0, 0, 0, 0]), "between 2"),
        (lambda: silhouette(RNG.random((3, 2)), [0, 1, 2]), "between 2"),
        (lambda: silhouette(np.array([[np.nan, 1.0], [0.0, 1.0]]), [0, 1]), "NaN"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_silhouette_of_points_far_from_the_origin_equals_the_centred_one():
    # float32 |a|^2 + |b|^2 - 2 a.b cancels far from the origin; the points are centred first.
    rng = np.random.default_rng(8)
    labels = np.repeat(np.arange(3), 30)
    x = (np.eye(3, 5)[labels] + 0.3 * rng.standard_normal((90, 5))).astype(np.float32)
    far = (x.astype(np.float64) + 1e4).astype(np.float32)
    near = far.astype(np.float64) - 1e4  # the same points, exactly, near the origin
    assert silhouette(far, labels) == pytest.approx(skm.silhouette_score(near, labels), abs=1e-5)
