"""Cross-validation folds of a training split: stratified, or class-disjoint for zero-shot.

Stratified k-fold keeps every class in every fold (the MsDNN protocol: sigma by 5-fold CV on the
training data). Class-disjoint folds hold out whole classes, so the validation classes are never
trained on, as in the zero-shot protocols of the lifted and DSCL papers and the "Metric Learning
Reality Check" (Musgrave et al. 2020).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from sklearn.model_selection import GroupKFold, StratifiedKFold

Protocol = Literal["stratified", "class-disjoint"]


def cross_validation_folds(
    labels: np.ndarray, folds: int, protocol: Protocol = "stratified", seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``folds`` pairs of ``(train rows, validation rows)`` of a labelled split.

    Raises
    ------
    ValueError
        If ``folds < 2``, or a class is too small (stratified) or there are too few classes
        (class-disjoint) for that many folds; the message says the most folds possible.
    """
    labels = np.asarray(labels)
    classes, counts = np.unique(labels, return_counts=True)
    if folds < 2:
        raise ValueError(f"cross-validation needs at least 2 folds, got {folds}")
    rows = np.arange(len(labels))
    if protocol == "stratified":
        if counts.min() < folds:
            raise ValueError(
                f"{folds} stratified folds need {folds} items in every class, but class "
                f"{classes[counts.argmin()]} has {counts.min()}: use --folds {max(counts.min(), 2)}"
                " or fewer"
            )
        splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
        return list(splitter.split(rows, labels))
    if protocol == "class-disjoint":
        if len(classes) < folds:
            raise ValueError(
                f"{folds} class-disjoint folds need {folds} classes, the split has {len(classes)}"
            )
        splitter = GroupKFold(n_splits=folds, shuffle=True, random_state=seed)
        return list(splitter.split(rows, labels, groups=labels))
    raise ValueError(f"unknown protocol {protocol!r}; use 'stratified' or 'class-disjoint'")
