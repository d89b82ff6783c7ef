"""Keywords the evaluation renamed, refused with a message that names the new one.

A keyword that only changed its name would otherwise fail with Python's "unexpected keyword
argument", which does not say what to write instead; and ``metric=`` (a distance), one letter away
from ``metrics=`` (the scores), is the reason for the rename.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def refuse_renamed(**renamed: str) -> Callable[[F], F]:
    """Decorator: a call with one of the old keywords ``renamed`` raises a one-line TypeError
    naming the new keyword, instead of Python's "unexpected keyword".

    ``renamed`` maps each old keyword to the new one's name, or to what to write instead
    (``"options=EvaluationOptions(cluster_kwargs={value})"``: ``{value}`` is the value given).

    Examples
    --------
    >>> @refuse_renamed(metric="distance")
    ... def score(x, *, distance="euclidean"):
    ...     return distance
    >>> score(1, metric="cosine")
    Traceback (most recent call last):
    ...
    TypeError: score() takes distance= now, not metric=: write score(..., distance='cosine')
    """

    def wrap(function: F) -> F:
        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            for old, new in renamed.items():
                if old in kwargs:
                    name, value = function.__name__, kwargs[old]
                    keyword = new.partition("=")[0]
                    write = f"{new}={value!r}" if new.isidentifier() else new
                    raise TypeError(
                        f"{name}() takes {keyword}= now, not {old}=: write "
                        f"{name}(..., {write.replace('{value}', repr(value))})"
                    )
            return function(*args, **kwargs)

        return checked  # type: ignore[return-value]

    return wrap
