"""Label views: coarse labels, zero-shot class splits, first n per class, distractors."""

from __future__ import annotations

import numpy as np
import pytest

from clusterable.data import (
    MSDNN_COARSE,
    LabelledDataset,
    class_split,
    coarse_labels,
    first_per_class,
    load_dataset,
    noisy_digit_distractors,
    with_distractors,
)


def _ds(labels: list[int]) -> LabelledDataset:
    x = np.arange(len(labels), dtype=np.float32)[:, None]  # item i holds the value i
    names = [f"c{c}" for c in range(max(labels) + 1)]
    return LabelledDataset("toy", x, labels, class_names=names)


def test_coarse_labels_keep_fine_labels_and_distractors():
    ds = _ds([0, 4, 5, 9, -1, 7])
    coarse = coarse_labels(ds, MSDNN_COARSE)
    assert coarse.labels.tolist() == [0, 0, 1, 1, -1, 1]
    assert coarse.fine_labels.tolist() == [0, 4, 5, 9, -1, 7]
    assert coarse.num_classes == 2
    assert coarse.class_names == ["c0 | c4", "c5 | c7 | c9"]
    assert coarse.fine_class_names == ds.class_names
    assert ds.labels.tolist() == [0, 4, 5, 9, -1, 7]  # the input is untouched


def test_coarse_labels_from_a_callable():
    coarse = coarse_labels(_ds([0, 1, 2, 3]), lambda c: c % 2)
    assert coarse.labels.tolist() == [0, 1, 0, 1]


def test_coarse_mapping_must_cover_every_class():
    with pytest.raises(ValueError, match=r"no entry for label\(s\) \[3\]"):
        coarse_labels(_ds([0, 3]), {0: 0})
    with pytest.raises(ValueError, match="-1 is reserved"):
        coarse_labels(_ds([0]), {0: -1})


def test_class_split_keeps_classes_in_file_order():
    ds = _ds([0, 1, 2, 3, 2, 1])
    split = class_split(ds, [2, 1])
    assert split.labels.tolist() == [1, 2, 2, 1]
    assert split.x[:, 0].tolist() == [1, 2, 4, 5]
    relabelled = class_split(ds, [2, 1], relabel=True)
    assert relabelled.labels.tolist() == [1, 0, 0, 1]
    assert relabelled.fine_labels.tolist() == [1, 2, 2, 1]
    assert relabelled.class_names == ["c2", "c1"]


def test_first_per_class_in_file_order():
    ds = _ds([1, 0, 1, 1, 0, 2, 1, 0, 0])
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


def test_with_distractors_appends_unlabelled_items():
    ds = _ds([0, 1, 1])
    noise = np.full((4, 1), 9.0, dtype=np.float32)
    mixed = with_distractors(ds, noise)
    assert len(mixed) == 7
    assert mixed.labels.tolist() == [0, 1, 1, -1, -1, -1, -1]
    assert mixed.fine_labels.tolist() == [0, 1, 1, -1, -1, -1, -1]
    assert mixed.num_classes == 2
    assert mixed.class_names == ds.class_names
    assert mixed[5][1] == -1
    from_dataset = with_distractors(ds, _ds([0, 0]))
    assert from_dataset.labels.tolist() == [0, 1, 1, -1, -1]


def test_with_distractors_checks_shape():
    with pytest.raises(ValueError, match="size="):
        with_distractors(_ds([0]), np.zeros((2, 3), np.float32))


def test_noisy_digit_distractors():
    noise = noisy_digit_distractors(n_per_class=5, size=28, seed=1)
    assert noise.shape == (50, 1, 28, 28)
    assert noise.dtype == np.float32
    assert noise.min() >= 0.0
    assert noise.max() <= 1.0
    np.testing.assert_array_equal(noise, noisy_digit_distractors(n_per_class=5, seed=1))
    assert not np.array_equal(noise, noisy_digit_distractors(n_per_class=5, seed=2))
    clean = noisy_digit_distractors(n_per_class=5, noise=0.0)
    assert 0.05 < clean.mean() < 0.5  # digit strokes on a dark background, upscaled
    assert noisy_digit_distractors(n_per_class=1, size=16).shape == (10, 1, 16, 16)


def test_noisy_digit_distractors_limit():
    with pytest.raises(ValueError, match="at most 174"):
        noisy_digit_distractors(n_per_class=175)


def test_opml_protocol_on_digits():
    """First n per class plus noisy distractors: the OPML Fashion-MNIST recipe, on 8x8 digits."""
    train = first_per_class(load_dataset("digits", split="train"), 50)
    mixed = with_distractors(train, noisy_digit_distractors(n_per_class=10, size=8))
    assert len(mixed) == 500 + 100
    assert (mixed.labels == -1).sum() == 100
    assert np.bincount(mixed.labels[mixed.labels >= 0]).tolist() == [50] * 10
