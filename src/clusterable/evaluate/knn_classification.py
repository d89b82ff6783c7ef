"""k-nearest-neighbour classification accuracy from one search: each item takes the majority
class of its k nearest references (train -> test, or leave-one-out), as in Musgrave, Belongie and
Lim, "A Metric Learning Reality Check", ECCV 2020 (pytorch-metric-learning's ``AccuracyCalculator``
reports the same score as ``precision_at_1`` for k = 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from clusterable._arrays import label_kind, label_values
from clusterable.device import DeviceSpec
from clusterable.evaluate._inputs import Metric as Distance
from clusterable.evaluate._inputs import (
    as_embeddings,
    as_points,
    check_ks,
    check_same_dimension,
)
from clusterable.evaluate._keywords import refuse_renamed
from clusterable.evaluate.neighbors import knn_chunks


def majority_vote(neighbour_codes: np.ndarray) -> np.ndarray:
    """The most frequent class in each row; ties go to the class met first (the nearest voter).

    Parameters
    ----------
    neighbour_codes : numpy.ndarray
        ``(m, k)`` class codes of each query's neighbours, nearest first.

    Returns
    -------
    numpy.ndarray
        ``(m,)`` predicted class codes.
    """
    k = neighbour_codes.shape[1]
    votes = (neighbour_codes[:, :, None] == neighbour_codes[:, None, :]).sum(axis=2)  # (m, k)
    # Most votes first; among equals, the smallest rank, i.e. the class of the nearest voter.
    best = np.argmax(votes * (k + 1) - np.arange(k), axis=1)
    return neighbour_codes[np.arange(neighbour_codes.shape[0]), best]


@overload
def knn_accuracy(
    train_emb: Any,
    train_y: Any,
    test_emb: Any = None,
    test_y: Any = None,
    *,
    k: int,
    distance: Distance = "euclidean",
    device: DeviceSpec = "auto",
) -> float: ...
@overload
def knn_accuracy(
    train_emb: Any,
    train_y: Any,
    test_emb: Any,
    test_y: Any,
    k: int,
    *,
    distance: Distance = "euclidean",
    device: DeviceSpec = "auto",
) -> float: ...
@overload
def knn_accuracy(
    train_emb: Any,
    train_y: Any,
    test_emb: Any = None,
    test_y: Any = None,
    k: Sequence[int] = (1, 3, 5, 7),
    *,
    distance: Distance = "euclidean",
    device: DeviceSpec = "auto",
) -> dict[int, float]: ...
@refuse_renamed(metric="distance")
def knn_accuracy(
    train_emb: Any,
    train_y: Any,
    test_emb: Any = None,
    test_y: Any = None,
    k: int | Sequence[int] = (1, 3, 5, 7),
    *,
    distance: Distance = "euclidean",
    device: DeviceSpec = "auto",
) -> float | dict[int, float]:
    """k-nearest-neighbour classification accuracy, train -> test or leave-one-out.

    Each test item takes the majority class of its k nearest training items. Tie rule: among the
    classes with the most votes, the one whose nearest voter is closest wins (equivalently, the
    class met first in the distance-sorted neighbour list). (``clusterable classify`` and
    :meth:`clusterable.index.EmbeddingIndex.classify` follow scikit-learn instead: the label that
    sorts first.)

    Parameters
    ----------
    train_emb, train_y : array-like
        ``(n, d)`` reference embeddings and ``(n,)`` labels.
    test_emb, test_y : array-like, optional
        ``(m, d)`` and ``(m,)``. When both are omitted, leave-one-out on the training set: each
        item is classified by the others.
    k : int or sequence of int
        One k, or several (answered from one search).
    distance : {"euclidean", "cosine"}
        Distance used to rank neighbours.
    device : str or torch.device
        Where the search runs (a CUDA device, or the CPU); ``"auto"``: a GPU when torch sees one.

    Returns
    -------
    float or dict of int to float
        The accuracy for an int ``k``; ``{k: accuracy}`` for a sequence (each k once, ascending).

    Raises
    ------
    ValueError
        If an input is malformed (`clusterable._arrays`), a ``k`` is not a positive int or
        exceeds the references, or ``train_y`` and ``test_y`` are of different kinds (numbers
        and strings).

    Examples
    --------
    >>> knn_accuracy([[0.0], [1.0], [10.0]], [0, 0, 1], [[0.4], [9.0]], [0, 1], k=1)
    1.0
    """
    train = as_points(as_embeddings(train_emb, "train_emb"), distance, "train_emb")
    leave_one_out = test_emb is None and test_y is None
    if (test_emb is None) != (test_y is None):
        raise ValueError("pass both test_emb and test_y, or neither for leave-one-out.")
    train_labels = label_values(train_y, train.shape[0], "train_y")
    if leave_one_out:
        queries, test_labels = train, train_labels
    else:
        queries = as_points(as_embeddings(test_emb, "test_emb"), distance, "test_emb")
        check_same_dimension(queries, train)
        test_labels = label_values(test_y, queries.shape[0], "test_y")
        if label_kind(train_labels) != label_kind(test_labels):
            raise ValueError(
                f"train_y holds {label_kind(train_labels)} but test_y holds "
                f"{label_kind(test_labels)}; give both sets labels of one kind (e.g. both the "
                "class names, or both the class ids)."
            )
    single = isinstance(k, (int, np.integer))
    ks = check_ks(k, train.shape[0] - int(leave_one_out), "k", "k")
    # One encoding for both sets, so equal labels get equal codes.
    _, codes = np.unique(np.concatenate([train_labels, test_labels]), return_inverse=True)
    codes = codes.reshape(-1)
    train_codes, test_codes = codes[: train.shape[0]], codes[train.shape[0] :]
    correct = dict.fromkeys(ks, 0)
    reference = None if leave_one_out else train
    for start, _, idx in knn_chunks(queries, max(ks), reference, distance=distance, device=device):
        truth = test_codes[start : start + idx.shape[0]]
        neighbour_codes = train_codes[idx]  # (c, k_max)
        for kk in ks:
            correct[kk] += int((majority_vote(neighbour_codes[:, :kk]) == truth).sum())
    acc = {kk: correct[kk] / queries.shape[0] for kk in ks}
    return acc[ks[0]] if single else acc
