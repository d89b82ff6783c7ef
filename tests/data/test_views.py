"""Label views: coarse labels, zero-shot class splits, first n per class."""

from __future__ import annotations

import numpy as np
import pytest

from clusterable.data import (
    MSDNN_COARSE,
    class_split,
    coarse_labels,
    first_per_class,
    load_dataset,
)


def test_coarse_labels_keep_fine_labels_and_distractors(make_toy):
    ds = make_toy([0, 4, 5, 9, -1, 7])
    coarse = coarse_labels(ds, MSDNN_COARSE)
    assert coarse.labels.tolist() == [0, 0, 1, 1, -1, 1]
    assert coarse.fine_labels.tolist() == [0, 4, 5, 9, -1, 7]
    assert coarse.num_classes == 2
    assert coarse.class_names == ["c0 | c4", "c5 | c7 | c9"]
    assert coarse.fine_class_names == ds.class_names
    assert ds.labels.tolist() == [0, 4, 5, 9, -1, 7]  # the input is untouched


def test_coarse_labels_from_a_callable(make_toy):
    coarse = coarse_labels(make_toy([0, 1, 2, 3]), lambda c: c % 2)
    assert coarse.labels.tolist() == [0, 1, 0, 1]


def test_coarse_mapping_must_cover_every_class(make_toy):
    with pytest.raises(ValueError, match=r"no entry for label\(s\) \[3\]"):
        coarse_labels(make_toy([0, 3]), {0: 0})
    with pytest.raises(ValueError, match="-1 is reserved"):
        coarse_labels(make_toy([0]), {0: -1})


def test_class_split_keeps_classes_in_file_order(make_toy):
    ds = make_toy([0, 1, 2, 3, 2, 1])
    split = class_split(ds, [2, 1])
    assert split.labels.tolist() == [1, 2, 2, 1]
    assert split.x[:, 0].tolist() == [1, 2, 4, 5]
    relabelled = class_split(ds, [2, 1], relabel=True)
    assert relabelled.labels.tolist() == [1, 0, 0, 1]
    assert relabelled.fine_labels.tolist() == [1, 2, 2, 1]
    assert relabelled.class_names == ["c2", "c1"]


def test_first_per_class_in_file_order(make_toy):
    ds = make_toy([1, 0, 1, 1, 0, 2, 1, 0, 0])
    first = first_per_class(ds, 2)
    assert first.x[:, 0].tolist() == [0, 1, 2, 4, 5]
    assert np.bincount(first.labels).tolist() == [2, 2, 1]  # class 2 has only one item
    following = first_per_class(ds, 2, start=2)
    assert following.x[:, 0].tolist() == [3, 6, 7, 8]


def test_first_per_class_on_digits_matches_a_loop():
    ds = load_dataset("digits", split="all")
    first = first_per_class(ds, 20)
    expected = np.sort(np.concatenate([np.flatnonzero(ds.labels == c)[:20] for c in range(10)]))
    np.testing.assert_array_equal(first.x, ds.x[expected])
    assert np.bincount(first.labels).tolist() == [20] * 10
