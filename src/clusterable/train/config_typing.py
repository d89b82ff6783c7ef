"""Settings typed against what receives them: a dataclass field or a constructor's signature.

Values reach a run as text (``--set lr=1e-3``, ``--loss-arg margin=1e-1``) or as YAML, whose 1.1
rules read ``1e-3`` as a string. Each value is converted here to the type its receiver declares,
once, before anything is built or trained, so a wrong value is a one-line error naming the setting
rather than a ``TypeError`` from inside the training step. A float setting is never NaN or
infinite. :class:`Bounds` states a numeric setting's range once, beside its field, and
:func:`check_bounds` refuses a value outside it with the range in words (both live in
`clusterable._ranges`, where the losses and models declare their arguments' ranges too, and are
re-exported here).

Every refusal is a :class:`SettingError`: it names the setting it is about, so that the command
line can name the flag, the ``--set`` or the ``--config`` line the value came from instead
(``--grad-clip -1.0 must be above 0`` rather than ``grad_clip=-1.0 ...``).
"""

from __future__ import annotations

import collections.abc
import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from clusterable._ranges import Bounds, SettingError, check_bounds
from clusterable._register import did_you_mean

__all__ = [
    "Bounds",
    "SettingError",
    "check_bounds",
    "check_choice",
    "did_you_mean",
    "field_types",
    "parameter_types",
    "read_settings_file",
    "settings_file_line",
    "typed_settings",
]

_NONE_WORDS = {"none", "null", "~", ""}
_TRUE_WORDS = {"true", "yes", "on", "1"}
_FALSE_WORDS = {"false", "no", "off", "0"}


class _NotFinite(ValueError):
    """A float setting given as NaN or infinity."""


def _describe(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("collections.abc.", "")


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError
    number = float(value.strip() if isinstance(value, str) else value)
    if not math.isfinite(number):
        raise _NotFinite
    return number


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, str):
        number = float(value.strip())
    else:
        number = value
    if isinstance(number, float) and not math.isfinite(number):
        raise _NotFinite
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
            except _NotFinite:
                raise
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
    values: Mapping[str, Any],
    annotations: Mapping[str, Any],
    what: str,
    field: str | None = None,
    bounds: Mapping[str, Bounds] | None = None,
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
    field : str, optional
        The mapping field these are the keywords of (``"loss_args"``), for
        ``SettingError.setting``; None: each name is a field itself.
    bounds : mapping, optional
        Setting name -> its range: a NaN or infinite value of a setting named here is refused
        with the range in words (the range itself is :func:`check_bounds`'s to check, once the
        values are typed).

    Raises
    ------
    SettingError
        A value that is not of its setting's type, or a number that is NaN or infinite; the
        message names the setting, the value and the type (or the range) wanted.

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
        setting, key = (name, None) if field is None else (field, name)
        try:
            typed[name] = _convert(value, annotations[name])
        except _NotFinite:
            wanted = "; give a number"
            if bounds and name in bounds:
                wanted = f": it {bounds[name].describe()}"
            reason = f"is not a finite number{wanted}"
            raise SettingError(what, setting, value, reason, key) from None
        except (ValueError, TypeError, OverflowError):
            if typing.get_origin(annotations[name]) is typing.Literal:
                choices = ", ".join(repr(v) for v in typing.get_args(annotations[name]))
                raise SettingError(
                    what, setting, value, f"is not one of {choices}; give one of them", key
                ) from None
            raise SettingError(
                what,
                setting,
                value,
                f"is not a {_describe(annotations[name])}; give {name} a value of that type",
                key,
            ) from None
    return typed


def field_types(cls: type) -> dict[str, Any]:
    """Field name -> resolved type of a dataclass (``from __future__`` annotations resolved)."""
    return typing.get_type_hints(cls)


def parameter_types(constructor: Callable[..., Any]) -> dict[str, Any]:
    """Keyword name -> resolved type of a callable's annotated parameters (a class: its
    ``__init__``); parameters without an annotation are left out."""
    # mypy calls reading __init__ unsound (a subclass may change it): this is the class's own.
    target = constructor.__init__ if isinstance(constructor, type) else constructor  # type: ignore[misc]
    try:
        hints = typing.get_type_hints(target)
    except (NameError, TypeError):
        hints = {}
    names = inspect.signature(target).parameters
    return {name: hints[name] for name in names if name in hints and name != "return"}


def check_choice(
    what: str,
    setting: str,
    value: Any,
    choices: Sequence[Any],
    key: str | None = None,
    shown: Sequence[str] | None = None,
) -> None:
    """Refuse a ``value`` outside ``choices``, listing them (``shown`` instead, where the
    choices are too many to list) with the closest as a "did you mean".

    Raises
    ------
    SettingError
    """
    if value in choices:
        return
    listed = ", ".join(str(c) for c in (choices if shown is None else shown))
    reason = f"is not one of {listed}{did_you_mean(value, [str(c) for c in choices])}"
    raise SettingError(what, setting, value, reason, key)


def read_settings_file(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML settings file holds (empty for an empty file).

    Raises
    ------
    ValueError
        One line naming the file, the line and the problem: YAML that does not parse, a setting
        given twice in one mapping (:func:`clusterable._yaml.load_yaml`), or a file that holds
        no mapping of ``setting: value``.
    FileNotFoundError
        No such file.
    """
    import yaml

    from clusterable._yaml import DuplicateKeyError, load_yaml

    path = Path(path)
    try:
        values = load_yaml(path.read_text())
    except DuplicateKeyError as error:
        raise ValueError(f"{path}, line {error.line}: {error.problem}") from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = " ".join(str(error.problem or error.context or "not YAML").split())
        raise ValueError(
            f"{path}{where}: {problem}; fix the YAML there (settings are `name: value` lines)"
        ) from None
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not YAML ({' '.join(str(error).split())})") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ValueError(
            f"{path}, line 1: holds a {type(values).__name__}, not a mapping of `setting: value` "
            "lines"
        )
    return values


def settings_file_line(path: str | Path, keys: Sequence[str]) -> int | None:
    """The line (1-based) of the setting ``keys`` in a YAML settings file (``("train", "lr")``:
    ``lr`` in the ``train:`` mapping); None where the file does not hold it."""
    import yaml

    from clusterable._yaml import UniqueKeyLoader

    try:
        node = yaml.compose(Path(path).read_text(), Loader=UniqueKeyLoader)
    except (OSError, yaml.YAMLError):
        return None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return None
        found = next((item for item in node.value if item[0].value == key), None)
        if found is None:
            return None
        key_node, node = found
    return key_node.start_mark.line + 1
