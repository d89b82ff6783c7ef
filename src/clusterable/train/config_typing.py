"""Settings typed against what receives them: a dataclass field or a constructor's signature.

Values reach a run as text (``--set lr=1e-3``, ``--loss-arg margin=1e-1``) or as YAML, whose 1.1
rules read ``1e-3`` as a string. Each value is converted here to the type its receiver declares,
once, before anything is built or trained, so a wrong value is a one-line error naming the setting
rather than a ``TypeError`` from inside the training step.
"""

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

_NONE_WORDS = {"none", "null", "~", ""}
_TRUE_WORDS = {"true", "yes", "on", "1"}
_FALSE_WORDS = {"false", "no", "off", "0"}


def _describe(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("collections.abc.", "")


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError
    return float(value.strip() if isinstance(value, str) else value)


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, str):
        number = float(value.strip())
    else:
        number = value
    if isinstance(number, float) and not number.is_integer():
        raise ValueError
    return int(number)


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ValueError


def _to_sequence(value: Any, annotation: Any) -> tuple | list:
    """A list or tuple, text ``"16,16,32"`` or one number, each item typed as the annotation
    says (``tuple[int, ...]``, ``Sequence[int]``, ``list[float]``); a Sequence becomes a tuple."""
    if isinstance(value, str):
        value = [part for part in value.replace(" ", "").split(",") if part]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]  # one width: hidden_dims=64
    if not isinstance(value, (list, tuple)):
        raise ValueError
    items = [a for a in typing.get_args(annotation) if a is not Ellipsis]
    if len(items) == 1:
        value = [_convert(item, items[0]) for item in value]
    origin = typing.get_origin(annotation) or annotation
    return list(value) if origin is list else tuple(value)


def _convert(value: Any, annotation: Any) -> Any:
    """``value`` as ``annotation`` says; ValueError when it cannot be."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        if type(None) in options and (
            value is None or (isinstance(value, str) and value.strip().lower() in _NONE_WORDS)
        ):
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(value, option)
            except (ValueError, TypeError):
                continue
        raise ValueError
    if origin is typing.Literal:
        if value in typing.get_args(annotation):
            return value
        raise ValueError
    if annotation is float:
        return _to_float(value)
    if annotation is int:
        return _to_int(value)
    if annotation is bool:
        return _to_bool(value)
    if annotation is str:
        if isinstance(value, (dict, list)) or value is None:
            raise ValueError
        return str(value)
    if annotation is dict or origin is dict:
        if not isinstance(value, Mapping):
            raise ValueError
        return dict(value)
    if origin in (tuple, list, collections.abc.Sequence) or annotation in (tuple, list):
        return _to_sequence(value, annotation)
    return value  # an annotation this module does not know: the receiver checks it


def typed_settings(
    values: Mapping[str, Any], annotations: Mapping[str, Any], what: str
) -> dict[str, Any]:
    """Each of ``values`` converted to the type ``annotations`` gives its name.

    Parameters
    ----------
    values : mapping
        Setting name -> value as given (text from the command line, YAML scalars, Python values).
    annotations : mapping
        Setting name -> type (``float``, ``int | None``, ``bool``, ...); names missing here pass
        through unchanged.
    what : str
        What the settings are for, e.g. ``"training setting"``: named in the error.

    Raises
    ------
    ValueError
        A value that is not of its setting's type; the message names the setting, the value and
        the type wanted.

    Examples
    --------
    >>> typed_settings({"lr": "1e-3", "epochs": "5"}, {"lr": float, "epochs": int}, "setting")
    {'lr': 0.001, 'epochs': 5}
    """
    typed = {}
    for name, value in values.items():
        if name not in annotations:
            typed[name] = value
            continue
        try:
            typed[name] = _convert(value, annotations[name])
        except (ValueError, TypeError, OverflowError):
            if typing.get_origin(annotations[name]) is typing.Literal:
                choices = ", ".join(repr(v) for v in typing.get_args(annotations[name]))
                raise ValueError(
                    f"{what} {name}={value!r} is not one of {choices}; give one of them"
                ) from None
            raise ValueError(
                f"{what} {name}={value!r} is not a {_describe(annotations[name])}; "
                f"give {name} a value of that type"
            ) from None
    return typed


def field_types(cls: type) -> dict[str, Any]:
    """Field name -> resolved type of a dataclass (``from __future__`` annotations resolved)."""
    return typing.get_type_hints(cls)


def parameter_types(constructor: Callable[..., Any]) -> dict[str, Any]:
    """Keyword name -> resolved type of a callable's annotated parameters (a class: its
    ``__init__``); parameters without an annotation are left out."""
    target = constructor.__init__ if isinstance(constructor, type) else constructor
    try:
        hints = typing.get_type_hints(target)
    except (NameError, TypeError):
        hints = {}
    names = inspect.signature(target).parameters
    return {name: hints[name] for name in names if name in hints and name != "return"}
