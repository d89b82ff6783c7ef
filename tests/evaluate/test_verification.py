"""select_threshold and fnmr_at_fmr against brute forces that count every threshold directly."""

from __future__ import annotations

import doctest
import math
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest
import torch
from sklearn.metrics import balanced_accuracy_score, f1_score

from clusterable.evaluate import fnmr_at_fmr, select_threshold
from clusterable.evaluate import verification as verification_module

CRITERIA = [
    "f1",
    "accuracy",
    "balanced_accuracy",
    ("fmr", 0.0),
    ("fmr", 0.1),
    ("fmr", 0.37),
    ("fmr", 1.0),
]
RATES = ("precision", "recall", "f1", "accuracy", "balanced_accuracy", "fmr", "fnmr")


def tied_pairs(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Few distinct distance levels (many ties), any share of positives from none to all."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    levels = int(rng.integers(1, 9))
    distances = rng.integers(0, levels, n) * 0.25  # exact in float32 and float64
    share = [0.0, 0.1, 0.5, 0.9, 1.0][seed % 5]
    same = rng.random(n) < share
    return distances.astype(np.float64), same


def ratio(num: int, den: int, empty: int) -> Fraction:
    return Fraction(num, den) if den else Fraction(empty)


def brute_curve(distances: np.ndarray, same: np.ndarray) -> list[dict]:
    """For -inf and each distinct distance: ``d <= t`` applied pair by pair, rates as fractions."""
    pairs = list(zip(distances.tolist(), same.tolist(), strict=True))
    positives = sum(s for _, s in pairs)
    negatives = len(pairs) - positives
    rows = []
    for t in [-math.inf, *sorted(set(distances.tolist()))]:
        tp = sum(1 for d, s in pairs if d <= t and s)
        fp = sum(1 for d, s in pairs if d <= t and not s)
        fn, tn = positives - tp, negatives - fp
        if positives and negatives:
            balanced = (Fraction(tp, positives) + Fraction(tn, negatives)) / 2
        else:
            balanced = Fraction(tp, positives) if positives else Fraction(tn, negatives)
        rows.append(
            {
                "threshold": t,
                "tp": tp,
                "fp": fp,
                "precision": ratio(tp, tp + fp, 1),
                "recall": ratio(tp, positives, 1),
                "f1": ratio(2 * tp, 2 * tp + fp + fn, 1),
                "accuracy": Fraction(tp + tn, len(pairs)),
                "balanced_accuracy": balanced,
                "fmr": ratio(fp, negatives, 0),
                "fnmr": ratio(fn, positives, 0),
            }
        )
    return rows


def brute_choice(rows: list[dict], criterion) -> int:
    """Index of the best row: first maximum of a score, or the last row with float FMR <= eps."""
    if isinstance(criterion, str):
        best = max(row[criterion] for row in rows)
        return next(i for i, row in enumerate(rows) if row[criterion] == best)
    return max(i for i, row in enumerate(rows) if float(row["fmr"]) <= criterion[1])


@pytest.mark.parametrize("criterion", CRITERIA, ids=str)
def test_select_threshold_equals_brute_force_with_ties(criterion):
    for seed in range(40):
        distances, same = tied_pairs(seed)
        rows = brute_curve(distances, same)
        choice = select_threshold(distances, same, criterion)
        curve = choice.curve
        assert curve.thresholds.tolist() == [row["threshold"] for row in rows]
        assert curve.true_matches.tolist() == [row["tp"] for row in rows]
        assert curve.false_matches.tolist() == [row["fp"] for row in rows]
        for rate in RATES:
            # Each rate is one division of exact integers, hence the correctly rounded fraction.
            assert getattr(curve, rate).tolist() == [float(row[rate]) for row in rows], rate
        best = brute_choice(rows, criterion)
        assert choice.index == best, (seed, criterion)
        assert choice.threshold == rows[best]["threshold"]
        for rate in RATES:
            assert getattr(choice, rate) == float(rows[best][rate]), (seed, rate)


def test_rates_agree_with_scikit_learn():
    for seed in range(20):
        distances, same = tied_pairs(seed)
        if same.all() or not same.any():
            continue
        choice = select_threshold(distances, same, "balanced_accuracy")
        for t, f1, balanced in zip(
            choice.curve.thresholds, choice.curve.f1, choice.curve.balanced_accuracy, strict=True
        ):
            matched = distances <= t
            assert f1 == pytest.approx(f1_score(same, matched, zero_division=1.0))
            assert balanced == pytest.approx(balanced_accuracy_score(same, matched))


def test_ties_are_never_split():
    # Splitting the run at 1.0 after its positive would give F1 = 1 at "threshold 1.0";
    # the rule d <= 1.0 matches the negative too, and the result must say so.
    choice = select_threshold([0.0, 1.0, 1.0], [True, True, False], "f1")
    assert choice.threshold == 1.0
    assert (choice.precision, choice.recall, choice.f1) == (2 / 3, 1.0, 0.8)
    for seed in range(40):
        distances, same = tied_pairs(seed)
        for criterion in CRITERIA:
            choice = select_threshold(distances, same, criterion)
            matched = distances <= choice.threshold
            assert not np.intersect1d(distances[matched], distances[~matched]).size
            assert choice.curve.true_matches[choice.index] == (matched & same).sum()
            assert choice.curve.false_matches[choice.index] == (matched & ~same).sum()
        thresholds = choice.curve.thresholds
        assert (np.diff(thresholds) > 0).all()
        matched_counts = choice.curve.true_matches + choice.curve.false_matches
        assert matched_counts.tolist() == [(distances <= t).sum() for t in thresholds]


def test_smallest_threshold_wins_equal_scores():
    # Thresholds 1.0 and 3.0 both give accuracy 3/4; the smaller (fewer matches) is chosen.
    choice = select_threshold([1.0, 2.0, 3.0, 4.0], [True, False, True, False], "accuracy")
    assert choice.curve.accuracy.tolist() == [0.5, 0.75, 0.5, 0.75, 0.5]
    assert choice.threshold == 1.0


def test_fmr_criterion_is_the_largest_threshold_within_eps():
    distances = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    same = np.array([True, False, False, True, False, True])
    assert select_threshold(distances, same, ("fmr", 0.0)).threshold == 1.0
    # The float 1/3 lies below the fraction 1/3, yet FMR 1/3 is admitted, as its float shows.
    assert select_threshold(distances, same, ("fmr", 1 / 3)).threshold == 2.0
    # 0.666 admits one false match of three, not two.
    assert select_threshold(distances, same, ("fmr", 0.666)).threshold == 2.0
    choice = select_threshold(distances, same, ("fmr", 2 / 3))
    assert (choice.threshold, choice.fmr, choice.criterion) == (4.0, 2 / 3, f"fmr<={2 / 3:g}")
    assert select_threshold(distances, same, ("fmr", 1.0)).threshold == 6.0


def test_invariant_under_monotone_transforms():
    for seed in range(20):
        distances, same = tied_pairs(seed)
        for criterion in CRITERIA:
            base = select_threshold(distances, same, criterion)
            for transform in (lambda d: 3 * d + 1, np.exp):
                moved = select_threshold(transform(distances), same, criterion)
                assert moved.index == base.index
                if base.index:
                    assert moved.threshold == transform(base.threshold)
                for rate in RATES:
                    assert getattr(moved, rate) == getattr(base, rate)


def test_float32_float64_and_torch_agree():
    rng = np.random.default_rng(7)
    distances32 = rng.random(500).astype(np.float32).round(2)
    same = rng.random(500) < 0.3
    for criterion in CRITERIA:
        results = [
            select_threshold(distances32, same, criterion),
            select_threshold(distances32.astype(np.float64), same, criterion),
            select_threshold(torch.from_numpy(distances32), torch.from_numpy(same), criterion),
        ]
        for other in results[1:]:
            assert other.threshold == results[0].threshold
            assert other.index == results[0].index
            for rate in RATES:
                assert getattr(other, rate) == getattr(results[0], rate)
                assert np.array_equal(getattr(other.curve, rate), getattr(results[0].curve, rate))
    # The float32 threshold decides float32 distances as the float64 one decides float64.
    choice = select_threshold(distances32, same)
    assert choice.curve.thresholds.dtype == np.float64
    assert np.float32(choice.threshold) == choice.threshold


def test_all_positive_pairs_match_everything():
    for criterion in CRITERIA:
        choice = select_threshold([3.0, 1.0, 2.0], [True, True, True], criterion)
        assert choice.threshold == 3.0
        assert (choice.recall, choice.precision, choice.f1, choice.fmr, choice.fnmr) == (
            1.0,
            1.0,
            1.0,
            0.0,
            0.0,
        )
        assert choice.curve.negatives == 0


def test_all_negative_pairs_match_nothing():
    distances, same = [1.0, 2.0, 3.0, 4.0], [False] * 4
    for criterion in ("f1", "accuracy", "balanced_accuracy", ("fmr", 0.0), ("fmr", 0.2)):
        choice = select_threshold(distances, same, criterion)
        assert choice.threshold == -math.inf
        assert (choice.fmr, choice.accuracy, choice.f1, choice.precision) == (0.0, 1.0, 1.0, 1.0)
    assert select_threshold(distances, same, ("fmr", 0.5)).threshold == 2.0
    assert select_threshold(distances, same, ("fmr", 1.0)).threshold == 4.0


def test_single_pair():
    assert select_threshold([0.5], [True]).threshold == 0.5
    assert select_threshold(np.array([0.5]), np.array([False])).threshold == -math.inf
    assert select_threshold([0.5], [False], ("fmr", 1.0)).threshold == 0.5


@pytest.mark.parametrize(
    ("distances", "same", "criterion", "message"),
    [
        ([], [], "f1", "at least one pair"),
        ([0.1, np.nan, 0.3, np.nan], [True] * 4, "f1", r"distances\[1\] is nan"),
        ([0.1, 0.2, np.inf], [True] * 3, "f1", r"distances\[2\] is inf"),
        ([[0.1, 0.2]], [[True, False]], "f1", "must be 1-D"),
        ([0.1, 0.2], [1, 0], "f1", "booleans"),
        ([0.1, 0.2], [True], "f1", "same has 1 entries but distances has 2"),
        ([True, False], [True, False], "f1", "real numbers"),
        ([0.1, 0.2], [True, False], "precision", "criterion must be one of"),
        ([0.1, 0.2], [True, False], ("fnmr", 0.1), "criterion must be one of"),
        ([0.1, 0.2], [True, False], ("fmr", 1.5), r"fraction in \[0, 1\]"),
        ([0.1, 0.2], [True, False], ("fmr", -0.1), r"fraction in \[0, 1\]"),
        ([0.1, 0.2], [True, False], ("fmr", "0.1"), "must be a number"),
    ],
)
def test_select_threshold_refuses_bad_input(distances, same, criterion, message):
    with pytest.raises(ValueError, match=message):
        select_threshold(distances, same, criterion)


def test_oml_docstring_example():
    pos = np.array([0, 0, 1, 1, 2, 2, 5, 5, 9, 9])
    neg = np.array([3, 3, 4, 4, 6, 6, 7, 7, 8, 8])
    assert fnmr_at_fmr(pos, neg, fmr=(0.1, 0.5)).tolist() == [0.4, 0.2]


def brute_fnmr_at_fmr(pos: list[float], neg: list[float], fmr: list[float]) -> list[float]:
    """Linear-interpolation quantile of the negatives; share of positives at or above it."""
    neg = sorted(neg)
    result = []
    for q in fmr:
        position = (len(neg) - 1) * q
        low = math.floor(position)
        high = min(low + 1, len(neg) - 1)
        threshold = neg[low] + (position - low) * (neg[high] - neg[low])
        result.append(sum(1 for d in pos if d >= threshold) / len(pos))
    return result


def test_fnmr_at_fmr_equals_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(60):
        pos = rng.integers(0, 12, int(rng.integers(1, 40))).astype(np.float64)
        neg = rng.integers(0, 12, int(rng.integers(1, 40))).astype(np.float64)
        fmr = [0.0, 0.1, 0.5, 1.0, *rng.random(4).tolist()]
        expected = brute_fnmr_at_fmr(pos.tolist(), neg.tolist(), fmr)
        assert fnmr_at_fmr(pos, neg, fmr).tolist() == expected
        assert fnmr_at_fmr(pos.astype(np.float32), neg.astype(np.float32), fmr).tolist() == (
            expected
        )


def test_fnmr_at_fmr_ends_and_scalar():
    pos, neg = [1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 5.0]
    # fmr 0: T = min(neg) = 2, positives >= 2 are rejected; fmr 1: T = max(neg) = 5.
    assert fnmr_at_fmr(pos, neg, (0.0, 1.0)).tolist() == [0.75, 0.0]
    single = fnmr_at_fmr(torch.tensor(pos), torch.tensor(neg), 0.0)
    assert single.shape == (1,) and single.dtype == np.float64 and single[0] == 0.75


@pytest.mark.parametrize(
    ("pos", "neg", "fmr", "message"),
    [
        ([], [1.0], (0.1,), "at least one pair in pos_distances"),
        ([1.0], [], (0.1,), "at least one pair in neg_distances"),
        ([1.0], [1.0, np.nan], (0.1,), r"neg_distances\[1\] is nan"),
        ([1.0], [1.0], (), "fmr is empty"),
        ([1.0], [1.0], (1,), None),
        ([1.0], [1.0], (50,), "for 0.1 % pass 0.001"),
        ([1.0], [1.0], (-0.01,), r"fraction in \[0, 1\]"),
    ],
)
def test_fnmr_at_fmr_refuses_bad_input(pos, neg, fmr, message):
    if message is None:  # fmr = 1 (a fraction, everything) is valid
        assert fnmr_at_fmr(pos, neg, fmr).tolist() == [1.0]
        return
    with pytest.raises(ValueError, match=message):
        fnmr_at_fmr(pos, neg, fmr)


def test_two_million_pairs_in_linear_memory():
    n = 2_000_000
    rng = np.random.default_rng(0)
    distances = rng.random(n)  # all distinct: the longest curve
    same = rng.random(n) < 0.05
    tracemalloc.start()  # speed is measured in benchmarks/, not here: memory is the check
    choice = select_threshold(distances, same, ("fmr", 1e-3))
    fnmr = fnmr_at_fmr(distances[same], distances[~same], (1e-3,))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert choice.curve.thresholds.shape == (n + 1,)
    assert peak < 140 * n, f"peak {peak / 1e6:.0f} MB for {n} pairs"  # a few (n,) arrays, no n^2
    # Uniform random distances: FMR <= 1e-3 keeps about 1e-3 of the positives.
    assert choice.fmr <= 1e-3 and 0.0 < choice.recall < 0.01
    assert 0.99 < fnmr[0] < 1.0


def test_docstring_examples_run():
    result = doctest.testmod(
        verification_module, extraglobs={"np": np}, optionflags=doctest.ELLIPSIS
    )
    assert result.attempted >= 3 and result.failed == 0


#: ``fmr`` values that are no rate, and the start of the one error every reader of them gives
#: (`verification.as_rates`): a string, a bool, a nested list.
NOT_RATES = [
    ("0.1", r"^fmr must be a false match rate in \[0, 1\] or a sequence of them, e\.g\. fmr="),
    ([True], r"^each fmr must be a number in \[0, 1\], got True"),
    ([[0.1]], r"^each fmr must be a number in \[0, 1\], got \[0\.1\]"),
]


@pytest.mark.parametrize(("fmr", "message"), NOT_RATES)
def test_an_fmr_that_is_no_rate_is_named_as_given(fmr, message):
    """fmr="0.1" was read character by character: "each fmr ... got '0'"."""
    with pytest.raises(ValueError, match=message):
        fnmr_at_fmr([0.1, 0.2], [0.3, 0.4], fmr=fmr)
