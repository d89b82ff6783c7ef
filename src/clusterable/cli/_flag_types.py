"""The argparse types of the verbs' own numeric flags (``--seed``, ``-k``, ``--ks``, ``--folds``,
...): a value of the wrong type, sign or range is refused where it enters, in one line naming the
flag and what it takes (``argument --folds: '1' is not a whole number of 2 or more``), never a
Python message (``invalid literal for int()``) or a failure deep in the verb.

The run settings of ``train`` and ``tune`` are typed and checked by their dataclasses instead
(`clusterable.cli._settings`). Nothing here imports more than argparse and math, so that
``clusterable VERB --help`` starts at once.
"""

from __future__ import annotations

import argparse
import difflib
import math
from collections.abc import Callable, Sequence

from clusterable.cli._names import PARAMETERISED_METRICS

#: Seeds NumPy's global generator takes: below 2**32.
SEED_MAX = 2**32 - 1


def whole_number(least: int, most: int | None = None) -> Callable[[str], int]:
    """A type: the text as an int of at least ``least`` (and at most ``most``)."""
    wanted = (
        f"a whole number of {least} or more"
        if most is None
        else (f"a whole number from {least} to {most}")
    )

    def convert(text: str) -> int:
        try:
            number = float(text.strip())
        except ValueError:
            number = math.nan
        if not (number.is_integer() and number >= least and (most is None or number <= most)):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
        return int(number)

    convert.__name__ = "whole number"  # argparse's fallback message names the type
    return convert


def fraction(text: str) -> float:
    """A type: a number in (0, 1] (a recall, a share)."""
    try:
        number = float(text.strip())
    except ValueError:
        number = math.nan
    if not 0.0 < number <= 1.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r} is not a number above 0 and at most 1")
    return number


#: ``--seed``: the seed of every random step.
seed = whole_number(0, SEED_MAX)


def ks_list(text: str) -> str:
    """``--ks``: comma-separated whole numbers of 1 or more (``1,2,4,8``), given back in the same
    form with the spaces gone."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() and int(part) >= 1 for part in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of whole numbers of 1 or more separated by commas; give "
            "e.g. 1,2,4,8"
        )
    return ",".join(str(int(part)) for part in parts)


def metric_name(names: Sequence[str]) -> Callable[[str], str]:
    """A type: a registered metric of ``names``, a per-K one with its K, as every table prints
    it (``recall@1`` for ``recall@k`` at K = 1), or one that takes a rate with it
    (``fnmr@fmr=1e-3``, given back in the table's one spelling, ``fnmr@fmr=0.001``; the bare
    name takes its default); refused with the names and a "did you mean"."""
    per_k = [name[: -len("k")] for name in names if name.endswith("@k")]

    def convert(text: str) -> str:
        name = text.strip().lower()
        prefix, at, k = name.rpartition("@")
        if name in names or (at and f"{prefix}@" in per_k and k.isdigit() and int(k) >= 1):
            return name
        base, equals, value = name.partition("=")
        if equals and base in PARAMETERISED_METRICS and base in names:
            try:
                rate = float(value)
            except ValueError:
                rate = math.nan
            if 0.0 <= rate <= 1.0:  # NaN fails too
                return f"{base}={rate!r}"
            raise argparse.ArgumentTypeError(
                f"{text!r}: {base} takes a rate in [0, 1] after '=', e.g. {base}=0.001"
            )
        offered = [*names, *(f"{prefix}K" for prefix in per_k)]
        offered += [f"{n}=EPS" for n in names if n in PARAMETERISED_METRICS]
        spelled = [*(n for n in names if not n.endswith("@k")), *(f"{p}1" for p in per_k)]
        close = difflib.get_close_matches(base if equals else name, spelled, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise argparse.ArgumentTypeError(
            f"unknown metric {text!r}{hint}; choose among {', '.join(offered)} (K a whole "
            "number, EPS a rate in [0, 1])"
        )

    convert.__name__ = "metric"
    return convert
