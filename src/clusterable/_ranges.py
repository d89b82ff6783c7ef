"""The range of a numeric setting or argument, stated once, and the one refusal of a value outside.

:class:`Bounds` is the vocabulary: a run setting's range (``RunSpec``, ``TrainConfig``), a loss's
own arguments (``EmbeddingLoss.argument_bounds``) and a model's (``register_model(...,
argument_bounds=...)``) are all declared with it, and :func:`check_bounds` is the one check of
all of them, where they are built and where a run's spec names them. A value outside is a
:class:`SettingError` that names the setting and the range in words, so the command line can name
the flag the value came from (``--loss-arg margin=-1 must be at least 0``).

It lives below every package (``losses``, ``models`` and ``train`` import it) and imports nothing
of theirs.

Examples
--------
>>> check_bounds({"margin": 0.5}, {"margin": Bounds(0)}, "loss argument")
>>> check_bounds({"margin": -1.0}, {"margin": Bounds(0)}, "loss argument")
Traceback (most recent call last):
...
clusterable._ranges.SettingError: loss argument margin=-1.0 must be at least 0
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class SettingError(ValueError):
    """A setting whose value cannot be used, with what it is about.

    Attributes
    ----------
    what : str
        What the settings are, in words: ``"training setting"``, ``"loss 'lifted' argument"``.
    setting : str
        The field the value was given for: ``"grad_clip"``; ``"loss_args"`` for a loss's keyword.
    key : str or None
        The keyword within a mapping field (``"margin"`` of ``loss_args``); None for a plain one.
    value : object
        The value as given.
    reason : str
        The rest of the sentence: ``"must be above 0, or none (no clipping)"``; or, where
        ``sentence`` is set, that whole sentence (``"loss 'lifted' takes no argument margn; ..."``).

    ``str(error)`` is ``"{what} {key or setting}={value!r} {reason}"`` (or the sentence);
    :meth:`as_given` puts another subject in front (a flag and its value).
    """

    def __init__(
        self,
        what: str,
        setting: str,
        value: Any,
        reason: str,
        key: str | None = None,
        sentence: bool = False,
    ) -> None:
        self.what, self.setting, self.key, self.value = what, setting, key, value
        self.reason, self.sentence = reason, sentence
        super().__init__(reason if sentence else f"{what} {key or setting}={value!r} {reason}")

    def as_given(self, subject: str) -> str:
        """The message about ``subject`` (``"--grad-clip -1.0"``): ``"--grad-clip -1.0 must be
        above 0, ..."``."""
        return f"{subject}: {self.reason}" if self.sentence else f"{subject} {self.reason}"


@dataclass(frozen=True)
class Bounds:
    """The range of a numeric setting; of each item where the setting is a list of numbers
    (a model's layer widths).

    ``low`` / ``high``: its ends (None: unbounded); ``low_open`` / ``high_open``: the end itself
    is excluded; ``none``: what None means where the setting may be None (shown in the message);
    ``integer``: only an int is in range (a count, a seed), never a float, which a count would
    silently truncate and a seed cannot take. NaN and infinity are outside every range.

    Examples
    --------
    >>> Bounds(0, low_open=True, none="no clipping").describe()
    'must be above 0, or none (no clipping)'
    >>> Bounds(0, 1, high_open=True).describe()
    'must be in [0, 1)'
    >>> Bounds(1).refusal((64, 0))
    'holds 0: each item must be at least 1'
    >>> Bounds(2, integer=True).refusal(2.5)
    'is not an integer: it must be an integer of at least 2'
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    none: str | None = None
    integer: bool = False

    def holds(self, value: Any) -> bool:
        """Whether ``value`` is in range (None always is: the type allowed it)."""
        return self.refusal(value) is None

    def refusal(self, value: Any, none_allowed: bool = True) -> str | None:
        """Why ``value`` is out of range, as the rest of a sentence about it; None when it is in.

        A list or tuple is in range when each of its items is. None is in range when
        ``none_allowed`` (a setting whose type was checked on entry, which allowed it) or when
        the bounds say what it means (:attr:`none`); otherwise it is no number.
        """
        if value is None:
            if none_allowed or self.none is not None:
                return None
            return f"is not a number: it {self.describe()}"
        if isinstance(value, (list, tuple)):
            for item in value:
                if self.refusal(item) is not None:
                    return f"holds {item!r}: each item {self.describe()}"
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return f"is not a number: it {self.describe()}"
        if not math.isfinite(value):
            return f"is not a finite number: it {self.describe()}"
        if self.integer and not isinstance(value, numbers.Integral):
            return f"is not an integer: it {self.describe()}"
        number = float(value)  # finite, so exact enough to compare with the float bounds
        if self.low is not None and (number <= self.low if self.low_open else number < self.low):
            return self.describe()
        if self.high is not None and (
            number >= self.high if self.high_open else number > self.high
        ):
            return self.describe()
        return None

    def describe(self) -> str:
        """The bounds in words, as error messages say them: "must be in [0, 1)"."""
        low, high = _number(self.low), _number(self.high)
        an_integer = "an integer " if self.integer else ""
        of = "of " if self.integer else ""
        if self.low is not None and self.high is not None:
            ends = f"{'(' if self.low_open else '['}{low}, {high}"
            text = f"must be {an_integer}in {ends}{')' if self.high_open else ']'}"
        elif self.low is not None:
            text = f"must be {an_integer}{'above' if self.low_open else of + 'at least'} {low}"
        elif self.high is not None:
            text = f"must be {an_integer}{'below' if self.high_open else of + 'at most'} {high}"
        else:
            text = f"may be any {'integer' if self.integer else 'number'}"
        return text if self.none is None else f"{text}, or none ({self.none})"


def _number(value: float | None) -> str:
    """``1`` for 1.0, ``0.5``, ``4294967295``: as a person writes it."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def check_bounds(
    values: Mapping[str, Any],
    bounds: Mapping[str, Bounds],
    what: str,
    field: str | None = None,
    *,
    none_allowed: bool = True,
) -> None:
    """Refuse a value of ``values`` outside its setting's ``bounds`` (names without bounds pass):
    the one range check of run settings, training settings, and a loss's and a model's arguments.

    Parameters
    ----------
    values : mapping
        Setting name -> value.
    bounds : mapping
        Setting name -> its :class:`Bounds`.
    what : str
        What the settings are, in words (``"loss 'lifted' argument"``): named in the error.
    field : str, optional
        The mapping field these are the keywords of (``"loss_args"``), for
        ``SettingError.setting``; None: each name is a field itself.
    none_allowed : bool
        Whether None passes every bound: True for settings whose types were checked on entry
        (a run's spec, the training settings); False for a function's arguments, which nothing
        typed, so that ``margin=None`` is refused here, naming it, rather than failing as
        Python's ``TypeError`` where the value is first used. A bound that says what None means
        (:attr:`Bounds.none`) takes it either way.

    Raises
    ------
    SettingError
        Naming the setting, its value and its range; NaN, infinity and a value that is no number
        included.
    """
    for name, value in values.items():
        if name not in bounds:
            continue
        reason = bounds[name].refusal(value, none_allowed)
        if reason is not None:
            setting, key = (name, None) if field is None else (field, name)
            raise SettingError(what, setting, value, reason, key)


#: A seed of a random step where the public functions take one (clustering, evaluation, a search
#: index): an int NumPy's generators and scikit-learn's ``random_state`` both take.
SEED = Bounds(0, 2**32 - 1, integer=True)


def check_seed(seed: Any, what: str) -> None:
    """Refuse a ``seed`` outside `SEED` (a float, a string, a negative number) where it enters,
    before NumPy or scikit-learn meet it deep inside: a :class:`SettingError` naming ``what``.

    >>> try:
    ...     check_seed(1.5, "clustering")
    ... except ValueError as error:
    ...     print(error)
    clustering seed=1.5 is not an integer: it must be an integer in [0, 4294967295]

    None is refused too: these seeds make a result reproducible, and None would draw a fresh one.
    """
    check_bounds({"seed": seed}, {"seed": SEED}, what, none_allowed=False)
