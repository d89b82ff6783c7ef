"""ROC AUC and FNMR@FMR over all pairs: equal to a brute force over the same float32 distances."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score
from test_verification import NOT_RATES  # tests/evaluate: fmr values that are no rate

from clusterable.evaluate import evaluate_embeddings, fnmr_at_fmr, pair_scores
from clusterable.evaluate import pair_metrics as pm
from clusterable.evaluate._inputs import as_points
from clusterable.evaluate.registry import metric_of_key, parse_metric, table_keys

RATES = (0.0, 1e-3, 0.05, 0.3, 0.5, 1.0)


def brute_pairs(points, codes, is_query=None):
    """Every pair's float32 distance from the grid's own tiles, and whether it is positive."""
    grid = pm._PairGrid(points, codes, is_query, "euclidean")
    rows, cols = grid.row_codes, grid.col_codes
    keys, same = [], []
    for r0 in range(0, len(rows), pm.TILE):
        for c0 in range(r0 if grid.symmetric else 0, len(cols), pm.TILE):
            r1, c1 = min(r0 + pm.TILE, len(rows)), min(c0 + pm.TILE, len(cols))
            k = grid._keys(r0, r1, c0, c1)
            s = rows[r0:r1, None] == cols[None, c0:c1]
            kept = k != pm._NO_PAIR
            keys.append(k[kept].copy())
            same.append(s[kept])
    d = np.concatenate(keys).view(np.float32).astype(np.float64)
    return d, np.concatenate(same)


def exact_integer_pairs(x, codes, is_query=None):
    """Brute force independent of the module: integer points give exact squared distances."""
    x64 = x.astype(np.int64)
    sq = ((x64[:, None, :] - x64[None, :, :]) ** 2).sum(-1)
    d = np.sqrt(sq.astype(np.float32)).astype(np.float64)  # float32 sqrt, correctly rounded
    same = codes[:, None] == codes[None, :]
    if is_query is None:
        i, j = np.triu_indices(len(x), k=1)
    else:
        i, j = np.meshgrid(np.flatnonzero(is_query), np.flatnonzero(~is_query), indexing="ij")
        i, j = i.ravel(), j.ravel()
    return d[i, j], same[i, j]


def check_against(scores, d, same, rates):
    assert scores.positives == int(same.sum()) and scores.negatives == int((~same).sum())
    assert scores.roc_auc == pytest.approx(roc_auc_score(same, -d), rel=1e-12, abs=0)
    expected = fnmr_at_fmr(d[same], d[~same], rates)
    assert [scores.fnmr[q] for q in rates] == expected.tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_sklearn_and_fnmr_at_fmr_with_many_ties(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, size=(260, 3)).astype(np.float32)  # many exactly equal distances
    codes = rng.integers(0, 12, 260)
    d, same = exact_integer_pairs(x, codes)
    assert len(np.unique(d)) < 50  # ties everywhere
    check_against(pm.pair_scores(x, codes, fmr=RATES), d, same, RATES)


def test_query_gallery_pairs_and_several_tiles(monkeypatch):
    monkeypatch.setattr(pm, "TILE", 64)  # a grid of many tiles, diagonal and not
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, size=(300, 4)).astype(np.float32)
    codes = rng.integers(0, 30, 300)
    is_query = rng.random(300) < 0.4
    for flags in (None, is_query):
        d, same = exact_integer_pairs(x, codes, flags)
        check_against(pm.pair_scores(x, codes, flags, fmr=RATES), d, same, RATES)


@pytest.mark.parametrize("queries", [False, True])
def test_the_torch_passes_a_gpu_runs_count_the_same(monkeypatch, queries):
    """The torch grid (on the CPU here; on a GPU where the evaluation runs there), on tiles of
    its own side."""
    monkeypatch.setattr(pm, "TILE", 64)
    monkeypatch.setattr(pm, "GPU_TILE", 48)
    monkeypatch.setattr(pm, "REFINE_CELLS", 1 << 17)  # two bins a pass
    rng = np.random.default_rng(10)
    x = rng.integers(-2, 3, size=(230, 3)).astype(np.float32)
    codes = rng.integers(0, 15, 230)
    flags = rng.random(230) < 0.5 if queries else None
    scores = pm._pair_scores(x, codes, flags, "euclidean", True, RATES, torch.device("cpu"))
    check_against(scores, *exact_integer_pairs(x, codes, flags), RATES)


def test_the_torch_passes_compute_ieee_float32_distances_under_tf32(monkeypatch):
    """A user's TF32 setting (10-bit products on a GPU) is set aside for the passes' products,
    and given back after."""
    seen = []
    tile_keys = pm._TorchGrid._tile_keys

    def recording(self, *bounds):
        seen.append(torch.get_float32_matmul_precision())
        return tile_keys(self, *bounds)

    monkeypatch.setattr(pm._TorchGrid, "_tile_keys", recording)
    rng = np.random.default_rng(11)
    x, codes = rng.normal(size=(60, 4)).astype(np.float32), rng.integers(0, 5, 60)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        pm._pair_scores(x, codes, None, "euclidean", True, (0.1,), torch.device("cpu"))
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)
    assert seen and set(seen) == {"highest"}


def test_refinement_in_batches_of_few_bins(monkeypatch):
    """Real-valued distances spread over many coarse bins, refined a bin per pass."""
    monkeypatch.setattr(pm, "REFINE_CELLS", 1 << 16)
    rng = np.random.default_rng(4)
    codes = rng.integers(0, 6, 200)
    x = (rng.normal(size=(200, 8)) + codes[:, None] * 0.3).astype(np.float32)
    scores = pm.pair_scores(x, codes, fmr=(1e-3, 0.2))
    d, same = brute_pairs(x, codes)
    check_against(scores, d, same, (1e-3, 0.2))
    assert scores.passes > 3


def test_cosine_distance_and_monotone_invariance():
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 5, 150)
    x = as_points((rng.normal(size=(150, 6)) + codes[:, None]).astype(np.float32), "cosine")
    cosine = pm._pair_scores(x, codes, None, "cosine", True, (0.1,))
    euclidean = pm._pair_scores(x, codes, None, "euclidean", True, (0.1,))
    # On unit rows |a - b| = sqrt(2 - 2 cos): the same order, so the same AUC up to the ties
    # the two roundings merge, and the same share of positives above the threshold.
    assert cosine.roc_auc == pytest.approx(euclidean.roc_auc, abs=1e-3)
    assert cosine.fnmr[0.1] == pytest.approx(euclidean.fnmr[0.1], abs=0.02)
    d = 1.0 - x.astype(np.float64) @ x.astype(np.float64).T
    same = codes[:, None] == codes[None, :]
    i, j = np.triu_indices(150, k=1)
    assert cosine.roc_auc == pytest.approx(roc_auc_score(same[i, j], -d[i, j]), abs=1e-3)


def test_scaling_the_embeddings_by_a_power_of_two_changes_nothing():
    rng = np.random.default_rng(6)
    codes = rng.integers(0, 8, 180)
    x = rng.normal(size=(180, 5)).astype(np.float32)
    a = pm.pair_scores(x, codes, fmr=(0.01, 0.5))
    b = pm.pair_scores(x * 8, codes, fmr=(0.01, 0.5))
    assert (a.roc_auc, a.fnmr) == (b.roc_auc, b.fnmr)


def test_no_positive_or_no_negative_pair_is_a_clear_error():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    with pytest.raises(ValueError, match="no same-class pair"):
        pm.pair_scores(x, np.arange(6))
    with pytest.raises(ValueError, match="no different-class pair"):
        pm.pair_scores(x, np.zeros(6, np.int64))
    with pytest.raises(ValueError, match="no same-class pair"):
        evaluate_embeddings(x, np.arange(6), metrics=["roc_auc"])


def test_memory_stays_bounded_where_n_squared_would_not_fit(monkeypatch):
    """5,000 items: 12.5 M pairs (50 MB as float32) never held: the passes count tiles."""
    import tracemalloc

    monkeypatch.setattr(pm, "TILE", 512)
    monkeypatch.setattr(pm, "REFINE_CELLS", 1 << 18)  # 4 bins a pass
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 500, 5000)
    x = rng.integers(0, 3, size=(5000, 4)).astype(np.float32)
    tracemalloc.start()
    scores = pm.pair_scores(x, codes, fmr=(1e-3,))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert scores.positives + scores.negatives == 5000 * 4999 // 2
    assert peak < 25e6, peak  # the refined bins (2 x 2 MB) and one tile, not 12.5 M pairs


@pytest.mark.parametrize("torch_grid", [False, True])
def test_one_item_is_counted_as_no_pair(torch_grid):
    """One item makes no pair; the refusal said "among the 1 pairs evaluated", counting the
    product of the item with itself."""
    on = torch.device("cpu") if torch_grid else None
    one = np.ones((1, 2), np.float32)
    with pytest.raises(ValueError, match="no same-class pair among the 0 pairs evaluated"):
        pm._pair_scores(one, np.zeros(1, np.int64), None, "euclidean", True, (), on)


def test_the_table_names_and_keys():
    assert parse_metric("fnmr@fmr") == ("fnmr@fmr", 0.001)
    assert parse_metric("fnmr@fmr=1e-4") == ("fnmr@fmr", 0.0001)
    assert metric_of_key("fnmr@fmr=0.001") == "fnmr@fmr=0.001"
    assert metric_of_key("fnmr@fmr=1e-3") is None  # keys have one spelling
    assert metric_of_key("roc_auc") == "roc_auc"
    assert {"roc_auc", "fnmr@fmr=EPS"} <= set(table_keys())
    with pytest.raises(ValueError, match=r"number in \[0, 1\]"):
        parse_metric("fnmr@fmr=2")
    with pytest.raises(ValueError, match="unknown metric"):
        parse_metric("roc_auc=0.1")


def test_the_pair_metrics_close_the_table_whatever_is_imported_first():
    code = (
        "from clusterable.evaluate import evaluate_embeddings\n"
        "from clusterable.evaluate.registry import available_metrics\n"
        "print(available_metrics()[-3:])"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "['silhouette', 'roc_auc', 'fnmr@fmr']"


def test_the_command_line_declares_the_parameterised_names_of_the_registry():
    from clusterable.cli._names import PARAMETERISED_METRICS

    declared = {f"{name}=EPS" for name in PARAMETERISED_METRICS}
    assert declared == {key for key in table_keys() if key.endswith("=EPS")}


def test_evaluate_embeddings_keys_one_spelling_per_rate():
    rng = np.random.default_rng(8)
    x = rng.integers(0, 3, size=(120, 3)).astype(np.float32)
    codes = rng.integers(0, 10, 120)
    table = evaluate_embeddings(
        x, codes, metrics=["fnmr@fmr=1e-3", "fnmr@fmr=0.001", "fnmr@fmr=0.1", "roc_auc"]
    )
    assert list(table) == ["roc_auc", "fnmr@fmr=0.001", "fnmr@fmr=0.1"]
    d, same = exact_integer_pairs(x, codes)
    assert table["fnmr@fmr=0.1"] == fnmr_at_fmr(d[same], d[~same], 0.1)[0]


def test_the_command_line_evaluates_them_on_saved_embeddings(tmp_path):
    rng = np.random.default_rng(9)
    codes = rng.integers(0, 10, 150)
    x = (rng.normal(size=(150, 4)) + codes[:, None]).astype(np.float32)
    np.save(tmp_path / "emb.npy", x)
    np.save(tmp_path / "labels.npy", codes)
    out = tmp_path / "t.json"
    args = ["evaluate", str(tmp_path / "emb.npy"), str(tmp_path / "labels.npy")]
    run = subprocess.run(
        [sys.executable, "-m", "clusterable", *args, "--metrics", "roc_auc", "fnmr@fmr=1e-3"]
        + ["--json", str(out)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "ROC AUC (all pairs)" in run.stdout and "FNMR at FMR = 0.001" in run.stdout
    table = json.loads(out.read_text())
    assert set(table) == {"roc_auc", "fnmr@fmr=0.001"}
    d, same = brute_pairs(x, codes)
    assert table["roc_auc"] == pytest.approx(roc_auc_score(same, -d), rel=1e-12)
    typo = subprocess.run(
        [sys.executable, "-m", "clusterable", *args, "--metrics", "fnmr@fmt=1e-3"],
        capture_output=True,
        text=True,
    )
    assert typo.returncode == 2 and "did you mean fnmr@fmr" in typo.stderr


@pytest.mark.parametrize(("fmr", "message"), NOT_RATES)
def test_pair_scores_reads_fmr_as_fnmr_at_fmr_does(fmr, message):
    """ "0.1" was float('.')'s error, [True] a rate of 1, [[0.1]] float()'s TypeError."""
    x, y = np.random.default_rng(0).normal(size=(12, 3)), np.arange(12) % 3
    with pytest.raises(ValueError, match=message):
        pair_scores(x, y, fmr=fmr)
    assert pair_scores(x, y, fmr=np.float32(0.5)).fnmr.keys() == {float(np.float32(0.5))}
