"""Split names, and the seeded stratified train/test split of sources that have none of their own.

The stratified split serves ``digits``, generic image folders and feature tables, so all three
split alike.
"""

from __future__ import annotations

import numpy as np

#: Splits every loader accepts; ``all`` is train and test together.
SPLITS = ("train", "test", "all")
#: Share of each class that goes to the training split.
TRAIN_FRACTION = 0.7
#: Seed of the split: fixed, so "train" and "test" never overlap across runs or machines.
SPLIT_SEED = 0


def check_split(split: str, name: str) -> None:
    """Raise ValueError unless ``split`` is one of :data:`SPLITS`."""
    if split not in SPLITS:
        raise ValueError(f"{name} has splits {', '.join(SPLITS)}; got split={split!r}")


def stratified_split(
    labels: np.ndarray, train_fraction: float = TRAIN_FRACTION, seed: int = SPLIT_SEED
) -> tuple[np.ndarray, np.ndarray]:
    """Indices of a per-class random split, each part in file order.

    Each class puts ``round(train_fraction * count)`` randomly chosen items into the training part
    (at least one when it has two or more, so every class is on both sides); numpy's PCG64 makes
    the result the same on every machine.

    Parameters
    ----------
    labels : np.ndarray
        ``(n,)`` class of each item.
    train_fraction : float
        Share of each class put in the training part, in (0, 1).
    seed : int
        Seed of the shuffles.

    Returns
    -------
    train, test : np.ndarray
        Sorted int64 indices; together they are ``0..n-1``, without overlap.

    Examples
    --------
    >>> train, test = stratified_split(np.array([0, 0, 0, 1, 1, 1, 1, 1, 1, 1]))
    >>> len(train), len(test)
    (7, 3)
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    train = []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        n_train = round(train_fraction * len(members))
        if len(members) >= 2:
            n_train = min(max(n_train, 1), len(members) - 1)
        train.append(members[:n_train])
    is_train = np.zeros(len(labels), dtype=bool)
    if train:
        is_train[np.concatenate(train)] = True
    return np.flatnonzero(is_train), np.flatnonzero(~is_train)
