"""Squared distances of k-means seeding and the silhouette: exact to rounding, never negative,
and the same bits whatever the BLAS thread count (what keeps a sharded table exact)."""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from clusterable._distances import squared_distances


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_equal_the_loop_and_keep_the_dtype(dtype):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((7, 5)).astype(dtype), rng.standard_normal((11, 5)).astype(dtype)
    loop = np.array([[((p - q) ** 2).sum() for q in b.astype(np.float64)] for p in a])
    got = squared_distances(a, b)
    assert got.dtype == dtype and got.shape == (7, 11)
    np.testing.assert_allclose(got, loop, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


def test_duplicates_are_zero_not_negative():
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((50, 64)) * 3.0 + 5.0).astype(np.float32)
    assert (squared_distances(a, a) >= 0.0).all()


@pytest.mark.parametrize("d", [16, 512])
def test_one_thread_or_all_give_the_same_bits(d):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((844, d), dtype=np.float32)
    b = rng.standard_normal((3000, d), dtype=np.float32)
    everyone = squared_distances(a, b)
    with threadpool_limits(limits=1, user_api="blas"):
        one = squared_distances(a, b)
    np.testing.assert_array_equal(one, everyone)
