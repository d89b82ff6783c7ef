"""The torch back end's steps on its device against their numpy forms and a brute force."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_shortcuts import near_tie_cases  # tests/evaluate: rows of ties and near-ties

from clusterable.evaluate import _host_search, _torch_search
from clusterable.evaluate._torch_search import (
    TorchSearch,
    near_ties,
    order_by_key_then_id,
    order_by_value_then_id,
    select_smallest,
)
from clusterable.evaluate.neighbors import knn_search

STRATEGIES = ["sorted", "unsorted", "segmented"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_selects_the_same_smallest(strategy, device):
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.permutation(40 * 96).reshape(40, 96).astype(np.float32)).to(device)
    expected = x.topk(9, dim=1, largest=False, sorted=True)
    values, columns = select_smallest(x, 9, strategy, segments=8)  # segments of 12
    assert values.shape == columns.shape == (40, 9)
    np.testing.assert_array_equal(values.sort(dim=1).values.cpu(), expected.values.cpu())
    np.testing.assert_array_equal(
        columns.sort(dim=1).values.cpu(), expected.indices.sort(1)[0].cpu()
    )
    np.testing.assert_array_equal(x.gather(1, columns).cpu(), values.cpu())
    # Segments shorter than the selection, or a row that does not split evenly: selected whole.
    for width, segments in ((96, 16), (95, 8)):
        values, _ = select_smallest(x[:, :width], 9, strategy, segments)
        smallest = x[:, :width].topk(9, dim=1, largest=False).values
        np.testing.assert_array_equal(values.sort(dim=1).values.cpu(), smallest.cpu())


def test_rows_are_ordered_by_value_then_id(device):
    rng = np.random.default_rng(1)
    values = rng.choice([-0.0, 0.0, 0.25, 1.0, 3e-39, np.inf], size=(50, 12)).astype(np.float32)
    ids = np.stack([rng.permutation(1000)[:12] for _ in range(50)]).astype(np.int64)
    ids[0, 0] = 2**31 - 1
    got_v, got_i = order_by_value_then_id(
        torch.from_numpy(values).to(device), torch.from_numpy(ids).to(device)
    )
    order = np.lexsort((ids, values + 0.0), axis=-1)  # -0.0 and 0.0 are one distance
    np.testing.assert_array_equal(got_i.cpu(), np.take_along_axis(ids, order, 1))
    np.testing.assert_array_equal(got_v.cpu(), np.take_along_axis(values + 0.0, order, 1))
    assert got_v.dtype == torch.float32 and got_i.dtype == torch.int64


def test_rows_are_ordered_by_key_then_id(device):
    rng = np.random.default_rng(2)
    keys = rng.choice([0.0, 1e-300, 0.5, 0.5 + 2**-53, 7.0], size=(50, 12))
    ids = np.stack([rng.permutation(100)[:12] for _ in range(50)]).astype(np.int64)
    got_k, got_i = order_by_key_then_id(
        torch.from_numpy(keys).to(device), torch.from_numpy(ids).to(device)
    )
    order = np.lexsort((ids, keys), axis=-1)
    np.testing.assert_array_equal(got_i.cpu(), np.take_along_axis(ids, order, 1))
    np.testing.assert_array_equal(got_k.cpu(), np.take_along_axis(keys, order, 1))


def test_near_ties_on_the_device_equal_the_hosts(device):
    for keys, tol, same in near_tie_cases(300):
        got = near_ties(
            torch.from_numpy(keys).to(device),
            torch.from_numpy(tol).to(device),
            None if same is None else torch.from_numpy(same).to(device),
        )
        np.testing.assert_array_equal(got.cpu(), _host_search.near_ties(keys, tol, same))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rescoring_is_exact_block_after_block(monkeypatch, dtype, device):
    rng = np.random.default_rng(13)
    queries = (1e3 + rng.standard_normal((30, 7))).astype(dtype)
    reference = (1e3 + rng.standard_normal((50, 7))).astype(dtype)
    rows, cols = rng.integers(0, 30, 101), rng.integers(0, 50, 101)
    monkeypatch.setattr(_torch_search, "RESCORE_BLOCK", 4 * 7)  # 25 blocks of 4, then 1
    exact = dtype == np.float64
    search = TorchSearch(reference.astype(np.float32), device, reference if exact else None)
    got = search.rescore(
        torch.from_numpy(queries).to(device),
        torch.from_numpy(rows).to(device),
        torch.from_numpy(cols).to(device),
        exact=exact,
    )
    expected = [
        sum((float(a) - float(b)) ** 2 for a, b in zip(queries[i], reference[j], strict=True))
        for i, j in zip(rows, cols, strict=True)
    ]
    np.testing.assert_allclose(got.cpu(), expected, rtol=1e-12)
    assert got.dtype == torch.float64 and got.device.type == device.type


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_padded_references_are_never_candidates(monkeypatch, strategy, device):
    # 101 references padded to 104 for segments of 26: the padding lies at +inf.
    monkeypatch.setattr(_torch_search, "TOPK_STRATEGY", strategy)
    monkeypatch.setattr(_torch_search, "TOPK_SEGMENTS", 4)
    rng = np.random.default_rng(3)
    reference = rng.standard_normal((101, 5)).astype(np.float32)
    search = TorchSearch(reference, device, None)
    assert search.padded.shape == (104, 5) and search.ref.shape == (101, 5)
    queries = torch.from_numpy(reference[:20]).to(device)
    values, ids = search.candidates(queries, 20)
    expected = ((reference[:20, None, :] - reference[None, :, :]) ** 2).sum(-1)
    np.testing.assert_array_equal(
        ids.sort(dim=1).values.cpu(), np.sort(np.argsort(expected, axis=1)[:, :20], axis=1)
    )
    assert (values >= 0).all() and (ids < 101).all()
    np.testing.assert_allclose(
        values.cpu(), np.take_along_axis(expected, ids.cpu().numpy(), 1), atol=1e-5
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_gives_the_searchs_neighbours(monkeypatch, strategy):
    from test_neighbors import brute_force

    monkeypatch.setattr(_torch_search, "TOPK_STRATEGY", strategy)
    monkeypatch.setattr(_torch_search, "TOPK_SEGMENTS", 4)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((301, 6)).astype(np.float32)
    x[[5, 77, 290]] = x[100]  # exact duplicates: ordered by index
    _, found = knn_search(x, 12, backend="torch", chunk_size=50)
    np.testing.assert_array_equal(found, brute_force(x, 12)[1])
    _, found = knn_search(x[:40], 12, x, backend="torch")
    np.testing.assert_array_equal(found, brute_force(x[:40], 12, x)[1])


def test_the_search_products_are_ieee_float32_whatever_the_user_set(monkeypatch):
    # TF32 keeps 10 mantissa bits: distances off beyond the near-tie bound. The user's setting
    # is put back after the search.
    seen = []
    addmm = torch.addmm

    def recording(*args, **kwargs):
        seen.append(torch.get_float32_matmul_precision())
        return addmm(*args, **kwargs)

    monkeypatch.setattr(torch, "addmm", recording)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # what allow_tf32 = True sets
    try:
        x = np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32)
        knn_search(x, 3, backend="torch")
        assert seen and set(seen) == {"highest"}
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)
