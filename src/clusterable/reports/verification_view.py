"""The verification view of a report: a threshold chosen on held-out pairs, judged on others.

The rule: `~clusterable.evaluate.select_threshold` chooses the threshold (criterion `CRITERION`)
on the pairs of a validation split when there is one, and its rates are read on the curve of the
reported pairs (the test split's), which never saw it chosen. Without validation pairs it is
chosen on the reported pairs themselves, and the view says so: its rates are then the best that
threshold could do on those pairs, not a held-out figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from clusterable.evaluate.verification import ThresholdChoice, choice_at, select_threshold

if TYPE_CHECKING:
    from clusterable.evaluate.pair_sample import PairDistances

#: What the threshold maximises (a `~clusterable.evaluate.select_threshold` criterion).
CRITERION: Final = "f1"

#: Said when `TrainedRun.validation_split` finds none.
NO_VALIDATION = (
    "The run has no validation split (unsupervised, --val-fraction 0, or a checkpoint without "
    "its run.json)."
)


@dataclass(frozen=True, eq=False)
class VerificationView:
    """A threshold and its rates on the reported pairs.

    Attributes
    ----------
    pairs : PairDistances
        The reported pairs (the test split's, or the evaluated items').
    choice : ThresholdChoice
        The threshold with its rates over ``pairs`` and the curve of ``pairs``.
    validation : PairDistances or None
        The pairs the threshold was chosen on; None when it was chosen on ``pairs``.
    validation_choice : ThresholdChoice or None
        `~clusterable.evaluate.select_threshold` on ``validation``.
    chosen_where : str
        How the threshold was chosen, in a sentence for the page.
    """

    pairs: PairDistances
    choice: ThresholdChoice
    validation: PairDistances | None
    validation_choice: ThresholdChoice | None
    chosen_where: str


def verification_view(
    pairs: PairDistances, validation: PairDistances | None, without_validation: str
) -> VerificationView:
    """The threshold `~clusterable.evaluate.select_threshold` chooses on ``validation`` (else on
    ``pairs``), with its rates on ``pairs``.

    Parameters
    ----------
    pairs : PairDistances
        The pairs reported.
    validation : PairDistances or None
        Held-out pairs to choose the threshold on.
    without_validation : str
        Why there is no ``validation``, said on the page when it is None.
    """
    reported = select_threshold(pairs.distances, pairs.same, CRITERION)
    if validation is None:
        where = (
            f"{without_validation} The threshold is chosen ({CRITERION}) on these same pairs, so "
            "its rates are not held out: they flatter the threshold."
        )
        return VerificationView(pairs, reported, None, None, where)
    chosen = select_threshold(validation.distances, validation.same, CRITERION)
    where = (
        f"The threshold is chosen ({CRITERION}) on the validation split's pairs "
        f"({validation.describe()}) and its rates are read on the pairs below, which did not "
        "choose it."
    )
    held_out = choice_at(reported.curve, chosen.threshold, f"{CRITERION} on validation")
    return VerificationView(pairs, held_out, validation, chosen, where)
