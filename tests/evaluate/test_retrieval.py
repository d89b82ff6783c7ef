"""Retrieval metrics against explicit loops and pytorch-metric-learning's AccuracyCalculator."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterable.evaluate import knn_accuracy, map_at_r, precision_at_1, r_precision, recall_at_k
from clusterable.evaluate.knn_classification import majority_vote
from clusterable.evaluate.neighbors import faiss_available

RNG = np.random.default_rng(12345)


def sorted_others(x, i):
    """Indices of all items but i, by float64 distance then index."""
    d = ((x - x[i]) ** 2).sum(1)
    return [j for j in np.lexsort((np.arange(len(x)), d)) if j != i]


def average_precision_at_r(ranked, r):
    """AP@R of one query from its neighbours' ``ranked`` matches: the precision at each of the
    first ``r`` places that holds a match, summed, over ``r`` (Musgrave et al. 2020)."""
    hits, total = 0, 0.0
    for place in range(r):
        if ranked[place]:
            hits += 1
            total += hits / (place + 1)
    return total / r


def loop_metrics(x, y, ks):
    x = np.asarray(x, dtype=np.float64)
    recall = {k: [] for k in ks}
    ap, rp = [], []
    for i in range(len(x)):
        r = int((y == y[i]).sum()) - 1
        if r == 0:
            continue
        ranked = y[sorted_others(x, i)] == y[i]
        for k in ks:
            recall[k].append(ranked[:k].any())
        ap.append(average_precision_at_r(ranked, r))
        rp.append(ranked[:r].mean())
    return {k: np.mean(v) for k, v in recall.items()}, np.mean(ap), np.mean(rp)


def assert_matches_loops(x, y, ks):
    """Recall@K, MAP@R and R-precision of ``(x, y)`` equal the loops'; the loops' recall."""
    recall, ap, rp = loop_metrics(x, y, ks)
    got = recall_at_k(x, y, ks)
    for k in ks:
        assert got[k] == pytest.approx(recall[k], abs=1e-12)
    assert map_at_r(x, y) == pytest.approx(ap, abs=1e-12)
    assert r_precision(x, y) == pytest.approx(rp, abs=1e-12)
    return recall


def random_set(seed, n=120, d=6, classes=15):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = rng.standard_normal((classes, d))[y] * 0.7 + rng.standard_normal((n, d))
    return x.astype(np.float32), y


@pytest.mark.parametrize("seed", range(3))
def test_against_loops(seed):
    x, y = random_set(seed)
    ks = (1, 2, 5, 17)
    recall = assert_matches_loops(x, y, ks)
    assert precision_at_1(x, y) == pytest.approx(recall[1], abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_against_pytorch_metric_learning(seed):
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    x, y = random_set(seed, n=300, d=8, classes=40)
    y[:3] = [100, 101, 102]  # lone queries: both sides leave them out
    calc = AccuracyCalculator(
        include=("precision_at_1", "mean_average_precision_at_r", "r_precision"),
        k="max_bin_count",
        device=torch.device("cpu"),
    )
    ref = calc.get_accuracy(torch.from_numpy(x), torch.from_numpy(y))
    assert recall_at_k(x, y, (1,))[1] == pytest.approx(ref["precision_at_1"], abs=1e-9)
    assert map_at_r(x, y) == pytest.approx(ref["mean_average_precision_at_r"], abs=1e-9)
    assert r_precision(x, y) == pytest.approx(ref["r_precision"], abs=1e-9)


def test_cosine_uses_directions():
    x, y = random_set(0)
    scaled = x * np.random.default_rng(1).uniform(0.1, 10, (len(x), 1)).astype(np.float32)
    assert map_at_r(scaled, y, distance="cosine") == pytest.approx(
        map_at_r(x, y, distance="cosine")
    )


@settings(max_examples=30, deadline=None)
@given(
    labels=st.lists(st.integers(0, 3), min_size=4, max_size=25),
    points=st.lists(st.integers(-2, 2), min_size=25, max_size=25),
)
def test_ties_and_duplicates_match_loops(labels, points):
    # Integer coordinates on a coarse grid: many exact distance ties and duplicate points.
    y = np.array(labels)
    if np.bincount(y).max() < 2:
        y[1] = y[0]
    x = np.array(points[: 2 * len(y)] + points[: max(0, 2 * len(y) - 25)], dtype=np.float32)
    x = x[: 2 * len(y)].reshape(len(y), 2)
    ks = tuple(k for k in (1, 2, 3) if k < len(y))
    recall, ap, rp = loop_metrics(x, y, ks)
    got = recall_at_k(torch.from_numpy(x), torch.from_numpy(y), ks)
    for k in ks:
        assert got[k] == pytest.approx(recall[k], abs=1e-12)
    assert map_at_r(x, y) == pytest.approx(ap, abs=1e-12)
    assert r_precision(x, y) == pytest.approx(rp, abs=1e-12)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=3, max_size=30), st.permutations(range(5)))
def test_label_renaming_changes_nothing(labels, perm):
    y = np.array(labels)
    if np.bincount(y).max() < 2:
        y[1] = y[0]
    x = np.random.default_rng(len(y)).standard_normal((len(y), 3))
    renamed = np.array(perm)[y] * 10 - 7
    assert map_at_r(x, y) == map_at_r(x, renamed)
    assert recall_at_k(x, y, (1, 2)) == recall_at_k(x, renamed, (1, 2))


def loop_knn_accuracy(train, ty, test, sy, k, leave_one_out):
    correct = 0
    for i in range(len(test)):
        d = ((train - test[i]) ** 2).sum(1)
        order = [
            j for j in np.lexsort((np.arange(len(train)), d)) if not (leave_one_out and j == i)
        ]
        voters = ty[order[:k]]
        counts = {c: int((voters == c).sum()) for c in voters}
        top = max(counts.values())
        pred = next(c for c in voters if counts[c] == top)  # class of the nearest tied voter
        correct += pred == sy[i]
    return correct / len(test)


@pytest.mark.parametrize("seed", range(3))
def test_knn_accuracy_against_loops(seed):
    x, y = random_set(seed, n=150, classes=4)
    test, ty = random_set(seed + 10, n=60, classes=4)
    ks = (1, 2, 3, 4, 5, 7)
    got = knn_accuracy(x, y, test, ty, k=ks)
    loo = knn_accuracy(x, y, k=ks)
    for k in ks:
        assert got[k] == pytest.approx(loop_knn_accuracy(x, y, test, ty, k, False))
        assert loo[k] == pytest.approx(loop_knn_accuracy(x, y, x, y, k, True))
    assert knn_accuracy(x, y, test, ty, 3) == got[3]


def test_majority_vote_tie_goes_to_nearest_voter():
    assert majority_vote(np.array([[2, 1, 1, 2]])).tolist() == [2]
    assert majority_vote(np.array([[3, 1, 2, 0]])).tolist() == [3]
    assert majority_vote(np.array([[5, 4, 4, 5, 4]])).tolist() == [4]


def test_knn_accuracy_string_labels_shared_encoding():
    train = np.array([[0.0], [1.0], [10.0], [11.0]])
    acc = knn_accuracy(train, ["a", "a", "b", "b"], [[0.5], [10.5]], ["a", "b"], k=(1, 3))
    assert acc == {1: 1.0, 3: 1.0}


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: recall_at_k(np.zeros((4, 2)), [0, 1, 2, 3], ks=(1,)), "single item"),
        (lambda: recall_at_k(RNG.random((4, 2)), [0, 0, 1, 1], ks=(4,)), "at most 3"),
        (lambda: recall_at_k(RNG.random((4, 2)), [0, 0, 1], ks=(1,)), "3 entries"),
        (lambda: recall_at_k(RNG.random((4, 2)), [0, 0, 1, 1], ks=()), "empty"),
        (lambda: map_at_r(RNG.random((4, 2)), [0.5, 0, 1, 1]), "non-integer"),
        (lambda: knn_accuracy(RNG.random((4, 2)), [0, 0, 1, 1], k=4), "at most 3"),
        (lambda: knn_accuracy(RNG.random((4, 2)), [0, 0, 1, 1], RNG.random((2, 2))), "both"),
        (
            lambda: knn_accuracy(RNG.random((4, 2)), [0, 0, 1, 1], RNG.random((2, 3)), [0, 1], 1),
            "dimension",
        ),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("symmetric", [True, False])
def test_near_twins_of_other_classes_over_several_panels_match_loops(monkeypatch, symmetric):
    # Each point has a near-twin of another class: in every query's list the two lie within
    # float32 rounding of each other, so only an exact re-scoring orders them right.
    from clusterable.evaluate import _host_search

    rng = np.random.default_rng(9)
    base = rng.standard_normal((700, 16))
    x = np.concatenate([base, base + 1e-5 * rng.standard_normal((700, 16))]).astype(np.float32)
    y = rng.integers(0, 40, 700)
    y = np.concatenate([y, (y + 1) % 40])
    monkeypatch.setattr(_host_search, "_PANEL_ELEMENTS", _host_search._PANEL_ROWS * 600)
    if not symmetric:
        monkeypatch.setattr(_host_search, "SYMMETRIC_MAX_CANDIDATES", 0)
    ks = (1, 2, 10)
    assert_matches_loops(x, y, ks)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_recall_beyond_r_max_from_a_second_search_matches_loops(monkeypatch, dtype):
    # One class of 61 items (R_max = 60, over half of K = 100) and pairs and triples: most small-
    # class queries have no partner among their 60 nearest, so their Recall@100 comes from the
    # second search.
    from clusterable.evaluate import retrieval

    rng = np.random.default_rng(21)
    y = np.concatenate([np.zeros(61, dtype=np.int64), 1 + np.arange(540) // 3])
    x = rng.standard_normal((y.size, 5)).astype(dtype)
    x[300:310] = x[290:300]  # duplicates across classes: exact ties ordered by index
    ks = (1, 10, 100)
    codes = np.unique(y, return_inverse=True)[1]
    second = []
    first_hits = retrieval._first_hits
    monkeypatch.setattr(
        retrieval, "_first_hits", lambda *a: second.append(a[2].size) or first_hits(*a)
    )
    shallow = retrieval.retrieval_per_query(x, codes, ks)
    assert len(second) == 1 and second[0] > 300
    monkeypatch.setattr(retrieval, "SHALLOW_MIN_SHARE", np.inf)
    deep = retrieval.retrieval_per_query(x, codes, ks)
    assert len(second) == 1
    for name in deep:
        np.testing.assert_array_equal(shallow[name], deep[name])
    recall, ap, _ = loop_metrics(x, y, ks)
    for k in ks:
        assert np.nanmean(shallow[f"recall@{k}"]) == pytest.approx(recall[k], abs=1e-12)
    assert np.nanmean(shallow["map@r"]) == pytest.approx(ap, abs=1e-12)
    assert 0.1 < recall[100] < 0.9  # the second search decides many queries either way


def test_small_classes_or_no_map_at_r_search_to_the_deepest_k_at_once(monkeypatch):
    # Without MAP@R, or with classes small next to K, a second search could take most queries.
    from clusterable.evaluate import retrieval

    monkeypatch.setattr(retrieval, "_first_hits", lambda *a: pytest.fail("second search"))
    x, y = random_set(3, n=300)
    codes = np.unique(y, return_inverse=True)[1]
    retrieval.retrieval_per_query(x, codes, (1, 2), at_r=False)
    # k-means' 32 kept neighbours reach half of K = 64, but R_max does not.
    assert np.bincount(codes).max() - 1 < 32
    retrieval.retrieval_per_query(x, codes, (1, 10, 64), neighbours=np.empty((300, 32), int))


def hard_set(seed, dtype=np.float32, n=1_300, d=16):
    """Points whose neighbour lists hold every kind of tie: exact duplicates across classes,
    near-twins (1e-7 apart) across classes, lone classes, classes smaller and larger than K."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 60, n)
    y[:40] = 1_000 + np.arange(40)  # lone queries
    y[40:46] = 2_000  # one class of 6, fewer than K = 10
    x = rng.standard_normal((60, d))[y % 60] + 1.5 * rng.standard_normal((n, d))
    x[1_000:1_050] = x[1_050:1_100] = x[100:150]  # triples of duplicates, mostly across classes
    x[1_100:1_200] = x[200:300] * (1 + 1e-7 * rng.standard_normal((100, 1)))  # near-twins
    if dtype == np.float64:  # 80 points within 1e-9 of one spot: one float32 value
        x[1_200:1_280] = 3.0 + 1e-9 * rng.standard_normal((80, d))
        x = x + 1e4  # far from the origin: float32 ranks differences of 1e-3 only
    return x.astype(dtype), np.unique(y, return_inverse=True)[1]


def assert_same_scores(got, expected):
    """Per-query scores equal; MAP@R to within its order of summation."""
    assert got.keys() == expected.keys()
    for name in expected:
        if name == "map@r":
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-14, atol=0)
        else:
            np.testing.assert_array_equal(got[name], expected[name])


@pytest.mark.skipif(not faiss_available(), reason="compares the torch back end with faiss")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("strategy", ["sorted", "unsorted", "segmented"])
def test_the_torch_back_end_scores_every_query_as_faiss_does(monkeypatch, dtype, strategy):
    from clusterable.evaluate import _host_search, _torch_search, retrieval

    monkeypatch.setattr(_torch_search, "TOPK_STRATEGY", strategy)
    monkeypatch.setattr(_torch_search, "TOPK_SEGMENTS", 8)
    x, codes = hard_set(0, dtype)
    # float64: fewer candidates than points that coincide in float32, searched again exactly
    ks = (1, 10, 100) if dtype == np.float32 else (1, 10)
    widened = []
    for module in (_host_search, _torch_search):  # the rows each back end searches again
        exact_nearest = module.exact_nearest
        monkeypatch.setattr(
            module,
            "exact_nearest",
            lambda *a, found=exact_nearest: widened.extend(a[3].tolist()) or found(*a),
        )
    kept = {}
    for backend, chunk in (("faiss", None), ("torch", None), ("torch", 97)):
        kept[backend, chunk] = np.full((x.shape[0], 32), -1, dtype=np.int32)
        scores = retrieval.retrieval_per_query(
            x, codes, ks, backend=backend, chunk_size=chunk, neighbours=kept[backend, chunk]
        )
        if backend == "faiss":
            expected = scores
        else:
            assert_same_scores(scores, expected)
    np.testing.assert_array_equal(kept["torch", 97], kept["torch", None])
    # The kept neighbours differ at most inside runs tied in float32 of one kind.
    kinds = {key: codes[ids] == codes[:, None] for key, ids in kept.items()}
    np.testing.assert_array_equal(kinds["torch", None], kinds["faiss", None])
    assert 0.05 < np.nanmean(expected["recall@1"]) < 0.95
    assert len(widened) == (0 if dtype == np.float32 else 3 * 80)  # once per search


@pytest.mark.skipif(not faiss_available(), reason="compares the torch back end with faiss")
def test_a_broken_tie_order_on_the_device_is_caught(monkeypatch):
    # The comparison above must see a wrong order of exact ties: here duplicates are ordered
    # by descending id.
    from clusterable.evaluate import _torch_search, retrieval

    x, codes = hard_set(1)
    expected = retrieval.retrieval_per_query(x, codes, (1, 10), backend="faiss")

    def by_key_then_descending_id(keys, ids):
        by_id = ids.argsort(dim=1, descending=True)
        keys, ids = keys.gather(1, by_id), ids.gather(1, by_id)
        by_key = keys.argsort(dim=1, stable=True)
        return keys.gather(1, by_key), ids.gather(1, by_key)

    monkeypatch.setattr(_torch_search, "order_by_value_then_id", by_key_then_descending_id)
    monkeypatch.setattr(_torch_search, "order_by_key_then_id", by_key_then_descending_id)
    broken = retrieval.retrieval_per_query(x, codes, (1, 10), backend="torch")
    with pytest.raises(AssertionError):
        assert_same_scores(broken, expected)


@pytest.mark.skipif(not faiss_available(), reason="compares the torch back end with faiss")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_torch_back_end_gives_the_table_faiss_gives(monkeypatch, dtype):
    from clusterable.evaluate import evaluate_embeddings, neighbors

    x, codes = hard_set(2, dtype)
    expected = evaluate_embeddings(x, codes, ks=(1, 10, 100), device="cpu")
    monkeypatch.setattr(neighbors, "faiss_available", lambda: False)
    assert neighbors._resolve("auto", "cpu") == "torch"
    got = evaluate_embeddings(x, codes, ks=(1, 10, 100), device="cpu")
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-14, abs=0), name


@pytest.mark.skipif(not faiss_available(), reason="compares the torch back end with faiss")
def test_the_torch_back_end_shares_out_and_ranks_by_cosine_as_faiss_does():
    from clusterable.evaluate import retrieval

    x, codes = hard_set(3)
    expected = retrieval.retrieval_per_query(x, codes, (1, 10), distance="cosine", backend="faiss")
    shards = [
        retrieval.retrieval_per_query(
            x, codes, (1, 10), distance="cosine", backend="torch", chunk_size=100, shard=(rank, 3)
        )
        for rank in range(3)
    ]
    for name, values in expected.items():
        owned = [~np.isnan(shard["precision@1"]) for shard in shards]
        combined = np.full_like(values, np.nan)
        for own, shard in zip(owned, shards, strict=True):
            combined[own] = shard[name][own]
        np.testing.assert_allclose(combined, values, rtol=1e-14, atol=0)
