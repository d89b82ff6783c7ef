"""Keywords the evaluation renamed, refused with a message that names the new one.

A keyword that only changed its name would otherwise fail with Python's "unexpected keyword
argument", which does not say what to write instead; and ``metric=`` (a distance), one letter away
from ``metrics=`` (the scores), is the reason for the rename.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, get_args

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


def refuse_metric_meaning_metrics(distances: Any) -> Callable[[F], F]:
    """Decorator, outside `refuse_renamed`, for a function that takes both ``metrics=`` (the
    scores) and ``distance=`` (formerly ``metric=``): ``metric=`` given something other than a
    name of ``distances`` (a ``Literal`` of them), such as ``metric=["nmi"]``, meant
    ``metrics=``, one letter away, and raises a one-line TypeError saying so, where
    `refuse_renamed` would write ``distance=["nmi"]``.

    Examples
    --------
    >>> from typing import Literal
    >>> @refuse_metric_meaning_metrics(Literal["euclidean", "cosine"])
    ... def table(x, *, metrics=None, distance="euclidean"):
    ...     return metrics
    >>> table(1, metric=["nmi"])
    Traceback (most recent call last):
    ...
    TypeError: table() takes no metric=: the scores to compute are metrics=, write ...
    """
    names = get_args(distances)

    def wrap(function: F) -> F:
        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.get("metric", names[0])
            if not (isinstance(value, str) and value in names):
                name = function.__name__
                raise TypeError(
                    f"{name}() takes no metric=: the scores to compute are metrics=, write "
                    f"{name}(..., metrics={value!r}) (the distance is distance=)"
                )
            return function(*args, **kwargs)

        return checked  # type: ignore[return-value]

    return wrap
