"""Input conversion and validation shared by every metric.

Every public function of `clusterable.evaluate` accepts numpy arrays or torch tensors and turns them
into clean numpy arrays here, once, at its start, so that a wrong input fails early with a message
that says what to do, instead of deep inside faiss or scipy. The private cores behind the public
functions take those clean arrays and check nothing again. Embeddings and labels are checked by
the package's one rule (`clusterable._arrays`), which clustering and the search index apply too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import numpy as np

from clusterable._arrays import as_embeddings, as_labels, to_numpy

__all__ = [
    "NOISE",
    "Metric",
    "as_clusters",
    "as_embeddings",
    "as_labels",
    "as_points",
    "check_k",
    "check_ks",
    "check_same_dimension",
    "require_classes",
    "to_numpy",
]

Metric = Literal["euclidean", "cosine"]

#: Cluster id that marks noise (as `clusterable.cluster.aas` returns it).
NOISE = -1


def as_points(x: np.ndarray, distance: Metric, name: str = "emb") -> np.ndarray:
    """The points the ``distance`` compares: ``x`` itself (euclidean) or its rows l2-normalised
    (cosine, where ``|a - b|^2 = 2 - 2 cos``), from the output of `as_embeddings`.

    Raises
    ------
    ValueError
        If ``distance`` is neither, or (cosine) a row is all zeros.
    """
    if distance == "euclidean":
        return x
    if distance != "cosine":
        raise ValueError(f"distance must be 'euclidean' or 'cosine', got {distance!r}.")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if (norms == 0).any():
        row = int(np.flatnonzero(norms[:, 0] == 0)[0])
        raise ValueError(
            f"{name} row {row} is all zeros and has no direction for cosine distance; "
            "drop it or use distance='euclidean'."
        )
    return np.ascontiguousarray(x / norms, dtype=x.dtype)


def check_same_dimension(query: np.ndarray, reference: np.ndarray) -> None:
    """Fail when queries and references live in spaces of different dimension."""
    if reference.shape[1] != query.shape[1]:
        raise ValueError(
            f"query has dimension {query.shape[1]} but reference has {reference.shape[1]}; "
            "embed both with the same model."
        )


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
    if arr.ndim == 2 and arr.shape[1] == 1:  # (n, 1), as labels may be
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one cluster id per item), got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise ValueError(
            f"{name} has {arr.shape[0]} entries but there are {n} items; pass one cluster id per "
            "item."
        )
    if not np.issubdtype(arr.dtype, np.integer):
        if not (np.issubdtype(arr.dtype, np.floating) and (arr == np.round(arr)).all()):
            raise ValueError(
                f"{name} must hold integer cluster ids (-1 for noise), got dtype {arr.dtype}; "
                f"number named clusters first: numpy.unique({name}, return_inverse=True)[1]."
            )
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


def check_ks(ks: Any, available: int, name: str = "ks", each: str = "K") -> tuple[int, ...]:
    """Validate a list of K values (an int is a list of one) and return them sorted, unique.

    ``name`` is the argument's name and ``each`` what one value is called, in messages.
    """
    if isinstance(ks, (int, np.integer)):
        ks_tuple: tuple[Any, ...] = (ks,)
    elif isinstance(ks, Iterable) and not isinstance(ks, str):
        ks_tuple = tuple(ks)
    else:
        raise ValueError(
            f"{name} must be a positive integer or a sequence of them, e.g. {name}=(1, 2, 4, 8); "
            f"got {ks!r}."
        )
    if not ks_tuple:
        raise ValueError(f"{name} is empty; pass at least one {each}, e.g. {name}=(1, 2, 4, 8).")
    for k in ks_tuple:
        check_k(k, available, each)
    return tuple(sorted({int(k) for k in ks_tuple}))


def require_classes(codes: np.ndarray, minimum: int, metric: str) -> None:
    """Fail when fewer than ``minimum`` distinct classes are present."""
    found = int(codes.max()) + 1 if codes.size else 0
    if found < minimum:
        raise ValueError(
            f"{metric} needs at least {minimum} classes but the labels hold {found}; "
            "evaluate on a set with more classes."
        )
