"""Split names, and the seeded stratified train/test split of sources that have none of their own.

The stratified split serves ``digits``, generic image folders and feature tables, so all three
split alike.
"""

from __future__ import annotations

from typing import Any

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


def training_share(count: int, train_fraction: float) -> int:
    """How many of a class's ``count`` items :func:`stratified_split` puts in the training part:
    ``round(train_fraction * count)``, at least one and at most ``count - 1`` when there are two
    or more (so every class is on both sides)."""
    n_train = round(train_fraction * count)
    return min(max(n_train, 1), count - 1) if count >= 2 else n_train


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
        train.append(members[: training_share(len(members), train_fraction)])
    is_train = np.zeros(len(labels), dtype=bool)
    if train:
        is_train[np.concatenate(train)] = True
    return np.flatnonzero(is_train), np.flatnonzero(~is_train)


def _counts(labels: np.ndarray) -> np.ndarray:
    """Items of each class id ``0 .. max`` among the labelled ``labels`` (-1: unlabelled)."""
    labels = np.asarray(labels)
    return np.bincount(labels[labels >= 0])


def items_needed(val_fraction: float, train_fraction: float = TRAIN_FRACTION) -> int:
    """The fewest items a class needs for :func:`stratified_split` (then ``val_fraction`` of its
    training part held out) to leave it two test items and two training items."""
    count = 2
    while True:
        train = training_share(count, train_fraction)
        if val_fraction > 0:
            train = training_share(train, 1.0 - val_fraction)
        if count - training_share(count, train_fraction) >= 2 and train >= 2:
            return count
        count += 1


def check_enough_items(name: str, train: Any, val: Any, test: Any, val_fraction: float) -> None:
    """Refuse, before training, data whose splits leave no class two items to train on or to
    test: no pair to learn from, nothing to retrieve, and a clustering of single items that
    scores 100 % whatever the model. ``train``, ``val`` and ``test`` are the run's
    :class:`~clusterable.data.LabelledDataset` splits (``val`` None where it holds none out,
    ``test`` None for unlabelled items); a test split of queries and a gallery (``is_query``) is
    judged by its own protocol, not here.

    Raises
    ------
    ValueError
        One line naming the smallest class, how many items each split got of it, and how many
        per class a run needs.
    """
    parts = {"train": train, "validation": val, "test": test}
    counts = {part: _counts(ds.labels) for part, ds in parts.items() if ds is not None}
    problems = []
    if counts["train"].max(initial=0) < 2:
        problems.append("no class of the training split holds two items, so no pair to learn")
    if test is not None and test.is_query is None and counts["test"].max(initial=0) < 2:
        problems.append(
            "no class of the test split holds two items, so the test table could neither "
            "retrieve nor cluster (single items score 100 %)"
        )
    if not problems:
        return
    names = list(train.class_names or [])
    width = max(len(c) for c in counts.values())
    total = np.sum([np.pad(c, (0, width - len(c))) for c in counts.values()], axis=0)
    present = np.flatnonzero(total)
    smallest = int(present[np.argmin(total[present])]) if present.size else 0
    label = names[smallest] if smallest < len(names) else str(smallest)
    shares = ", ".join(
        f"{int(c[smallest]) if smallest < len(c) else 0} {part}" for part, c in counts.items()
    )
    raise ValueError(
        f"{name} is too small for a run: {'; '.join(problems)}. Its smallest class {label!r} "
        f"holds {int(total[smallest])} item(s) ({shares}); a run needs at least "
        f"{items_needed(val_fraction)} per class (two to test, two to train after "
        f"{val_fraction:g} is held out for validation)"
    )
