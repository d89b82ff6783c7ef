"""Input checks shared by the partition algorithms: errors say what was wrong and what to do."""

from __future__ import annotations

import numbers

import numpy as np


def check_points(x: object, *, dtype: type = np.float64) -> np.ndarray:
    """Return ``x`` as a C-contiguous ``(n, d)`` array of ``dtype`` with finite values.

    Torch tensors are accepted (moved to CPU and detached) so that embeddings can be passed as they
    come out of a model.

    Raises
    ------
    ValueError
        If ``x`` is not two-dimensional, is empty, or holds NaN or infinite values.
    """
    if hasattr(x, "detach"):  # torch.Tensor, without importing torch here
        x = x.detach().cpu().numpy()
    array = np.asarray(x)
    if array.ndim != 2:
        raise ValueError(
            f"expected a 2-D array of points (n_samples, n_features), got shape {array.shape}; "
            "reshape a single feature with x.reshape(-1, 1)"
        )
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"expected at least one point and one feature, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"expected real numbers, got dtype {array.dtype}")
    array = np.ascontiguousarray(array, dtype=dtype)
    finite = np.isfinite(array).all(axis=1)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise ValueError(
            f"{bad.size} point(s) hold NaN or infinite values (first rows: {bad[:5].tolist()}); "
            "drop or impute them before clustering"
        )
    return array


def check_n_clusters(k: object, n_samples: int) -> int:
    """Return ``k`` as an int after checking ``1 <= k <= n_samples``."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise ValueError(f"the number of clusters must be an integer, got {k!r}")
    k = int(k)
    if not 1 <= k <= n_samples:
        raise ValueError(
            f"cannot make {k} clusters from {n_samples} points: choose 1 <= k <= {n_samples}"
        )
    return k
