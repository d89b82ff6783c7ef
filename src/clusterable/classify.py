"""Deciding a query's label from a labelled gallery: a vote of its nearest gallery items, or the
nearest class mean (`clusterable.index.EmbeddingIndex.classify` documents the rules).

Ties go to the class that sorts first, as scikit-learn's ``KNeighborsClassifier`` (its argmax)
does; the kNN confidence is the winner's share of the vote, scikit-learn's
``predict_proba(...).max(axis=1)``. With a largest distance, a query with nothing within it
(no neighbour, or no class mean) gets the *none* label, :func:`none_label`, at confidence 0:
"none of these" (open-set classification).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np

from clusterable.evaluate.neighbors import knn_search

Weighting = Literal["uniform", "distance"]

#: Elements of the ``(queries, classes)`` vote table built at once.
VOTE_TABLE_ELEMENTS = 1 << 22


class Classification(NamedTuple):
    """What :meth:`~clusterable.index.EmbeddingIndex.classify` decides for each query (unpacks
    as a pair).

    Attributes
    ----------
    labels : np.ndarray
        ``(m,)`` predicted labels, of the gallery's label type (int64 or strings).
    confidence : np.ndarray
        ``(m,)`` float64 in ``[0, 1]``: the predicted label's share of the (weighted) kNN vote,
        or its softmax weight among the class means.
    """

    labels: np.ndarray
    confidence: np.ndarray


def none_label(classes: np.ndarray) -> int | str:
    """The label of "none of these" for labels like ``classes``: -1 for integer labels, ``""``
    for strings (as `EmbeddingIndex.search` marks a missing neighbour's id)."""
    return "" if classes.dtype.kind == "U" else -1


def rejected(result: Classification, none: np.ndarray, classes: np.ndarray) -> Classification:
    """``result`` with the queries where ``none`` ``(m,)`` is True given the none label
    (:func:`none_label`) at confidence 0."""
    labels = result.labels.copy()
    labels[none] = none_label(classes)
    return Classification(labels, np.where(none, 0.0, result.confidence))


def neighbour_vote(
    distances: np.ndarray,
    rows: np.ndarray,
    codes: np.ndarray,
    classes: np.ndarray,
    weighting: Weighting,
) -> Classification:
    """The vote of each query's neighbours: ``distances`` and gallery ``rows`` ``(m, k)`` (row
    -1: a neighbour an approximate search did not find, which does not vote), ``codes`` ``(n,)``
    the gallery items' class numbers into ``classes`` ``(C,)``. ``"distance"`` weighs a vote
    ``1 / distance``; neighbours at distance exactly 0, where a query has any, vote alone, one
    vote each (scikit-learn's rule)."""
    found = rows >= 0  # (m, k)
    if weighting == "uniform":
        weights = found.astype(np.float64)
    else:
        d = distances.astype(np.float64)
        with np.errstate(divide="ignore"):
            weights = np.where(found, 1.0 / d, 0.0)  # (m, k)
        exact = found & (d == 0.0)
        at_zero = exact.any(axis=1)
        weights[at_zero] = exact[at_zero]
    voters = np.where(found, codes[np.where(found, rows, 0)], 0)  # (m, k) class numbers
    m = rows.shape[0]
    labels = np.empty(m, dtype=classes.dtype)
    confidence = np.empty(m)
    step = max(1, VOTE_TABLE_ELEMENTS // classes.size)
    for start in range(0, m, step):
        part = slice(start, start + step)
        n_part = voters[part].shape[0]
        votes = np.zeros((n_part, classes.size))  # (b, C)
        np.add.at(votes, (np.arange(n_part)[:, None], voters[part]), weights[part])
        total = votes.sum(axis=1)
        best = votes.argmax(axis=1)  # first of the tied classes: the one sorting first
        labels[part] = classes[best]
        winner = votes[np.arange(n_part), best]
        confidence[part] = np.where(total > 0, winner / np.where(total > 0, total, 1.0), 0.0)
    return Classification(labels, confidence)


def nearest_class_mean(
    queries: np.ndarray,
    gallery: np.ndarray,
    codes: np.ndarray,
    classes: np.ndarray,
    distance: Literal["euclidean", "cosine"],
    max_distance: float | None = None,
) -> Classification:
    """The class whose mean gallery embedding is nearest to each query (for cosine, the mean of
    the unit-length embeddings), searched exactly; confidence: the softmax weight of its distance
    among all the class means', ``exp(-d_c) / sum_j exp(-d_j)``. A query whose nearest mean is
    farther than ``max_distance`` (when given) gets the none label (:func:`rejected`)."""
    vectors = gallery.astype(np.float64)  # (n, d)
    if distance == "cosine":
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sums = np.zeros((classes.size, vectors.shape[1]))
    np.add.at(sums, codes, vectors)
    means = sums / np.bincount(codes, minlength=classes.size)[:, None]  # (C, d)
    # Means at equal distance come ordered by row, that is by class: the first class wins.
    distances, rows = knn_search(queries, classes.size, means, distance=distance)  # (m, C)
    shifted = distances.astype(np.float64) - distances[:, :1]
    confidence = 1.0 / np.exp(-shifted).sum(axis=1)
    result = Classification(classes[rows[:, 0]], confidence)
    if max_distance is None:
        return result
    return rejected(result, distances[:, 0] > max_distance, classes)
