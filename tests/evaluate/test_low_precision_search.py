"""The low-precision candidate pass (`_low_precision`): its error bound holds and is tight, and the
search and the evaluation table through it equal the float32 pass's (bf16 products on the CPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterable.evaluate import _low_precision, _torch_search, neighbors
from clusterable.evaluate._low_precision import CandidatePass, error_coefficients
from clusterable.evaluate._torch_search import TorchSearch
from clusterable.evaluate.neighbors import knn_search
from clusterable.evaluate.table import evaluate_embeddings

CPU = torch.device("cpu")


def _adversarial_pairs(d: int) -> np.ndarray:
    """Rows whose bfloat16 rounding errs by almost ``2**-8`` in every coordinate, the same way:
    the pairs among them nearly reach the bound."""
    magnitude = np.float32(1.0 + 0.99 * 2.0**-8)  # rounds down to 1.0, by almost half a step
    signs = np.where(np.random.default_rng(1).random((4, d)) < 0.5, -1.0, 1.0)
    return (magnitude * np.concatenate([signs, signs * 3.0])).astype(np.float32)


def _bound_ratios(
    points: np.ndarray, precision: str = "bf16", device: torch.device = CPU
) -> np.ndarray:
    """``|L~ - E| / (A |q| |r| + C |r|^2)`` for every pair of ``points`` (exact ``E`` in float64
    from the float32 points)."""
    ref = torch.from_numpy(points).to(device)
    ref_sq = (ref * ref).sum(1)
    candidate_pass = CandidatePass(ref, ref_sq, len(points), precision)  # type: ignore[arg-type]
    low = candidate_pass.partials(ref).double().cpu().numpy()  # (n, n)
    x = points.astype(np.float64)
    exact = (x * x).sum(1)[None, :] - 2.0 * x @ x.T  # |r|^2 - 2 q.r
    norms = np.sqrt((x * x).sum(1))
    a, c = candidate_pass.coefficients
    bound = a * norms[:, None] * norms[None, :] + c * norms[None, :] ** 2
    return np.abs(low - exact) / bound


@pytest.mark.parametrize("d", [128, 37])
def test_the_bound_holds_on_every_pair_and_is_within_4x_of_tight(d):
    rng = np.random.default_rng(d)
    gaussian = rng.standard_normal((300, d)).astype(np.float32)
    norms = np.exp(rng.uniform(-6, 6, (300, 1))).astype(np.float32)  # norms over 5 decades
    clustered = rng.standard_normal((4, d))[rng.integers(0, 4, 300)] + 0.01 * gaussian
    points = np.concatenate([gaussian, gaussian * norms, clustered, _adversarial_pairs(d)])
    ratios = _bound_ratios(points.astype(np.float32))
    assert ratios.max() <= 1.0
    # A quarter of the bound would not hold: the adversarial pairs come within 4x of it.
    assert ratios.max() > 0.25


@pytest.mark.cuda
@pytest.mark.parametrize("precision", ["bf16", "tf32"])
def test_on_cuda_the_bound_holds_and_the_neighbours_equal(monkeypatch, precision):
    rng = np.random.default_rng(5)
    points = np.concatenate([rng.standard_normal((500, 128)), _adversarial_pairs(128)])
    assert _bound_ratios(points.astype(np.float32), precision, torch.device("cuda")).max() <= 1
    for name in ("bunched", "duplicates", "large-norms"):
        x, distance = _datasets()[name]
        monkeypatch.setitem(_torch_search.CANDIDATE_PASS, "cuda", None)
        expected = knn_search(x, 10, distance=distance, backend="cuda")
        monkeypatch.setitem(_torch_search.CANDIDATE_PASS, "cuda", precision)
        got = knn_search(x, 10, distance=distance, backend="cuda")
        np.testing.assert_array_equal(got[1], expected[1])


def test_error_coefficients_follow_the_derivation():
    a, c = error_coefficients(2.0**-8, 128)
    # A ~ 2 (2 v + v^2) dominates: 4 * 2**-8; C ~ gamma_128 with u = 2**-23.
    assert 4 * 2.0**-8 < a < 4 * 2.0**-8 * 1.01
    assert 128 * 2.0**-23 < c < 130 * 2.0**-23
    a32, c32 = error_coefficients(0.0, 128)
    assert a32 < 300 * 2.0**-23 and c32 == c


def _datasets() -> dict[str, tuple[np.ndarray, str]]:
    """Adversarial sets: near-ties, duplicates, large norms, clusters, d = 128 and odd d."""
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((8, 128)).astype(np.float32)
    clustered = centres[rng.integers(0, 8, 1200)] + 0.3 * rng.standard_normal((1200, 128))
    base = rng.standard_normal((300, 128)).astype(np.float32)
    duplicates = np.repeat(base, 4, axis=0)  # runs of 4 exact ties, within TIE_PAD
    near = np.repeat(base, 4, axis=0) * (1 + 1e-6 * rng.standard_normal((1200, 1)))
    odd = rng.standard_normal((1200, 37))
    large = rng.standard_normal((1200, 128)) * np.exp(rng.uniform(0, 9, (1200, 1)))  # to ~8e3
    # The million set's kind (bench_evaluate.make_data): distances bunch near sqrt(2).
    bunched = centres[rng.integers(0, 8, 1200)] + 1.5 * rng.standard_normal((1200, 128))
    bunched /= np.linalg.norm(bunched, axis=1, keepdims=True)
    # Runs of 30 points within bfloat16's resolution of each other.
    jittered = np.repeat(base[:40], 30, axis=0) + 1e-3 * rng.standard_normal((1200, 128))
    return {
        "clustered-euclidean": (clustered.astype(np.float32), "euclidean"),
        "clustered-cosine": (clustered.astype(np.float32), "cosine"),
        "duplicates": (duplicates, "euclidean"),
        "near-ties": (near.astype(np.float32), "euclidean"),
        "odd-d": (odd.astype(np.float32), "euclidean"),
        "large-norms": (large.astype(np.float32), "euclidean"),
        "bunched": (bunched.astype(np.float32), "cosine"),
        "jittered": (jittered.astype(np.float32), "euclidean"),
        "float64": (clustered, "euclidean"),
    }


# "jittered": runs of near-ties longer than TIE_PAD at the k-th place, whose rows both passes
# search again over every reference (neighbors._may_miss_one).
@pytest.mark.parametrize("name", list(_datasets()))
def test_the_neighbours_equal_the_float32_pass(monkeypatch, name):
    points, distance = _datasets()[name]
    monkeypatch.setitem(_torch_search.CANDIDATE_PASS, "cpu", None)
    expected = knn_search(points, 10, distance=distance, backend="torch", device="cpu")
    monkeypatch.setitem(_torch_search.CANDIDATE_PASS, "cpu", "bf16")
    got = knn_search(points, 10, distance=distance, backend="torch", device="cpu")
    np.testing.assert_array_equal(got[1], expected[1])
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6, atol=1e-6)


def test_a_row_whose_window_overflows_the_cap_is_searched_in_float32(monkeypatch):
    points, _ = _datasets()["jittered"]
    ref = torch.from_numpy(points)
    search = TorchSearch(points, CPU, None, "bf16")
    low_pass = search.low_pass
    assert low_pass is not None
    # A cap of kk: every row whose window holds one reference beyond its kk overflows.
    monkeypatch.setitem(_low_precision.CAP_FACTOR, "bf16", 1.0)
    _, ids = search.candidates(ref[:200], 19)
    _, expected_ids = search.float32_candidates(ref[:200], 19)
    assert low_pass.fallback_rows > 0
    np.testing.assert_array_equal(ids.sort(1).values, expected_ids.sort(1).values)
    # Without the check (no row falls back) the bfloat16 selection alone keeps wrong references.
    monkeypatch.setattr(CandidatePass, "window", lambda self, q: torch.full((len(q),), -torch.inf))
    _, ids = search.candidates(ref[:200], 19)
    assert not torch.equal(ids.sort(1).values, expected_ids.sort(1).values)


def test_the_evaluation_table_equals_the_float32_pass(monkeypatch):
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 12, 1500)
    centres = rng.standard_normal((12, 128)).astype(np.float32)
    emb = centres[labels] + 1.5 * rng.standard_normal((1500, 128)).astype(np.float32)
    emb[::7] = emb[1::7][: len(emb[::7])]  # duplicated points across classes
    monkeypatch.setattr(neighbors, "faiss_available", lambda: False)  # torch on the CPU
    metrics = ["recall@k", "precision@1", "map@r", "r_precision"]
    tables = []
    for precision in (None, "bf16"):
        monkeypatch.setitem(_torch_search.CANDIDATE_PASS, "cpu", precision)
        table = evaluate_embeddings(emb, labels, metrics=metrics, ks=(1, 10), device="cpu")
        tables.append(dict(table))
    assert tables[0] == tables[1]


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(60, 300),
    d=st.integers(1, 40),
    kk=st.integers(1, 20),
    log_scale=st.floats(-3, 3),
    seed=st.integers(0, 2**16),
)
def test_the_candidates_differ_only_by_boundary_ties(n, d, kk, log_scale, seed):
    rng = np.random.default_rng(seed)
    points = (rng.standard_normal((n, d)) * 10.0**log_scale).astype(np.float32)
    points[: n // 3] = points[n // 3 : 2 * (n // 3)]  # duplicates
    search = TorchSearch(points, CPU, None, "bf16")
    queries = torch.from_numpy(points[:30])
    _, ids = search.candidates(queries, kk)
    values, expected = search.float32_candidates(queries, kk)
    x = points.astype(np.float64)
    exact = ((x[:30, None, :] - x[None, :, :]) ** 2).sum(-1)  # (30, n)
    a32, c32 = error_coefficients(0.0, d)
    q_norm, r_max = np.sqrt((x[:30] ** 2).sum(1)), np.sqrt((x**2).sum(1).max())
    slack = 2 * (a32 * q_norm * r_max + c32 * r_max**2) + 1e-30  # (30,)
    boundary = values.max(1).values.double().numpy()  # each row's kk-th float32 distance
    for row in range(30):
        differ = set(ids[row].tolist()) ^ set(expected[row].tolist())
        for ref in differ:  # only members of a tie (in float32) at the kk-th place
            assert abs(exact[row, ref] - boundary[row]) <= slack[row] + 1e-6 * boundary[row]
