"""Cross-validation folds: stratified keeps every class in every fold, class-disjoint none."""

from __future__ import annotations

import numpy as np
import pytest

from clusterable.tune import cross_validation_folds

LABELS = np.repeat(np.arange(6), [5, 6, 7, 5, 9, 8])


def test_stratified_folds_partition_the_rows_with_every_class_in_each():
    folds = cross_validation_folds(LABELS, 5, "stratified", seed=0)
    held = np.concatenate([validation for _, validation in folds])
    assert sorted(held.tolist()) == list(range(len(LABELS)))  # each row held out once
    for train, validation in folds:
        assert set(train) | set(validation) == set(range(len(LABELS)))
        assert set(LABELS[validation]) == set(range(6))


def test_class_disjoint_folds_hold_out_whole_classes():
    folds = cross_validation_folds(LABELS, 3, "class-disjoint", seed=0)
    held_classes = [set(LABELS[validation]) for _, validation in folds]
    assert sorted(c for classes in held_classes for c in classes) == list(range(6))
    for (train, _), classes in zip(folds, held_classes, strict=True):
        assert not classes & set(LABELS[train])


def test_the_seed_decides_the_folds():
    first = cross_validation_folds(LABELS, 3, "stratified", seed=0)[0][1]
    assert np.array_equal(first, cross_validation_folds(LABELS, 3, "stratified", seed=0)[0][1])
    assert not np.array_equal(first, cross_validation_folds(LABELS, 3, "stratified", seed=1)[0][1])


@pytest.mark.parametrize(
    ("folds", "protocol", "message"),
    [
        (1, "stratified", "at least 2 folds"),
        (6, "stratified", "class 0 has 5: use --folds 5"),
        (7, "class-disjoint", "need 7 classes, the split has 6"),
        (2, "random", "unknown protocol"),
    ],
)
def test_impossible_folds_say_what_is_possible(folds, protocol, message):
    with pytest.raises(ValueError, match=message):
        cross_validation_folds(LABELS, folds, protocol)
