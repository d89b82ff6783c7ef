"""Verification at a glance: the distances of same-class and other pairs, and the DET curve.

The left panel shows the two distance histograms (densities over shared bins, so the two shapes
compare whatever the counts) and the chosen threshold; the right panel the DET curve (detection
error trade-off, Martin et al., 1997), FNMR against FMR, both axes log, with the chosen point.

Why DET rather than ROC: the DET plots the two error rates the threshold table reports (FMR and
FNMR), and log axes spread out the low-error corner where a deployed threshold sits, which a ROC
squeezes against its top-left; reading FNMR at a fixed FMR (``fnmr@fmr``) is reading the DET at
one abscissa. A rate of 0 has no place on a log axis: it is drawn on the axis floor, half the
smallest non-zero rate the pairs can show (``1 / 2N`` for FMR, ``1 / 2P`` for FNMR).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from clusterable.plots._figure import new_figure

if TYPE_CHECKING:
    from clusterable.evaluate.verification import ThresholdChoice, VerificationCurve

#: Bins of the distance histograms, shared by both.
BINS = 60


def rate_floors(curve: VerificationCurve) -> tuple[float, float]:
    """Where the DET draws a rate of 0: ``(1 / 2N, 1 / 2P)`` for FMR and FNMR, half the smallest
    non-zero rate of ``N`` negative and ``P`` positive pairs (both must exist)."""
    return 0.5 / curve.negatives, 0.5 / curve.positives


def draw_verification(distances: np.ndarray, same: np.ndarray, choice: ThresholdChoice) -> Figure:
    """The distance histograms of positive and negative pairs with ``choice.threshold``, and
    the DET curve of ``choice.curve`` (`~clusterable.evaluate.select_threshold`'s, over these
    pairs) with the chosen point ``(choice.fmr, choice.fnmr)``.

    Parameters
    ----------
    distances : numpy.ndarray
        ``(m,)`` distances of the pairs.
    same : numpy.ndarray
        ``(m,)`` booleans, True for a same-class pair.
    choice : ThresholdChoice
        The threshold and the curve over these pairs, with the rates at the threshold.
    """
    figure, (hist_ax, det_ax) = new_figure(columns=2, size=4.4)
    _draw_histograms(hist_ax, distances, same, choice.threshold)
    curve = choice.curve
    if curve.positives and curve.negatives:
        fmr_floor, fnmr_floor = rate_floors(curve)
        det_ax.plot(
            np.maximum(curve.fmr, fmr_floor), np.maximum(curve.fnmr, fnmr_floor), color="C0"
        )
        det_ax.plot(
            max(choice.fmr, fmr_floor),
            max(choice.fnmr, fnmr_floor),
            marker="o",
            color="C3",
            linestyle="none",
            label=f"threshold: FMR {choice.fmr:.3g}, FNMR {choice.fnmr:.3g}",
        )
        det_ax.set(xscale="log", yscale="log", xlim=(fmr_floor, 1), ylim=(fnmr_floor, 1))
        det_ax.legend(fontsize=7, loc="lower left")
    else:
        missing = "same-class" if not curve.positives else "different-class"
        det_ax.text(0.5, 0.5, f"no {missing} pair: no DET curve", ha="center", va="center")
    det_ax.set(
        title="DET curve",
        xlabel="FMR (different-class pairs matched)",
        ylabel="FNMR (same-class pairs not matched)",
    )
    det_ax.grid(True, which="major", alpha=0.3)
    figure.tight_layout()
    return figure


def _draw_histograms(ax: Axes, distances: np.ndarray, same: np.ndarray, threshold: float) -> None:
    """Densities of the positive and negative distances over shared bins, and the threshold."""
    edges = np.histogram_bin_edges(distances, bins=BINS)  # (BINS + 1,)
    for flags, label, colour in ((same, "same class", "C2"), (~same, "different class", "C1")):
        if flags.any():
            ax.hist(
                distances[flags],
                bins=edges.tolist(),
                density=True,
                alpha=0.55,
                color=colour,
                label=f"{label} ({int(flags.sum()):,})",
            )
    if np.isfinite(threshold):
        ax.axvline(threshold, color="C3", linestyle="--", label=f"threshold {threshold:.4g}")
    else:
        ax.plot([], [], " ", label="threshold -inf: nothing matches")
    ax.set(title="pair distances", xlabel="distance", ylabel="density")
    ax.legend(fontsize=7)
