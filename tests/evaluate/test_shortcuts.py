"""The evaluation's shortcuts give exactly the values of the plain computations they replace."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from scipy import sparse
from sklearn.metrics import mutual_info_score

from clusterable.evaluate import _host_search, evaluate_embeddings, partition_metrics, silhouette
from clusterable.evaluate._pools import _PTHREADS_BLAS, blas_on_one_thread
from clusterable.evaluate.neighbors import faiss_available, knn_chunks
from clusterable.evaluate.silhouette import silhouette_distances

table_module = importlib.import_module("clusterable.evaluate.table")
silhouette_module = importlib.import_module("clusterable.evaluate.silhouette")

needs_faiss = pytest.mark.skipif(not faiss_available(), reason="the shortcut feeds faiss's heaps")


def clustered(n=700, d=16, classes=12, seed=0, twins=60):
    """float32 class blobs with exact duplicates (which float32 distances leave near 0)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = (3.0 * rng.standard_normal((classes, d))[y] + rng.standard_normal((n, d))).astype(
        np.float32
    )
    x[n - twins :] = x[:twins]
    return x, y


@needs_faiss
@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_the_table_reading_the_silhouette_distances_equals_the_plain_one(monkeypatch, metric):
    x, y = clustered()
    shared = evaluate_embeddings(x, y, ks=(1, 5, 50), distance=metric, per_class=True)
    monkeypatch.setattr(table_module, "SHARED_DISTANCES_MAX", 0)
    plain = evaluate_embeddings(x, y, ks=(1, 5, 50), distance=metric, per_class=True)
    per_class, plain_per_class = shared.pop("per_class"), plain.pop("per_class")
    assert shared == plain
    for name, values in plain_per_class.items():
        np.testing.assert_array_equal(per_class[name], values)


@needs_faiss
def test_the_silhouette_read_off_shared_distances_equals_the_public_one():
    x, y = clustered(seed=1)
    clusters = np.random.default_rng(2).integers(0, 9, y.size)
    table = evaluate_embeddings(x, y, clustering=clusters, ks=(1,))
    assert table["silhouette"] == silhouette(x, clusters)


@needs_faiss
@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_the_search_of_distance_blocks_equals_the_search_of_the_points(monkeypatch, metric):
    x, y = clustered(n=900, seed=3, twins=150)  # 150 duplicates: their ceilings are 0
    if metric == "cosine":
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    codes = np.unique(y, return_inverse=True)[1]
    blocks = silhouette_distances(x, metric, None, 0).blocks
    assert len(blocks) == 1
    monkeypatch.setattr(silhouette_module, "_BLOCK", 1)  # blocks of 128 rows
    blocks = silhouette_distances(x, metric, None, 0).blocks
    assert len(blocks) > 1
    for k, with_codes in ((40, True), (120, False)):
        given = codes if with_codes else None
        read = list(knn_chunks(x, k, distance=metric, codes=given, blocks=blocks))
        plain = list(knn_chunks(x, k, distance=metric, codes=given))
        for (start, dist, idx), (start_p, dist_p, idx_p) in zip(read, plain, strict=True):
            assert start == start_p
            if with_codes:  # near-ties of one kind keep their float32 order, which may differ
                own = codes[start : start + idx.shape[0], None]
                np.testing.assert_array_equal(codes[idx] == own, codes[idx_p] == own)
            else:
                np.testing.assert_array_equal(idx, idx_p)
            # Unmixed near-ties keep float32 distances: a duplicate's is rounding around 0 (from
            # faiss sometimes below 0, its root then NaN), equal up to float32 resolution.
            seen = np.isfinite(dist_p)
            np.testing.assert_allclose(dist[seen] ** 2, dist_p[seen] ** 2, rtol=1e-5, atol=1e-4)
    # The blocks are left as they were, for the silhouette.
    fresh = silhouette_distances(x, metric, None, 0).blocks
    for (_, block), (_, again) in zip(blocks, fresh, strict=True):
        np.testing.assert_array_equal(block, again)


@needs_faiss
def test_rows_whose_ceiling_keeps_too_few_are_sorted_whole(monkeypatch):
    x, _ = clustered(n=900, seed=7, twins=0)
    x[:300] = x[0]  # a third of the rows sampled at distance 0: their ceilings are 0
    blocks = silhouette_distances(x, "euclidean", None, 0).blocks
    calls = []
    argsort = np.argsort
    monkeypatch.setattr(np, "argsort", lambda *a, **k: calls.append(1) or argsort(*a, **k))
    dist, ids = _host_search.search_distance_blocks(blocks, 40)
    assert len(calls) >= 300
    squared = np.concatenate([block for _, block in blocks], axis=1)  # (n, n)
    np.fill_diagonal(squared, np.inf)
    expected = np.lexsort((np.broadcast_to(np.arange(900), squared.shape), squared), axis=1)
    np.testing.assert_array_equal(ids, expected[:, :40])
    np.testing.assert_array_equal(dist, np.take_along_axis(squared, expected[:, :40], axis=1))


def test_mutual_information_is_scikit_learns_to_the_last_bit():
    rng = np.random.default_rng(4)
    for trial in range(150):
        n = int(rng.integers(2, 5_000))
        labels = rng.integers(0, int(rng.integers(1, 60)), n)
        clusters = (labels + rng.integers(0, 3, n)) % 40 if trial % 2 else rng.integers(0, 40, n)
        table = partition_metrics.contingency_table(labels, clusters)
        cells = sparse.coo_matrix((table.counts, (table.rows, table.cols)))
        cells.has_canonical_format = True
        expected = mutual_info_score(None, None, contingency=cells)
        assert partition_metrics._mutual_information(table.rows, table.cols, table.counts) == (
            expected
        )


def test_rows_are_sorted_by_distance_then_id():
    rng = np.random.default_rng(5)
    dist = rng.choice([-1.5, -0.0, 0.0, 0.25, 1.0, np.inf], size=(50, 9)).astype(np.float32)
    ids = rng.integers(-1, 30, size=(50, 9)).astype(np.int64)
    got_d, got_i = dist.copy(), ids.copy()
    _host_search.sort_rows(got_d, got_i)
    for row in range(50):
        # -1 (an unfilled heap slot) sorts after every real id at its distance.
        order = np.lexsort((ids[row].astype(np.uint32), dist[row] + 0.0))
        np.testing.assert_array_equal(got_d[row] + 0.0, dist[row][order] + 0.0)
        assert sorted(zip(got_d[row] + 0.0, got_i[row], strict=True)) == sorted(
            zip(dist[row] + 0.0, ids[row], strict=True)
        )
        zero = got_d[row] == 0  # -0.0 and 0.0: equal distances, ids in any order
        np.testing.assert_array_equal(got_i[row][~zero], ids[row][order][~zero])


def _near_ties_by_run_numbers(keys, tol, same):
    """The dense formulation `_host_search.near_ties` replaced: every run numbered."""
    c, kk = keys.shape
    near_gap = np.diff(keys, axis=1, prepend=0.0) <= tol[:, None]
    rescore = near_gap.copy()
    rescore[:, :-1] |= near_gap[:, 1:]
    if same is None or not rescore.any():
        return rescore
    run = np.cumsum(~near_gap, axis=1) + ((kk + 1) * np.arange(c))[:, None]
    members = np.bincount(run.ravel(), minlength=c * (kk + 1))
    alike = np.bincount(run.ravel(), weights=same.ravel(), minlength=c * (kk + 1))
    members[:: kk + 1] += 1
    alike[:: kk + 1] += 1
    return rescore & ((alike > 0) & (alike < members))[run]


def near_tie_cases(cases: int, seed: int = 6):
    """``(keys (c, kk) ascending, tol (c,), same (c, kk) bool or None)``: rows of exact ties,
    near-ties 1e-7 apart, and clear gaps, each row twice (with a class mask, without)."""
    rng = np.random.default_rng(seed)
    for _ in range(cases):
        c, kk = int(rng.integers(1, 30)), int(rng.integers(1, 25))
        steps = rng.choice([0.0, 1e-7, 1e-3, 0.5], size=(c, kk), p=[0.15, 0.2, 0.15, 0.5])
        keys = np.cumsum(steps, axis=1) + rng.choice([0.0, 1e-7, 1.0], size=(c, 1))
        tol = np.full(c, 1e-5)
        for same in (rng.random((c, kk)) < rng.random(), None):
            yield keys, tol, same


def test_near_ties_read_from_the_near_gaps_equal_the_numbered_runs():
    for keys, tol, same in near_tie_cases(500):
        np.testing.assert_array_equal(
            _host_search.near_ties(keys, tol, same), _near_ties_by_run_numbers(keys, tol, same)
        )


def test_numpy_blas_gets_its_thread_counts_back():
    before = [lib.get_num_threads() for lib in _PTHREADS_BLAS]
    with blas_on_one_thread():
        assert all(lib.get_num_threads() == 1 for lib in _PTHREADS_BLAS)
    assert [lib.get_num_threads() for lib in _PTHREADS_BLAS] == before
    with blas_on_one_thread(False):
        assert [lib.get_num_threads() for lib in _PTHREADS_BLAS] == before


@pytest.mark.parametrize("n", [1_500, 2_600])  # the silhouette reads every item, or samples
def test_the_table_is_the_same_on_one_blas_thread_or_more(monkeypatch, n):
    x, y = clustered(n=n, d=24, classes=30, seed=8, twins=0)
    monkeypatch.setattr(table_module, "ONE_THREAD_PRODUCT", 0)
    threads = evaluate_embeddings(x, y, ks=(1, 10))
    monkeypatch.setattr(table_module, "ONE_THREAD_PRODUCT", 1 << 40)
    assert evaluate_embeddings(x, y, ks=(1, 10)) == threads
