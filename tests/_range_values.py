"""Values a declared range refuses (`clusterable._ranges.Bounds`), for the tests that check every
loss's and every model's arguments against their declarations."""

from __future__ import annotations

import math

from clusterable._ranges import Bounds


def outside(bounds: Bounds) -> list[float]:
    """Values each end of ``bounds`` refuses (one beyond it; the end itself where it is open),
    then NaN and both infinities, which every range refuses."""
    values: list[float] = []
    if bounds.low is not None:
        values += [bounds.low - 1] + ([bounds.low] if bounds.low_open else [])
    if bounds.high is not None:
        values += [bounds.high + 1] + ([bounds.high] if bounds.high_open else [])
    return [*values, math.nan, math.inf, -math.inf]
