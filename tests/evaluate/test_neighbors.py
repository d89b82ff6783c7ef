"""Exact kNN search: brute-force reference, faiss vs torch, duplicates, chunking, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from clusterable.evaluate import _host_search, neighbors
from clusterable.evaluate.neighbors import faiss_available, knn_search

BACKENDS = ["torch", *(["faiss"] if faiss_available() else [])]


def brute_force(query, k, reference=None, metric="euclidean"):
    """float64 distances, sorted by (distance, index), own row dropped by index."""
    q = np.asarray(query, dtype=np.float64)
    r = q if reference is None else np.asarray(reference, dtype=np.float64)
    if metric == "cosine":
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        r = r / np.linalg.norm(r, axis=1, keepdims=True)
    out_d, out_i = [], []
    for i in range(q.shape[0]):
        d2 = ((r - q[i]) ** 2).sum(1)
        order = [
            j for j in np.lexsort((np.arange(r.shape[0]), d2)) if reference is not None or j != i
        ]
        order = np.array(order[:k])
        out_i.append(order)
        out_d.append(np.sqrt(d2[order]) if metric == "euclidean" else d2[order] / 2)
    return np.array(out_d), np.array(out_i)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
@pytest.mark.parametrize("with_reference", [False, True])
def test_matches_brute_force(backend, metric, with_reference):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((300, 12)).astype(np.float32)
    ref = rng.standard_normal((250, 12)).astype(np.float32) if with_reference else None
    d, i = knn_search(x, 9, ref, distance=metric, backend=backend)
    d_ref, i_ref = brute_force(x, 9, ref, metric)
    np.testing.assert_array_equal(i, i_ref)
    np.testing.assert_allclose(d, d_ref, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not faiss_available(), reason="faiss not installed")
@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_faiss_and_torch_identical_high_dim(metric):
    # High-dimensional distances concentrate, so near-ties are common: re-scoring must align them.
    rng = np.random.default_rng(2)
    centres = rng.standard_normal((40, 128))
    x = (centres[rng.integers(0, 40, 3000)] + rng.standard_normal((3000, 128))).astype(np.float32)
    d1, i1 = knn_search(x, 30, distance=metric, backend="faiss")
    d2, i2 = knn_search(x, 30, distance=metric, backend="torch")
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_allclose(d1, d2, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_duplicates_self_removed_by_index_and_ties_by_index(backend):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((200, 8)).astype(np.float32)
    x[[50, 120, 7]] = x[90]  # four identical points: 7, 50, 90, 120
    d, i = knn_search(x, 4, backend=backend)
    for row, expected in [
        (7, [50, 90, 120]),
        (50, [7, 90, 120]),
        (90, [7, 50, 120]),
        (120, [7, 50, 90]),
    ]:
        assert i[row, :3].tolist() == expected  # twins first, lowest index first, never itself
        assert (d[row, :3] == 0).all()
    assert not (i == np.arange(200)[:, None]).any()
    np.testing.assert_array_equal(i, brute_force(x, 4)[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_chunking_does_not_change_results(backend):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((157, 16)).astype(np.float32)
    x[3] = x[100]
    base = knn_search(x, 6, backend=backend)
    for chunk in (1, 7, 64, 1000):
        d, i = knn_search(x, 6, backend=backend, chunk_size=chunk)
        np.testing.assert_array_equal(i, base[1])
        np.testing.assert_allclose(d, base[0], rtol=1e-6)  # BLAS blocking moves the last bit


def test_torch_and_numpy_inputs_agree():
    x = np.random.default_rng(5).standard_normal((60, 4))
    np.testing.assert_array_equal(knn_search(x, 3)[1], knn_search(torch.from_numpy(x), 3)[1])


def test_auto_falls_back_to_torch(monkeypatch):
    x = np.random.default_rng(6).standard_normal((80, 5))
    expected = knn_search(x, 4, backend="torch")[1]
    monkeypatch.setattr(neighbors, "faiss_available", lambda: False)
    # On the CPU (on a GPU machine "auto" would mean CUDA): without faiss, torch searches.
    np.testing.assert_array_equal(knn_search(x, 4, device="cpu")[1], expected)


def test_k_equal_to_all_others():
    x = np.random.default_rng(7).standard_normal((10, 3))
    _, i = knn_search(x, 9)
    assert all(sorted(row) == [j for j in range(10) if j != n] for n, row in enumerate(i.tolist()))


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((np.zeros((5, 2)), 5), {}, "at most 4"),
        ((np.zeros((5, 2)), 0), {}, "positive integer"),
        ((np.zeros((5, 2)), 2, np.zeros((4, 3))), {}, "dimension"),
        ((np.array([[0.0, 1.0], [np.nan, 1.0], [1.0, 1.0]]), 1), {}, "NaN"),
        ((np.zeros(5), 1), {}, "2-D"),
        ((np.ones((5, 2)), 1), {"distance": "manhattan"}, "'euclidean' or 'cosine'"),
        ((np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), 1), {"distance": "cosine"}, "all zeros"),
        ((np.ones((5, 2)), 1), {"backend": "annoy"}, "backend"),
    ],
)
def test_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        knn_search(*args, **kwargs)


def test_float64_points_far_from_the_origin_are_ranked_in_float64():
    # Differences of 1e-3 at 1e4 from the origin are below float32 resolution (about 1e-3):
    # rounded to float32 the points tie or swap (precision@1 fell from 0.475 to 0.42).
    from clusterable.evaluate import precision_at_1

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 20, 200)
    noise = 1e-3 * (rng.normal(size=(20, 8))[labels] + rng.normal(size=(200, 8)))
    squared = ((noise[:, None] - noise[None]) ** 2).sum(-1)
    np.fill_diagonal(squared, np.inf)
    expected = float((labels[squared.argmin(1)] == labels).mean())
    assert precision_at_1(1e4 + noise, labels) == expected
    distances, indices = knn_search(1e4 + noise, 1)
    assert distances.dtype == np.float64
    np.testing.assert_array_equal(indices[:, 0], squared.argmin(1))
    np.testing.assert_allclose(distances[:, 0] ** 2, squared.min(1), rtol=1e-6)


def twins_across_panels(seed, n=1400, d=16, classes=40):
    """Points with a near-twin each (a near-tie in every query's list) in another class."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n // 2, d))
    twins = base + 1e-5 * rng.standard_normal((n // 2, d))
    x = np.concatenate([base, twins]).astype(np.float32)
    y = rng.integers(0, classes, n // 2)
    return x, np.concatenate([y, (y + 1) % classes])


@pytest.mark.skipif(not faiss_available(), reason="the symmetric self-search runs in faiss")
def test_symmetric_self_search_equals_the_query_by_query_search(monkeypatch):
    x, _ = twins_across_panels(7)
    x[1300:] = x[:100]  # exact duplicates in another row panel
    # Several column panels per row panel, and row panels of unequal length.
    monkeypatch.setattr(_host_search, "_PANEL_ELEMENTS", _host_search._PANEL_ROWS * 600)
    calls = []
    symmetric = _host_search.symmetric_self_search
    monkeypatch.setattr(
        _host_search, "symmetric_self_search", lambda *a: calls.append(1) or symmetric(*a)
    )
    d_sym, i_sym = knn_search(x, 20, backend="faiss")
    assert calls == [1]
    monkeypatch.setattr(_host_search, "SYMMETRIC_MAX_CANDIDATES", 0)
    d_plain, i_plain = knn_search(x, 20, backend="faiss")
    assert calls == [1]
    np.testing.assert_array_equal(i_sym, i_plain)
    np.testing.assert_allclose(d_sym, d_plain, rtol=1e-5)
    np.testing.assert_array_equal(i_sym, brute_force(x, 20)[1])


@pytest.mark.skipif(not faiss_available(), reason="the symmetric self-search runs in faiss")
def test_heap_ceilings_hold_kk_others_below_them():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2 * 8 * _host_search.PILOT_ROWS, 12)).astype(np.float32)
    for kk in (_host_search.PILOT_MIN_CANDIDATES, 100):
        ceilings = _host_search.heap_ceilings(x, kk)
        assert ceilings is not None
        squared = ((x[:, None].astype(np.float64) - x[None]) ** 2).sum(-1)  # (n, n)
        below = (squared < ceilings[:, None]).sum(1) - 1  # (n,) others: the row itself is at 0
        assert below.min() >= kk
        # ... and not far more: the heaps take about kk ln(below / kk) insertions.
        assert np.median(below) < 8 * kk
    assert _host_search.heap_ceilings(x, _host_search.PILOT_MIN_CANDIDATES - 1) is None
    assert _host_search.heap_ceilings(x[: 8 * _host_search.PILOT_ROWS - 1], 100) is None


@pytest.mark.skipif(not faiss_available(), reason="the symmetric self-search runs in faiss")
def test_heap_ceilings_leave_the_symmetric_search_unchanged(monkeypatch):
    # A block of exact duplicates: their sampled ceilings are 0, which their panel distances
    # (float32 rounding around 0) may or may not undercut.
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2 * 8 * _host_search.PILOT_ROWS, 12)).astype(np.float32)
    x[:400] = x[0]
    kk = 40
    ceilings = _host_search.heap_ceilings(x, kk)
    assert ceilings is not None and (ceilings[:400] == 0).all()
    d_ceiled, i_ceiled = _host_search.symmetric_self_search(x, kk)
    monkeypatch.setattr(_host_search, "PILOT_MIN_CANDIDATES", 10**9)
    assert _host_search.heap_ceilings(x, kk) is None
    d_plain, i_plain = _host_search.symmetric_self_search(x, kk)
    # Rows searched again get faiss's query-by-query distances, equal up to float32 rounding.
    np.testing.assert_allclose(d_ceiled[400:], d_plain[400:], rtol=1e-5)
    np.testing.assert_array_equal(i_ceiled[400:], i_plain[400:])
    np.testing.assert_allclose(d_ceiled[:400], 0.0, atol=1e-5)
    # Among the duplicates any kk of the 399 others at distance 0 are right; never the row itself.
    assert (i_ceiled[:400] >= 0).all() and (i_ceiled[:400] < 400).all()
    assert not (i_ceiled[:400] == np.arange(400)[:, None]).any()


@pytest.mark.skipif(not faiss_available(), reason="the symmetric self-search runs in faiss")
def test_rows_left_short_by_their_ceiling_are_searched_again(monkeypatch):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2 * 8 * _host_search.PILOT_ROWS, 12)).astype(np.float32)
    kk = 50
    real = _host_search.heap_ceilings
    # Every third row gets a ceiling below all its distances: its heap keeps only ids -1.
    low = lambda x, kk: np.where(np.arange(x.shape[0]) % 3 == 0, -1.0, real(x, kk))  # noqa: E731
    monkeypatch.setattr(_host_search, "heap_ceilings", low)
    d_low, i_low = _host_search.symmetric_self_search(x, kk)
    monkeypatch.setattr(_host_search, "heap_ceilings", lambda x, kk: None)
    d_plain, i_plain = _host_search.symmetric_self_search(x, kk)
    np.testing.assert_array_equal(i_low, i_plain)
    np.testing.assert_allclose(d_low, d_plain, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rescore_gives_exact_distances_block_after_block(monkeypatch, dtype):
    rng = np.random.default_rng(12)
    queries = (1e3 + rng.standard_normal((30, 7))).astype(dtype)
    reference = (1e3 + rng.standard_normal((50, 7))).astype(dtype)
    rows, cols = rng.integers(0, 30, 101), rng.integers(0, 50, 101)
    # 4 pairs per block: 25 full blocks and a last one of 1 pair.
    monkeypatch.setattr(_host_search, "_RESCORE_BLOCK", 4 * 7)
    got = _host_search.rescore_pairs(queries, reference, rows, cols)
    expected = [
        sum((float(a) - float(b)) ** 2 for a, b in zip(queries[i], reference[j], strict=True))
        for i, j in zip(rows, cols, strict=True)
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert _host_search.rescore_pairs(queries, reference, rows[:0], cols[:0]).shape == (0,)


@pytest.mark.skipif(not faiss_available(), reason="the choice is between two faiss searches")
def test_small_sets_with_a_hundred_neighbours_are_searched_query_by_query(monkeypatch):
    # Below SYMMETRIC_MIN_ITEMS, faiss selects k >= 100 with reservoirs faster than the heaps of
    # the each-pair-once search; both give the same neighbours.
    x, _ = twins_across_panels(8)
    calls = []
    symmetric = _host_search.symmetric_self_search
    monkeypatch.setattr(
        _host_search, "symmetric_self_search", lambda *a: calls.append(1) or symmetric(*a)
    )
    d_plain, i_plain = knn_search(x, 120, backend="faiss")
    knn_search(x, 20, backend="faiss")  # fewer neighbours: faiss would use heaps too
    assert calls == [1]
    monkeypatch.setattr(_host_search, "SYMMETRIC_MIN_ITEMS", 0)
    d_sym, i_sym = knn_search(x, 120, backend="faiss")
    assert calls == [1, 1]
    np.testing.assert_array_equal(i_sym, i_plain)
    np.testing.assert_allclose(d_sym, d_plain, rtol=1e-5)


def test_auto_searches_on_the_gpu_when_torch_sees_one(monkeypatch):
    on_cpu = "faiss" if faiss_available() else "torch"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert neighbors._resolve("auto") == "cuda"
    assert neighbors._resolve("auto", "cpu") == on_cpu  # the device given, not the detection
    assert neighbors._resolve("auto") == "cuda"  # the CPU named before is not remembered
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert neighbors._resolve("auto") == on_cpu
    with pytest.raises(ValueError, match="GPU"):
        knn_search(np.zeros((5, 2)), 1, backend="cuda")


@pytest.mark.cuda
def test_the_gpu_search_and_table_equal_the_cpu_ones():
    from clusterable.evaluate import evaluate_embeddings

    rng = np.random.default_rng(11)
    y = rng.integers(0, 30, 3000)
    x = (rng.standard_normal((30, 64))[y] + 2.0 * rng.standard_normal((3000, 64))).astype(
        np.float32
    )
    x[2900:] = x[:100]  # duplicates: exact ties
    np.testing.assert_array_equal(knn_search(x, 20, backend="cuda")[1], brute_force(x, 20)[1])
    on_gpu = evaluate_embeddings(x, y, ks=(1, 10), device="cuda")
    on_cpu = evaluate_embeddings(x, y, ks=(1, 10), device="cpu")
    for key in ("recall@1", "recall@10", "precision@1", "map@r", "r_precision"):
        assert on_gpu[key] == on_cpu[key]
    assert on_gpu["nmi"] == pytest.approx(on_cpu["nmi"], abs=0.01)


def _coinciding_in_float32(seed: int = 0, n: int = 400, group: int = 40):
    """Unit-scale points, ``group`` of them within 1e-9 to 5e-9 of one spot: more than the
    candidate list holds coincide in float32, yet float64 tells them apart."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 8))
    spot = rng.standard_normal(8)
    x[:group] = spot + rng.uniform(1e-9, 5e-9, (group, 1)) * rng.standard_normal((group, 8))
    labels = rng.integers(0, 10, n)
    labels[:group] = rng.integers(0, 3, group)
    return x, labels


def _float64_brute_force(queries, reference, k, exclude_self):
    sq = ((queries[:, None, :] - reference[None, :, :]) ** 2).sum(-1)  # (m, n), exact
    if exclude_self:
        np.fill_diagonal(sq, np.inf)
    ids = np.broadcast_to(np.arange(reference.shape[0]), sq.shape)
    return np.lexsort((ids, sq), axis=-1)[:, :k]


@pytest.mark.parametrize("backend", ["faiss", "torch"])
def test_float64_is_exact_however_many_points_coincide_in_float32(backend):
    if backend == "faiss" and not faiss_available():
        pytest.skip("faiss not installed")
    x, _ = _coinciding_in_float32()
    expected = _float64_brute_force(x, x, 3, exclude_self=True)
    _, found = knn_search(x, 3, backend=backend)
    np.testing.assert_array_equal(found, expected)
    _, found = knn_search(x[:40], 3, x, backend=backend)
    np.testing.assert_array_equal(found, _float64_brute_force(x[:40], x, 3, exclude_self=False))


def test_float64_metrics_and_index_are_exact_inside_a_float32_tie_group():
    from clusterable.evaluate import evaluate_embeddings
    from clusterable.index import EmbeddingIndex

    x, labels = _coinciding_in_float32(seed=1)
    nearest = _float64_brute_force(x, x, 1, exclude_self=True)[:, 0]
    table = evaluate_embeddings(x, labels, metrics=["precision@1"])
    assert table["precision@1"] == pytest.approx(np.mean(labels[nearest] == labels), abs=1e-12)
    _, rows, _ = EmbeddingIndex.build(x).search(x[:40], 3)
    np.testing.assert_array_equal(rows, _float64_brute_force(x[:40], x, 3, exclude_self=False))


def _near_duplicate_runs(seed=0, runs=6, size=40, n_far=200, spread=1e-3):
    """float32 points: ``runs`` runs of ``size`` near-duplicates (``spread`` apart, within the
    near-tie tolerance of one another, more than ``k + TIE_PAD`` of them) among far points."""
    rng = np.random.default_rng(seed)
    spots = 3.0 * rng.standard_normal((runs, 64))
    near = np.repeat(spots, size, axis=0) + spread * rng.standard_normal((runs * size, 64))
    far = 3.0 * rng.standard_normal((n_far, 64))
    x = np.vstack([near, far]).astype(np.float32)
    return x, np.r_[rng.integers(0, 3, runs * size), rng.integers(3, 20, n_far)]


@pytest.mark.parametrize("backend", [*BACKENDS, pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("k", [1, 10, 25])
def test_float32_runs_of_near_ties_longer_than_the_candidates_are_exact(backend, k):
    x, _ = _near_duplicate_runs()
    assert k + neighbors.TIE_PAD + 1 < 40  # each run reaches past the candidate list
    exact = x.astype(np.float64)
    _, found = knn_search(x, k, backend=backend)
    np.testing.assert_array_equal(found, _float64_brute_force(exact, exact, k, exclude_self=True))
    _, found = knn_search(x[:50], k, x[100:], backend=backend)
    expected = _float64_brute_force(exact[:50], exact[100:], k, exclude_self=False)
    np.testing.assert_array_equal(found, expected)


def test_float32_retrieval_metrics_are_exact_among_near_duplicates():
    from clusterable.evaluate import evaluate_embeddings

    x, labels = _near_duplicate_runs(seed=1)
    exact = x.astype(np.float64)
    nearest = _float64_brute_force(exact, exact, 10, exclude_self=True)
    hits = labels[nearest] == labels[:, None]  # (n, 10)
    table = evaluate_embeddings(x, labels, metrics=["precision@1", "recall@k"], ks=(1, 10))
    assert table["precision@1"] == pytest.approx(hits[:, 0].mean(), abs=1e-12)
    assert table["recall@10"] == pytest.approx(hits.any(axis=1).mean(), abs=1e-12)


@pytest.mark.parametrize("side", ["host", "device"])
def test_a_row_searched_again_with_too_low_a_bound_still_gets_its_nearest(side):
    """`exact_nearest` reads each row's bound on its width-th distance; one below it (a float32
    list that erred beyond the rounding bound) widens to the row's width-th screened distance.
    The host's (numpy) and the device's (torch) give the same."""
    from clusterable.evaluate import _torch_search

    x, _ = _near_duplicate_runs()
    exact = x.astype(np.float64)
    own = np.array([0, 5, 250, 300])
    nearest = _float64_brute_force(exact, exact, 19, exclude_self=True)[own]
    for within in (np.full(4, np.inf), np.zeros(4)):
        if side == "host":
            ref_sq = np.einsum("nd,nd->n", x, x, dtype=np.float64)
            ids, keys = _host_search.exact_nearest(x[own], x, ref_sq, own, 19, within, True)
        else:
            search = _torch_search.TorchSearch(x, torch.device("cpu"), None)
            ids, keys = _torch_search.exact_nearest(
                search.ref[own],
                search.ref,
                search.ref.double().square().sum(1),
                torch.from_numpy(own),
                19,
                torch.from_numpy(within),
                True,
                search,
            )
            ids, keys = ids.numpy(), keys.numpy()
        np.testing.assert_array_equal(ids, nearest)
        assert (np.diff(keys, axis=1) >= 0).all()
