"""Distractors: noisy digit images, appended to a dataset as unlabelled items."""

from __future__ import annotations

import numpy as np
import pytest

from clusterable.data import (
    first_per_class,
    load_dataset,
    noisy_digit_distractors,
    with_distractors,
)
from clusterable.data.distractors import with_distractors as defined_here


def test_the_public_name_is_the_distractors_module_one():
    assert with_distractors is defined_here


def test_with_distractors_appends_unlabelled_items(make_toy):
    ds = make_toy([0, 1, 1])
    noise = np.full((4, 1), 9.0, dtype=np.float32)
    mixed = with_distractors(ds, noise)
    assert len(mixed) == 7
    assert mixed.labels.tolist() == [0, 1, 1, -1, -1, -1, -1]
    assert mixed.fine_labels.tolist() == [0, 1, 1, -1, -1, -1, -1]
    assert mixed.num_classes == 2
    assert mixed.class_names == ds.class_names
    assert mixed[5][1] == -1
    from_dataset = with_distractors(ds, make_toy([0, 0]))
    assert from_dataset.labels.tolist() == [0, 1, 1, -1, -1]


def test_with_distractors_checks_shape(make_toy):
    with pytest.raises(ValueError, match="size="):
        with_distractors(make_toy([0]), np.zeros((2, 3), np.float32))


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
