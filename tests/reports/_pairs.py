"""Verification rates counted pair by pair, and the threshold table's cells, for the report
tests."""

from __future__ import annotations

import numpy as np

#: The rates of the verification table, in its column order.
RATES = ("fmr", "fnmr", "precision", "recall", "f1")


def direct_rates(distances: np.ndarray, same: np.ndarray, threshold: float) -> dict[str, float]:
    """The rates of ``distance <= threshold``, counted pair by pair."""
    match = distances <= threshold
    tp, fp = int((match & same).sum()), int((match & ~same).sum())
    positives, negatives = int(same.sum()), int((~same).sum())
    return {
        "fmr": fp / negatives,
        "fnmr": (positives - tp) / positives,
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / positives,
        "f1": 2 * tp / (tp + fp + positives),  # 2 TP / (2 TP + FP + FN)
        "accuracy": (tp + negatives - fp) / len(distances),
    }


def table_cells(pairs: int, criterion: str, threshold: float, rates: dict[str, float]) -> list[str]:
    """A row of the verification table after its first cell, as the page prints it."""
    shown = [f"{100 * rates[name]:.2f}" for name in RATES]
    return [str(pairs), criterion, f"{threshold:.6g}", *shown]
