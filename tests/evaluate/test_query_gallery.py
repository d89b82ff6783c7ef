"""Query-versus-gallery retrieval (In-Shop's protocol) against a float64 loop and against
pytorch-metric-learning's ``AccuracyCalculator`` with ``ref_includes_query=False``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_retrieval import average_precision_at_r  # tests/evaluate: the AP@R of one query

from clusterable.evaluate import evaluate_embeddings

RETRIEVAL = ["recall@k", "precision@1", "map@r", "r_precision"]


def loop_scores(x, y, is_query, ks):
    """Mean Recall@K, precision@1, MAP@R and R-precision of each query over the gallery, ranked
    by float64 distance then gallery position; queries with no gallery item of their class
    left out."""
    x = np.asarray(x, dtype=np.float64)
    gallery = np.flatnonzero(~is_query)
    recall = {k: [] for k in ks}
    p1, ap, rp = [], [], []
    for q in np.flatnonzero(is_query):
        r = int((y[gallery] == y[q]).sum())
        if r == 0:
            continue
        d = ((x[gallery] - x[q]) ** 2).sum(1)
        ranked = y[gallery[np.lexsort((np.arange(gallery.size), d))]] == y[q]
        for k in ks:
            recall[k].append(ranked[:k].any())
        p1.append(ranked[0])
        ap.append(average_precision_at_r(ranked, r))
        rp.append(ranked[:r].mean())
    out = {f"recall@{k}": np.mean(v) for k, v in recall.items()}
    return out | {"precision@1": np.mean(p1), "map@r": np.mean(ap), "r_precision": np.mean(rp)}


def shop_set(seed, n=240, d=8, classes=30, dtype=np.float32):
    """Items of ``classes`` products, about half of each product's photos queries."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = rng.standard_normal((classes, d))[y] * 0.8 + rng.standard_normal((n, d))
    return x.astype(dtype), y, rng.random(n) < 0.5


def assert_equal_to_loop(x, y, is_query, ks, atol=1e-12):
    got = evaluate_embeddings(x, y, metrics=RETRIEVAL, ks=ks, queries=is_query)
    want = loop_scores(x, y, is_query, ks)
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=atol), key


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_equals_a_float64_loop(seed, dtype):
    x, y, is_query = shop_set(seed, dtype=dtype)
    y[np.flatnonzero(is_query)[:2]] = [97, 98]  # queries with nothing of their class to find
    assert_equal_to_loop(x, y, is_query, (1, 5, 20))


@pytest.mark.parametrize("seed", range(2))
def test_equals_pytorch_metric_learning(seed):
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    x, y, is_query = shop_set(seed, n=400, classes=50)
    calc = AccuracyCalculator(
        include=("precision_at_1", "mean_average_precision_at_r", "r_precision"),
        k="max_bin_count",
        device=torch.device("cpu"),
    )
    ref = calc.get_accuracy(
        torch.from_numpy(x[is_query]),
        torch.from_numpy(y[is_query]),
        torch.from_numpy(x[~is_query]),
        torch.from_numpy(y[~is_query]),
        ref_includes_query=False,
    )
    got = evaluate_embeddings(x, y, metrics=RETRIEVAL, ks=(1,), queries=is_query)
    assert got["precision@1"] == pytest.approx(ref["precision_at_1"], abs=1e-9)
    assert got["map@r"] == pytest.approx(ref["mean_average_precision_at_r"], abs=1e-9)
    assert got["r_precision"] == pytest.approx(ref["r_precision"], abs=1e-9)


def test_float64_ranks_a_tie_group_larger_than_the_candidates():
    # 40 gallery points within 1e-9 of one spot: equal in float32, ordered in float64.
    rng = np.random.default_rng(3)
    spot = rng.standard_normal(4)
    gallery = spot + rng.uniform(1e-9, 5e-9, (40, 4))
    queries = spot + rng.uniform(-1e-9, 1e-9, (10, 4))
    x = np.concatenate([queries, gallery])
    y = np.concatenate([rng.integers(0, 4, 10), rng.integers(0, 4, 40)])
    is_query = np.arange(50) < 10
    assert_equal_to_loop(x, y, is_query, (1, 2))


@settings(max_examples=30, deadline=None)
@given(
    labels=st.lists(st.integers(0, 3), min_size=6, max_size=24),
    points=st.lists(st.integers(-2, 2), min_size=48, max_size=48),
    flags=st.lists(st.booleans(), min_size=24, max_size=24),
)
def test_ties_and_duplicates_equal_the_loop(labels, points, flags):
    # A coarse integer grid: exact ties and duplicates across queries and gallery.
    y = np.array(labels)
    n = y.size
    x = np.array(points[: 2 * n], dtype=np.float32).reshape(n, 2)
    is_query = np.array(flags[:n])
    is_query[:2] = [True, False]
    y[1] = y[0]  # the first query has something to find
    y[-1] = 4  # a second class, which every evaluation needs
    ks = tuple(k for k in (1, 2, 3) if k <= int((~is_query).sum()))
    assert_equal_to_loop(x, y, is_query, ks)


def test_partition_metrics_still_cover_every_item():
    x, y, is_query = shop_set(0)
    with_roles = evaluate_embeddings(x, y, ks=(1,), queries=is_query, seed=4)
    partition_only = evaluate_embeddings(
        x, y, metrics=["nmi", "accuracy", "ari", "silhouette"], seed=4
    )
    for key, value in partition_only.items():
        assert with_roles[key] == pytest.approx(value, abs=1e-12), key
    leave_one_out = evaluate_embeddings(x, y, ks=(1,), seed=4)
    assert with_roles["map@r"] != leave_one_out["map@r"]


def test_per_class_means_cover_only_the_queries():
    x, y, is_query = shop_set(1)
    y[np.flatnonzero(~is_query)[:3]] = 99  # a class with gallery items only
    got = evaluate_embeddings(
        x, y, metrics=["precision@1"], ks=(1,), queries=is_query, per_class=True
    )["per_class"]
    for code, name in enumerate(got["class"]):
        own = is_query & (y == name)
        if not own.any() or not (y[~is_query] == name).any():
            assert np.isnan(got["precision@1"][code])
            continue
        keep = own | ~is_query  # the class's queries and the gallery
        want = loop_scores(x[keep], y[keep], own[keep], (1,))
        assert got["precision@1"][code] == pytest.approx(want["precision@1"], abs=1e-12)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (np.ones(240, dtype=bool), "0 gallery items"),
        (np.zeros(240, dtype=bool), "0 queries"),
        (np.zeros(239, dtype=bool), "one per item"),
        (np.zeros(240, dtype=np.int64), "booleans"),
    ],
)
def test_bad_flags_say_what_to_give(flags, message):
    x, y, _ = shop_set(0)
    with pytest.raises(ValueError, match=message):
        evaluate_embeddings(x, y, metrics=RETRIEVAL, ks=(1,), queries=flags)


def test_k_above_the_gallery_is_refused():
    x, y, _ = shop_set(0, n=20, classes=3)
    is_query = np.arange(20) < 15
    with pytest.raises(ValueError, match="only 5 candidate"):
        evaluate_embeddings(x, y, metrics=RETRIEVAL, ks=(1, 8), queries=is_query)


def test_no_shared_class_is_refused():
    x, y, _ = shop_set(0, n=20, classes=3)
    is_query = np.arange(20) < 10
    y = np.where(is_query, 0, 1)
    with pytest.raises(ValueError, match="no query has an item of its class"):
        evaluate_embeddings(x, y, metrics=RETRIEVAL, ks=(1,), queries=is_query)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_gpu_query_gallery_table_equals_the_cpu_one(dtype):
    x, y, is_query = shop_set(5, n=3000, d=64, classes=60, dtype=dtype)
    x[2900:] = x[:100]  # duplicates across queries and gallery: exact ties
    ks = (1, 10, 50)
    on_gpu = evaluate_embeddings(x, y, metrics=RETRIEVAL, ks=ks, queries=is_query, device="cuda")
    on_cpu = evaluate_embeddings(x, y, metrics=RETRIEVAL, ks=ks, queries=is_query, device="cpu")
    assert on_gpu == pytest.approx(on_cpu, abs=1e-12)
    assert_equal_to_loop(x, y, is_query, ks)
