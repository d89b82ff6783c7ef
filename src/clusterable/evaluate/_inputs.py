"""Input conversion and validation shared by every metric.

Every public function of `clusterable.evaluate` accepts numpy arrays or torch tensors and turns them
into clean numpy arrays here, once, at its start, so that a wrong input fails early with a message
that says what to do, instead of deep inside faiss or scipy. The private cores behind the public
functions take those clean arrays and check nothing again.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

Metric = Literal["euclidean", "cosine"]

#: Cluster id that marks noise (as `clusterable.cluster.aas` returns it).
NOISE = -1


def to_numpy(x: Any, name: str) -> np.ndarray:
    """A numpy view or copy of ``x`` (numpy array, torch tensor, or nested sequence)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor, without importing torch here
        x = x.detach().cpu().numpy()
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{name} could not be read as an array ({err}); pass a numpy array or a torch tensor."
        ) from err


def as_embeddings(x: Any, name: str = "emb") -> np.ndarray:
    """Embeddings as a C-contiguous ``(n, d)`` array with finite values: float64 stays float64,
    every other type becomes float32 (so a float64 set is ranked at float64 resolution).

    Raises
    ------
    ValueError
        If ``x`` is not 2-D, is empty, is not numeric, or has rows with NaN or inf.
    """
    arr = to_numpy(x, name)
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array (n items, d dimensions), got shape "
            f"{arr.shape}; reshape it to (n, d)."
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(
            f"{name} is empty (shape {arr.shape}); pass at least one item and one dimension."
        )
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}.")
    arr = np.ascontiguousarray(arr, dtype=np.float64 if arr.dtype == np.float64 else np.float32)
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)
        raise ValueError(
            f"{name} has {rows.size} row(s) with NaN or inf (first: row {rows[0]}); "
            "drop or fix those items before evaluating."
        )
    return arr


def as_points(x: np.ndarray, metric: Metric, name: str = "emb") -> np.ndarray:
    """The points the distance ``metric`` compares: ``x`` itself (euclidean) or its rows
    l2-normalised (cosine, where ``|a - b|^2 = 2 - 2 cos``), from the output of `as_embeddings`.

    Raises
    ------
    ValueError
        If ``metric`` is neither, or (cosine) a row is all zeros.
    """
    if metric == "euclidean":
        return x
    if metric != "cosine":
        raise ValueError(f"metric must be 'euclidean' or 'cosine', got {metric!r}.")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if (norms == 0).any():
        row = int(np.flatnonzero(norms[:, 0] == 0)[0])
        raise ValueError(
            f"{name} row {row} is all zeros and has no direction for cosine distance; "
            "drop it or use metric='euclidean'."
        )
    return np.ascontiguousarray(x / norms, dtype=x.dtype)


def check_same_dimension(query: np.ndarray, reference: np.ndarray) -> None:
    """Fail when queries and references live in spaces of different dimension."""
    if reference.shape[1] != query.shape[1]:
        raise ValueError(
            f"query has dimension {query.shape[1]} but reference has {reference.shape[1]}; "
            "embed both with the same model."
        )


def as_labels(y: Any, n: int, name: str = "labels") -> tuple[np.ndarray, np.ndarray]:
    """Encode labels as compact codes ``0 .. C-1``.

    Labels only need to be sorted together. Numbers and strings cannot be: an object array that
    mixes them (``[3, "cat"]``) is an error rather than a guess, since ``1`` and ``"1"`` could be
    one class or two; convert every label to one type first.

    Parameters
    ----------
    y : array-like
        ``(n,)`` labels of any type ``numpy.unique`` can sort (ints, integral floats, strings, an
        object array of either); ``(n, 1)`` is accepted too.
    n : int
        The number of items the labels must describe.
    name : str
        Argument name used in error messages.

    Returns
    -------
    codes : numpy.ndarray
        ``(n,)`` int64, ``codes[i]`` is the rank of ``y[i]`` among the distinct labels.
    classes : numpy.ndarray
        ``(C,)`` the distinct labels, sorted; ``classes[codes] == y``.

    Raises
    ------
    ValueError
        If the labels have the wrong shape or length, are missing (NaN, inf, None), are
        non-integer floats, or mix types that cannot be sorted together.
    """
    arr = to_numpy(y, name)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one label per item), got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise ValueError(
            f"{name} has {arr.shape[0]} entries but there are {n} items; pass one "
            "label per embedding row."
        )
    if np.issubdtype(arr.dtype, np.floating):
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or inf; every item needs a label.")
        if not (arr == np.round(arr)).all():
            raise ValueError(f"{name} holds non-integer floats; pass integer class ids.")
    if arr.dtype == object:
        missing = np.flatnonzero(
            [
                value is None or (isinstance(value, (float, np.floating)) and np.isnan(value))
                for value in arr
            ]
        )
        if missing.size:
            raise ValueError(
                f"{name} has {missing.size} missing label(s) (None or NaN; first: row "
                f"{missing[0]}); every item needs a label: drop those items or give them a class."
            )
    try:
        classes, codes = np.unique(arr, return_inverse=True)
    except TypeError:  # an object array whose labels Python cannot order, e.g. 3 and "cat"
        first_row_of_type: dict[type, int] = {}
        for row, value in enumerate(arr):
            first_row_of_type.setdefault(type(value), row)
        examples = ", ".join(
            f"{type(arr[row]).__name__} {arr[row]!r} (row {row})"
            for row in sorted(first_row_of_type.values())
        )
        raise ValueError(
            f"{name} mixes label types that cannot be sorted together: {examples}; give every "
            "item a label of one type, e.g. labels.astype(str) or integer class ids."
        ) from None
    return codes.reshape(-1).astype(np.int64), classes


def as_clusters(c: Any, n: int, name: str = "clusters") -> np.ndarray:
    """Encode cluster ids as compact codes, each noise point (id -1) becoming its own cluster.

    Treating noise as singletons keeps every item in the score (no metric silently evaluates on a
    subset) and never rewards declaring points noise: a singleton forms no pair, so it adds nothing
    to pairwise precision and costs pairwise recall; in NMI and Hungarian accuracy it is a cluster
    of one that agrees with its class only by itself.

    Returns
    -------
    numpy.ndarray
        ``(n,)`` int64 codes ``0 .. K-1``.

    Raises
    ------
    ValueError
        If the ids are not integers, have the wrong length, or go below -1.
    """
    arr = to_numpy(c, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one cluster id per item), got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise ValueError(
            f"{name} has {arr.shape[0]} entries but labels has {n}; pass one cluster id per item."
        )
    if not np.issubdtype(arr.dtype, np.integer):
        if not (np.issubdtype(arr.dtype, np.floating) and (arr == np.round(arr)).all()):
            raise ValueError(f"{name} must hold integer cluster ids, got dtype {arr.dtype}.")
    arr = arr.astype(np.int64)
    if n and arr.min() < NOISE:
        raise ValueError(
            f"{name} has ids below {NOISE}; use non-negative ids, and {NOISE} only for noise."
        )
    noise = arr == NOISE
    if noise.any():
        # Fresh ids above every real one make each noise point a singleton cluster.
        arr = arr.copy()
        arr[noise] = arr.max() + 1 + np.arange(int(noise.sum()))
    _, codes = np.unique(arr, return_inverse=True)
    return codes.reshape(-1).astype(np.int64)


def check_k(k: int, available: int, what: str) -> None:
    """Fail when a neighbour count is not a positive int or exceeds what the set holds."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"{what} must be a positive integer, got {k!r}.")
    if k > available:
        raise ValueError(
            f"{what} = {k} but only {available} candidate neighbour(s) exist; lower "
            f"{what} to at most {available} or evaluate on a larger set."
        )


def check_ks(ks: Any, available: int) -> tuple[int, ...]:
    """Validate a list of K values (an int is a list of one) and return them sorted, unique."""
    ks_tuple = (ks,) if isinstance(ks, (int, np.integer)) else tuple(ks)
    if not ks_tuple:
        raise ValueError("ks is empty; pass at least one K, e.g. ks=(1, 2, 4, 8).")
    for k in ks_tuple:
        check_k(k, available, "K")
    return tuple(sorted({int(k) for k in ks_tuple}))


def require_classes(codes: np.ndarray, minimum: int, metric: str) -> None:
    """Fail when fewer than ``minimum`` distinct classes are present."""
    found = int(codes.max()) + 1 if codes.size else 0
    if found < minimum:
        raise ValueError(
            f"{metric} needs at least {minimum} classes but the labels hold {found}; "
            "evaluate on a set with more classes."
        )
