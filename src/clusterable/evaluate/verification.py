"""Verification: deciding "same or not" from a distance, and the error rates of that decision.

Two pure functions over 1-D arrays of pair distances (numpy arrays or torch tensors):

- `select_threshold` picks the distance threshold that optimises a criterion (F1, accuracy,
  balanced accuracy, or a ceiling on the false match rate) and returns it with the whole curve.
- `fnmr_at_fmr` is open-metric-learning's ``FNMR@FMR``: the share of positive pairs rejected at
  the ``fmr``-quantile of the negative distances.

Conventions
-----------
- **The rule**: a pair is a *match* (predicted "same") when ``distance <= threshold``.
- A *positive* pair is one whose ``same`` is True. Counts: true matches ``TP`` (positives matched),
  false matches ``FP`` (negatives matched), false non-matches ``FN = P - TP``, true non-matches
  ``TN = N - FP``, with ``P`` positives and ``N`` negatives.
- ``FMR = FP / N`` (false match rate), ``FNMR = FN / P`` (false non-match rate),
  ``precision = TP / (TP + FP)``, ``recall = TP / P = 1 - FNMR``,
  ``F1 = 2 TP / (2 TP + FP + FN)``, ``accuracy = (TP + TN) / (P + N)``, and balanced accuracy is
  the mean of ``recall`` and ``1 - FMR`` over the classes present (as scikit-learn's
  ``balanced_accuracy_score``: with no negatives it is the recall alone, with no positives
  ``1 - FMR`` alone).
- **A rate over nothing** (a zero denominator) counts as perfect, because nothing it could count
  went wrong: precision with no match made, recall with no positive, and F1 with neither a positive
  nor a match are 1; FMR with no negative and FNMR with no positive are 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from clusterable.evaluate._inputs import to_numpy

__all__ = [
    "Criterion",
    "ThresholdChoice",
    "VerificationCurve",
    "choice_at",
    "fnmr_at_fmr",
    "select_threshold",
]

#: What `select_threshold` optimises: a score to maximise, or ``("fmr", eps)``.
Criterion = Literal["f1", "accuracy", "balanced_accuracy"] | tuple[Literal["fmr"], float]

_SCORES = ("f1", "accuracy", "balanced_accuracy")


@dataclass(frozen=True, eq=False)
class VerificationCurve:
    """Every count and rate of the rule ``distance <= threshold``, at every candidate threshold.

    The candidates are ``-inf`` (nothing matches) followed by each distinct distance in increasing
    order; any threshold between two consecutive candidates makes the same decisions as the lower
    one. All arrays have one entry per candidate, ``(m,)`` with ``m = 1 + distinct distances``,
    and are read-only.

    Attributes
    ----------
    thresholds : numpy.ndarray
        float64 candidate thresholds, strictly increasing, ``thresholds[0] = -inf``.
    true_matches, false_matches : numpy.ndarray
        int64 ``TP`` and ``FP`` at each threshold (non-decreasing).
    positives, negatives : int
        ``P`` and ``N``, the number of pairs with ``same`` True and False.
    precision, recall, f1, accuracy, balanced_accuracy, fmr, fnmr : numpy.ndarray
        float64 rates, as defined in the module docstring (empty ratios count as perfect).
    """

    thresholds: np.ndarray
    true_matches: np.ndarray
    false_matches: np.ndarray
    positives: int
    negatives: int
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    accuracy: np.ndarray
    balanced_accuracy: np.ndarray
    fmr: np.ndarray
    fnmr: np.ndarray


@dataclass(frozen=True, eq=False)
class ThresholdChoice:
    """The threshold `select_threshold` chose, its rates, and the curve it was chosen on.

    Attributes
    ----------
    threshold : float
        Match when ``distance <= threshold``. An observed distance, or ``-inf`` when the best
        decision is to match nothing.
    criterion : str
        What was optimised: ``"f1"``, ``"accuracy"``, ``"balanced_accuracy"`` or ``"fmr<=EPS"``.
    index : int
        Position of ``threshold`` in ``curve.thresholds``.
    precision, recall, f1, accuracy, balanced_accuracy, fmr, fnmr : float
        The rates at ``threshold`` (``curve.<rate>[index]``).
    curve : VerificationCurve
        Counts and rates at every candidate threshold.
    """

    threshold: float
    criterion: str
    index: int
    precision: float
    recall: float
    f1: float
    accuracy: float
    balanced_accuracy: float
    fmr: float
    fnmr: float
    curve: VerificationCurve


def _as_distances(x: Any, name: str) -> np.ndarray:
    """``x`` as a 1-D float64 array of finite distances (float32 values are kept exactly)."""
    arr = to_numpy(x, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one distance per pair), got shape {arr.shape}.")
    if arr.dtype == np.bool_ or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}.")
    arr = arr.astype(np.float64, copy=False)
    finite = np.isfinite(arr)
    if not finite.all():
        first = int(np.flatnonzero(~finite)[0])
        raise ValueError(
            f"{name}[{first}] is {arr[first]} ({int((~finite).sum())} non-finite in all); "
            "distances must be finite: drop those pairs or fix the embeddings that gave them."
        )
    return arr


def _as_same(x: Any, n: int) -> np.ndarray:
    arr = to_numpy(x, "same")
    if arr.ndim != 1 or arr.dtype != np.bool_:
        raise ValueError(
            f"same must be a 1-D array of booleans (True where the pair is of one class), got "
            f"dtype {arr.dtype} and shape {arr.shape}; e.g. pass labels_a == labels_b."
        )
    if arr.shape[0] != n:
        raise ValueError(
            f"same has {arr.shape[0]} entries but distances has {n}; pass one flag per pair."
        )
    return arr


def as_rates(fmr: Any, allow_empty: bool = False) -> tuple[float, ...]:
    """``fmr``, one false match rate or a sequence of them, as floats, each checked a fraction
    in [0, 1] (`fnmr_at_fmr`, `clusterable.evaluate.pair_scores`); an empty sequence only where
    ``allow_empty``.

    Raises
    ------
    ValueError
        If ``fmr`` is a string or no number or sequence, is empty (unless allowed), or holds a
        value that is no number in [0, 1] (a boolean included).
    """
    if isinstance(fmr, (int, float, np.number)):
        rates: tuple[Any, ...] = (fmr,)
    elif isinstance(fmr, Iterable) and not isinstance(fmr, (str, bytes)):
        rates = tuple(fmr)
    else:
        raise ValueError(
            "fmr must be a false match rate in [0, 1] or a sequence of them, e.g. "
            f"fmr=(0.001,); got {fmr!r}."
        )
    if not rates and not allow_empty:
        raise ValueError("fmr is empty; pass at least one false match rate, e.g. fmr=(0.001,).")
    return tuple(_check_rate(q, "each fmr") for q in rates)


def _check_rate(value: Any, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}.")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(
            f"{name} must be a fraction in [0, 1], got {value!r}; for 0.1 % pass 0.001."
        )
    return float(value)


def _parse_criterion(criterion: Any) -> tuple[str, float | None]:
    """``(name, eps)``: a score name with ``eps`` None, or ``("fmr", eps)``."""
    if isinstance(criterion, str) and criterion in _SCORES:
        return criterion, None
    if isinstance(criterion, tuple) and len(criterion) == 2 and criterion[0] == "fmr":
        return "fmr", _check_rate(criterion[1], "the eps of criterion ('fmr', eps)")
    raise ValueError(
        f"criterion must be one of {', '.join(map(repr, _SCORES))} or ('fmr', eps) with eps in "
        f"[0, 1], got {criterion!r}."
    )


def _ratio(num: np.ndarray, den: np.ndarray | int, empty: float) -> np.ndarray:
    """``num / den`` as float64, ``empty`` where ``den`` is 0."""
    num, den = np.broadcast_arrays(np.asarray(num, np.float64), np.asarray(den, np.float64))
    return np.divide(num, den, out=np.full(num.shape, empty), where=den > 0)


def _curve(distances: np.ndarray, same: np.ndarray) -> VerificationCurve:
    """The curve over clean inputs: one sort, then cumulative counts at the end of each tie run."""
    n = distances.shape[0]
    order = np.argsort(distances, kind="stable")  # (n,)
    sorted_d = distances[order]
    # Candidates sit only at the last pair of each run of equal distances, so a tie is never split.
    run_ends = np.flatnonzero(np.append(sorted_d[1:] != sorted_d[:-1], True))  # (m - 1,)
    cum_true = np.cumsum(same[order], dtype=np.int64)
    del order
    thresholds = np.concatenate(([-np.inf], sorted_d[run_ends]))  # (m,)
    tp = np.concatenate(([0], cum_true[run_ends]))
    fp = np.concatenate(([0], run_ends + 1)) - tp
    del sorted_d, cum_true, run_ends
    positives = int(tp[-1])
    negatives = n - positives
    fn = positives - tp
    tn = negatives - fp
    if positives and negatives:
        # One division of exact integers, so equal scores are equal floats and ties are exact.
        balanced = (tp * float(negatives) + tn * float(positives)) / (2.0 * positives * negatives)
    else:
        balanced = _ratio(tp, positives, 1.0) if positives else _ratio(tn, negatives, 1.0)
    fields = {
        "thresholds": thresholds,
        "true_matches": tp,
        "false_matches": fp,
        "precision": _ratio(tp, tp + fp, 1.0),
        "recall": _ratio(tp, positives, 1.0),
        "f1": _ratio(2 * tp, 2 * tp + fp + fn, 1.0),
        "accuracy": (tp + tn) / float(n),
        "balanced_accuracy": balanced,
        "fmr": _ratio(fp, negatives, 0.0),
        "fnmr": _ratio(fn, positives, 0.0),
    }
    for array in fields.values():
        array.setflags(write=False)
    return VerificationCurve(positives=positives, negatives=negatives, **fields)


def select_threshold(distances: Any, same: Any, criterion: Criterion = "f1") -> ThresholdChoice:
    """The distance threshold that best separates same-class pairs from the others.

    The rule is **match when** ``distance <= threshold``. Every threshold between two consecutive
    distinct distances makes the same decisions, so the candidates are the distinct distances
    themselves, plus ``-inf`` for "match nothing" (a threshold below every distance; ``-inf``
    because no finite number below the smallest distance survives a round trip through float32).
    Equal distances always fall on the same side. One sort of the distances, then cumulative
    counts: O(n log n) time, O(n) memory.

    Parameters
    ----------
    distances : array-like
        ``(n,)`` finite distances of ``n`` pairs (any real dtype; computed on in float64, which
        holds float32 values exactly, so float32 and float64 copies of the same values agree).
    same : array-like
        ``(n,)`` booleans, True where the pair is of one class (a positive pair).
    criterion : {"f1", "accuracy", "balanced_accuracy"} or ("fmr", eps)
        A score to maximise over the candidates, the smallest threshold winning among equal scores
        (the fewest matches); or ``("fmr", eps)``: the largest candidate whose false match rate is
        at most ``eps`` (in [0, 1]; the reported float FMR is compared, so ``eps=1/3`` admits
        ``FP / N = 1/3``). F1 is
        ``2 TP / (2 TP + FP + FN)``: defined whenever there is a positive or a match; with
        neither (no positive pair, threshold ``-inf``) it counts as 1, so that with no positive
        pair at all the best F1 matches nothing. Every rate is defined in the module docstring.

    Returns
    -------
    ThresholdChoice
        The threshold, its precision, recall, F1, accuracy, balanced accuracy, FMR and FNMR, and
        the whole curve. With only positive pairs every score criterion picks the largest
        distance (everything matches); with only negative pairs, ``-inf`` (nothing matches).

    Raises
    ------
    ValueError
        If there is no pair, a distance is NaN or infinite (the first is named), ``same`` is not
        booleans of the same length, or the criterion is unknown.

    Examples
    --------
    >>> choice = select_threshold([0.1, 0.4, 0.4, 0.9], [True, True, False, False])
    >>> choice.threshold, choice.f1
    (0.4, 0.8)
    >>> select_threshold([0.1, 0.4, 0.4, 0.9], [True, True, False, False], ("fmr", 0.0)).threshold
    0.1
    """
    name, eps = _parse_criterion(criterion)
    distances = _as_distances(distances, "distances")
    if distances.shape[0] == 0:
        raise ValueError("select_threshold needs at least one pair; distances is empty.")
    same = _as_same(same, distances.shape[0])
    curve = _curve(distances, same)
    if eps is None:
        index = int(np.argmax(getattr(curve, name)))  # first maximum: the smallest threshold
        label = name
    else:
        # The FMR curve is non-decreasing and 0 at -inf, so a candidate always qualifies.
        index = int(np.searchsorted(curve.fmr, eps, side="right")) - 1
        label = f"fmr<={eps:g}"
    return _choice_at_index(curve, index, float(curve.thresholds[index]), label)


def choice_at(curve: VerificationCurve, threshold: float, criterion: str) -> ThresholdChoice:
    """The rates of ``curve`` at a ``threshold`` chosen elsewhere: those of its largest candidate
    at or below ``threshold``, which matches the same pairs (the rule is ``distance <=
    threshold`` and no pair lies between two candidates).

    Parameters
    ----------
    curve : VerificationCurve
        A curve of `~clusterable.evaluate.select_threshold`.
    threshold : float
        The threshold, chosen on other pairs.
    criterion : str
        How it was chosen, kept in the result.
    """
    index = int(np.searchsorted(curve.thresholds, threshold, side="right")) - 1
    return _choice_at_index(curve, index, float(threshold), criterion)


def _choice_at_index(
    curve: VerificationCurve, index: int, threshold: float, criterion: str
) -> ThresholdChoice:
    """The rates of candidate ``index`` of ``curve``, kept under ``threshold`` and ``criterion``."""
    return ThresholdChoice(
        threshold=threshold,
        criterion=criterion,
        index=index,
        precision=float(curve.precision[index]),
        recall=float(curve.recall[index]),
        f1=float(curve.f1[index]),
        accuracy=float(curve.accuracy[index]),
        balanced_accuracy=float(curve.balanced_accuracy[index]),
        fmr=float(curve.fmr[index]),
        fnmr=float(curve.fnmr[index]),
        curve=curve,
    )


def fnmr_at_fmr(
    pos_distances: Any, neg_distances: Any, fmr: float | Sequence[float] = (0.1,)
) -> np.ndarray:
    """False non-match rate at given false match rates, as open-metric-learning defines it.

    For each ``q`` in ``fmr``, the threshold is ``T = Q(q)``, the ``q``-quantile of the negative
    distances with linear interpolation (``numpy.quantile``'s default), and the result is the share
    of positive distances ``>= T``. This is OML's ``calc_fnmr_at_fmr`` (Biometrics Performance,
    Wikipedia): the same definition, the same fractions in [0, 1] (OML before 1.0 took percents,
    ``fmr_vals=(1,)`` for 1 %; divide those by 100), computed here in float64 with one sort of the
    positives instead of a ``(len(fmr), len(pos))`` comparison.

    Note the two differences from `select_threshold`'s rule ``distance <= threshold``: a positive
    exactly at ``T`` counts as a non-match here, and the interpolated ``T`` need not be an observed
    distance, so the actual false match rate at ``T`` can differ from ``q``. For the threshold
    whose observed false match rate is at most ``q``, use ``select_threshold(d, same, ("fmr", q))``.

    Parameters
    ----------
    pos_distances : array-like
        ``(P,)`` finite distances of positive (same-class) pairs, ``P >= 1``.
    neg_distances : array-like
        ``(N,)`` finite distances of negative pairs, ``N >= 1``.
    fmr : float or sequence of float
        False match rates, fractions in [0, 1].

    Returns
    -------
    numpy.ndarray
        ``(len(fmr),)`` float64 FNMR at each ``fmr`` (a 1-element array for a single float).

    Raises
    ------
    ValueError
        If either set of distances is empty or holds a NaN or infinite value, or an ``fmr`` is
        outside [0, 1] (or none is given).

    Examples
    --------
    >>> pos = [0, 0, 1, 1, 2, 2, 5, 5, 9, 9]
    >>> neg = [3, 3, 4, 4, 6, 6, 7, 7, 8, 8]
    >>> fnmr_at_fmr(pos, neg, fmr=(0.1, 0.5)).tolist()
    [0.4, 0.2]
    """
    rates_array = np.array(as_rates(fmr), dtype=np.float64)
    pos = _as_distances(pos_distances, "pos_distances")
    neg = _as_distances(neg_distances, "neg_distances")
    for name, arr in (("pos_distances", pos), ("neg_distances", neg)):
        if arr.shape[0] == 0:
            raise ValueError(f"fnmr_at_fmr needs at least one pair in {name}; it is empty.")
    thresholds = np.quantile(neg, rates_array)  # (len(fmr),), linear interpolation
    below = np.searchsorted(np.sort(pos), thresholds, side="left")  # positives < T
    return (pos.shape[0] - below) / float(pos.shape[0])
