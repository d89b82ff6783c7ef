"""The verification view's rule: the threshold chosen on validation pairs, its rates read on the
reported pairs, checked against a direct count; without validation, chosen on the pairs shown."""

from __future__ import annotations

import numpy as np
import pytest

from clusterable.evaluate import select_threshold
from clusterable.evaluate.pair_sample import pair_distances
from clusterable.evaluate.verification import choice_at
from clusterable.reports.verification_view import CRITERION, verification_view

from _pairs import direct_rates


def blob_pairs(n: int, seed: int):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 6, n)
    centres = rng.normal(size=(6, 4))
    # Rounded: many distances tie, and a validation threshold falls between test distances.
    embeddings = np.round(centres[labels] + 0.8 * rng.normal(size=(n, 4)), 1)
    return pair_distances(embeddings, labels)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_threshold_comes_from_validation_and_its_rates_from_the_test_pairs(seed):
    test, validation = blob_pairs(120, seed), blob_pairs(60, seed + 10)
    view = verification_view(test, validation, "unused")
    chosen = select_threshold(validation.distances, validation.same, CRITERION)
    assert view.validation is validation
    assert view.validation_choice is not None
    assert view.validation_choice.threshold == view.choice.threshold == chosen.threshold
    expected = direct_rates(test.distances, test.same, chosen.threshold)
    for name, value in expected.items():
        assert getattr(view.choice, name) == pytest.approx(value, abs=1e-12), name
    assert view.choice.criterion == "f1 on validation" and "validation" in view.chosen_where
    # The case discriminates: the test pairs would choose another threshold for themselves.
    assert select_threshold(test.distances, test.same, CRITERION).threshold != chosen.threshold


def test_without_validation_the_threshold_is_the_reported_pairs_own_and_says_so():
    test = blob_pairs(100, 3)
    view = verification_view(test, None, "No validation here.")
    own = select_threshold(test.distances, test.same, CRITERION)
    assert view.validation is None and view.validation_choice is None
    assert (view.choice.threshold, view.choice.f1, view.choice.fmr) == (
        own.threshold,
        own.f1,
        own.fmr,
    )
    assert (
        view.chosen_where.startswith("No validation here.") and "not held out" in view.chosen_where
    )


def test_a_threshold_between_or_beyond_the_candidates_reads_the_rates_of_the_one_below():
    distances = np.array([0.1, 0.4, 0.4, 0.9])
    same = np.array([True, True, False, False])
    curve = select_threshold(distances, same).curve
    for threshold in (-1.0, 0.1, 0.25, 0.4, 0.5, 0.9, 5.0, -np.inf):
        at = choice_at(curve, threshold, "given")
        assert at.threshold == threshold and at.criterion == "given"
        for name, value in direct_rates(distances, same, threshold).items():
            assert getattr(at, name) == pytest.approx(value), (threshold, name)
