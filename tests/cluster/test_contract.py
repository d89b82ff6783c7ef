"""What every registered clusterer does, the built-in ones and any registered later: predict on the
fitted points returns labels_, a seed fixes the result, save and load give the same partition at
the same path, the points are checked once, odd inputs give labels or a ValueError."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterable import cluster
from clusterable.cluster import (
    Partition,
    available_clusterings,
    clusterer_info,
    fit,
    resolve_n_clusters,
    run_clustering,
)

CENTRES = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 1.0], [0.0, 8.0, -1.0], [8.0, 8.0, 0.0]])


def blobs(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return CENTRES[np.arange(n) % len(CENTRES)] + rng.normal(scale=0.7, size=(n, 3))


def fitted(name: str, x: np.ndarray, seed: int = 0) -> Partition:
    """``name`` fitted as the package asks it: the class count where it takes one."""
    return fit(x, name, resolve_n_clusters(name, n_classes=len(CENTRES)), seed=seed)


@pytest.mark.parametrize("name", available_clusterings())
def test_predict_on_the_fitted_points_returns_labels(name):
    x = blobs(160, 0)
    partition = fitted(name, x)
    assert partition.labels_.shape == (160,) and partition.labels_.dtype == np.int64
    assert partition.method == name
    np.testing.assert_array_equal(partition.predict(x), partition.labels_)
    new = blobs(40, 1)
    assigned = partition.predict(new)
    noise = {-1} if clusterer_info(name).noise else set()
    assert assigned.shape == (40,)
    assert set(assigned.tolist()) <= set(partition.labels_.tolist()) | noise


@pytest.mark.parametrize("name", available_clusterings())
def test_the_same_seed_gives_the_same_partition(name):
    x = blobs(120, 2)
    first, again = fitted(name, x, seed=3), fitted(name, x, seed=3)
    np.testing.assert_array_equal(first.labels_, again.labels_)
    new = blobs(30, 4)
    np.testing.assert_array_equal(first.predict(new), again.predict(new))
    count = resolve_n_clusters(name, n_classes=4)
    np.testing.assert_array_equal(
        run_clustering(x, name, count, seed=3), run_clustering(x, name, count, seed=3)
    )


@pytest.mark.parametrize("name", available_clusterings())
def test_save_and_load_take_the_same_path_and_keep_the_rule(tmp_path, name):
    x = blobs(160, 0)
    partition = fitted(name, x)
    path = tmp_path / f"{name}.partition"  # any suffix: the file is where it was asked to be
    assert partition.save(path) == path
    loaded = Partition.load(path)
    new = np.random.default_rng(3).uniform(-3, 11, size=(200, 3))
    np.testing.assert_array_equal(loaded.predict(new), partition.predict(new))
    np.testing.assert_array_equal(loaded.labels_, partition.labels_)
    assert (type(loaded), loaded.method, loaded.options) == (
        type(partition),
        name,
        partition.options,
    )
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


@pytest.mark.parametrize("name", available_clusterings())
def test_one_fit_checks_the_points_once(monkeypatch, name):
    # Every module of the package that can check points, counted together.
    from clusterable.cluster import _validation

    calls = []
    real = _validation.check_points

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(_validation, "check_points", counted)
    modules = [m for m in vars(cluster).values() if hasattr(m, "check_points")]
    modules += [
        __import__(f"clusterable.cluster.{m}", fromlist=["_"])
        for m in ("registry", "partition", "kmeans", "spectral", "gmm", "aas", "hdbscan")
    ]
    for module in modules:
        if hasattr(module, "check_points"):
            monkeypatch.setattr(module, "check_points", counted)
    fitted(name, blobs(80, 0))
    assert len(calls) == 1


@pytest.mark.parametrize("name", available_clusterings())
@settings(max_examples=12, deadline=None)
@given(
    n=st.integers(1, 12),
    d=st.integers(1, 3),
    k=st.integers(1, 12),
    kind=st.sampled_from(["random", "constant", "duplicates"]),
)
def test_odd_inputs_give_consistent_labels_or_a_value_error(name, n, d, k, kind):
    rng = np.random.default_rng(n * 100 + d)
    x = {"random": rng.normal(size=(n, d)), "constant": np.full((n, d), 3.0)}.get(
        kind, np.repeat(rng.normal(size=(2, d)), n, axis=0)[:n]
    )
    try:
        partition = fit(x, name, resolve_n_clusters(name, n_classes=k))
    except ValueError as err:
        assert str(err)  # a message, not a bare error
        return
    assert partition.labels_.shape == (n,) and partition.labels_.min() >= -1
    np.testing.assert_array_equal(partition.predict(x), partition.labels_)
    if not clusterer_info(name).noise:
        assert partition.labels_.min() == 0
