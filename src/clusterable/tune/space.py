"""A hyper-parameter search space, from the command line or YAML, and where each value goes.

Forms (the command line, then YAML)::

    --param sigma=log:0.001:1000        sigma: {log: [0.001, 1000]}       log-uniform float
    --param margin=float:0.1:2          margin: {float: [0.1, 2]}         uniform float
    --param epochs=int:5:30             epochs: {int: [5, 30]}            uniform integer
    --param batch_size=logint:32:512    batch_size: {logint: [32, 512]}   log-uniform integer
    --param lam=choice:0.1,0.5,1,10     lam: {choice: [0.1, 0.5, 1, 10]}
    --param model.hidden_dims=choice:[64],[128,64]                   a choice of lists

A name is a field of :class:`~clusterable.train.TrainConfig` (``lr``, ``batch_size``, ...), of
:class:`~clusterable.recipe.RunSpec` (``embedding_dim``, ...), or a keyword of the loss
(``margin``, ``sigma``, ...); ``train.NAME``, ``run.NAME`` and ``loss.NAME`` say which when a name
could be both, and ``model.NAME`` names a keyword of the model (``model.hidden_dims``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

import yaml

from clusterable._yaml import load_yaml
from clusterable.train.config import TrainConfig
from clusterable.train.config_typing import typed_settings

Kind = Literal["log", "float", "int", "logint", "choice"]
Target = Literal["train", "run", "loss", "model"]

#: RunSpec fields a search may set (data and names of pieces are not hyper-parameters).
RUN_FIELDS = ("embedding_dim", "normalize", "val_fraction", "memory_size")


@dataclass(frozen=True)
class Parameter:
    """One searched hyper-parameter: its name, where it goes, and its range or choices."""

    name: str
    target: Target
    kind: Kind
    low: float = 0.0
    high: float = 0.0
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: Any) -> Any:
        """The value an Optuna ``trial`` draws for this parameter."""
        key = f"{self.target}.{self.name}"
        if self.kind == "choice":
            return trial.suggest_categorical(key, list(self.choices))
        if self.kind in ("int", "logint"):
            return trial.suggest_int(key, int(self.low), int(self.high), log=self.kind == "logint")
        return trial.suggest_float(key, self.low, self.high, log=self.kind == "log")

    def describe(self) -> str:
        """The parameter in words: ``lr log [1e-05, 0.01]``."""
        if self.kind == "choice":
            return f"{self.name} in {{{', '.join(map(str, self.choices))}}}"
        return f"{self.name} {self.kind} [{self.low:g}, {self.high:g}]"


def parse_parameter(text: str) -> Parameter:
    """``NAME=KIND:...`` of ``--param`` (see the module docstring)."""
    name, sep, rest = text.partition("=")
    kind, sep2, values = rest.partition(":")
    if not sep or not sep2 or not name.strip():
        raise ValueError(
            f"--param {text!r}: write NAME=log:LOW:HIGH, NAME=float:LOW:HIGH, NAME=int:LOW:HIGH, "
            "NAME=logint:LOW:HIGH or NAME=choice:A,B,C"
        )
    parts = _choices(values) if kind == "choice" else values.split(":")
    if not all(part.strip() for part in parts):
        raise ValueError(
            f"--param {text!r}: a value is empty; write NAME=choice:A,B,C or NAME=KIND:LOW:HIGH "
            "with every value given"
        )
    return _parameter(name.strip(), kind, [_scalar(v) for v in parts])


def parse_space(search: Mapping[str, Any]) -> list[Parameter]:
    """A YAML ``search:`` mapping: ``NAME: {KIND: [LOW, HIGH]}`` or ``NAME: {choice: [...]}``."""
    if not isinstance(search, Mapping):
        raise ValueError(
            f"search: holds one NAME: {{KIND: [...]}} entry per searched setting (a mapping, "
            f"e.g. `search: {{lr: {{log: [1e-4, 1e-2]}}}}`), got {search!r}"
        )
    parameters = []
    for name, form in search.items():
        if not isinstance(form, Mapping) or len(form) != 1:
            raise ValueError(
                f"search: {name}: write one of {{log: [LOW, HIGH]}}, {{float: [LOW, HIGH]}}, "
                f"{{int: [LOW, HIGH]}}, {{logint: [LOW, HIGH]}} or {{choice: [A, B, ...]}}, "
                f"got {form!r}"
            )
        ((kind, values),) = form.items()
        if not isinstance(values, (list, tuple)):
            raise ValueError(
                f"search: {name}: {kind} takes a list, e.g. {{{kind}: [LOW, HIGH]}} or "
                f"{{choice: [A, B]}}, got {values!r}"
            )
        parameters.append(_parameter(str(name), str(kind), [_yaml_number(v) for v in values]))
    return parameters


def _yaml_number(value: Any) -> Any:
    """A YAML value that is a number written as text (YAML 1.1 reads ``1e-3``, without a dot,
    as a string) as that number, converted as the ``train:`` mapping converts its settings
    (:func:`~clusterable.train.config_typing.typed_settings`); any other value as it is."""
    if not isinstance(value, str):
        return value
    kind = float if any(c in value for c in ".eE") else int
    try:
        return typed_settings({"value": value}, {"value": kind}, "search value")["value"]
    except ValueError:  # a word (a sampler's name), or not finite ("nan"): left as written
        return value


def _parameter(name: str, kind: str, values: Sequence[Any]) -> Parameter:
    target, key = _target(name)
    if kind == "choice":
        if not values:
            raise ValueError(f"{name}: choice needs at least one value")
        return Parameter(key, target, "choice", choices=tuple(values))
    if kind not in ("log", "float", "int", "logint"):
        raise ValueError(f"{name}: unknown kind {kind!r}; use log, float, int, logint or choice")
    if len(values) != 2 or not all(isinstance(v, (int, float)) for v in values):
        raise ValueError(f"{name}: {kind} needs two numbers LOW and HIGH, got {list(values)}")
    low, high = float(values[0]), float(values[1])
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise ValueError(f"{name}: LOW must be below HIGH, got {low:g} and {high:g}")
    if kind == "log" and low <= 0:
        raise ValueError(f"{name}: a log range needs LOW > 0, got {low:g}")
    if kind in ("int", "logint") and (low != int(low) or high != int(high)):
        article = "an" if kind == "int" else "a"
        raise ValueError(
            f"{name}: {article} {kind} range needs whole numbers, got {low:g} and {high:g}"
        )
    if kind == "logint" and low < 1:
        raise ValueError(f"{name}: a logint range needs LOW >= 1 (a log scale), got {low:g}")
    return Parameter(key, target, kind, low, high)  # type: ignore[arg-type]


def _target(name: str) -> tuple[Target, str]:
    prefix, dot, key = name.partition(".")
    if dot:
        if prefix not in ("train", "run", "loss", "model"):
            raise ValueError(
                f"{name}: the prefix says where a value goes: train., run., loss. or model."
            )
        if prefix == "run" and key not in RUN_FIELDS:
            raise ValueError(
                f"{name}: a search sets only the run settings {', '.join(RUN_FIELDS)}; the data, "
                "the loss, the model and the other pieces are the run's, not hyper-parameters: "
                "give them as flags or in --config, and search them as separate runs"
            )
        return prefix, key  # type: ignore[return-value]
    if name in {f.name for f in fields(TrainConfig)}:
        return "train", name
    if name in RUN_FIELDS:
        return "run", name
    return "loss", name


def _choices(text: str) -> list[str]:
    """The values of ``choice:A,B,C``: split at the commas outside brackets and braces, so that a
    choice of lists (``model.hidden_dims=choice:[64],[128,64]``) or of mappings
    (``train.sampler_args=choice:{pool_size: 2, hard: 1},{}``) keeps each whole."""
    parts, depth, start = [], 0, 0
    for at, character in enumerate(text):
        depth += {"[": 1, "]": -1, "{": 1, "}": -1}.get(character, 0)
        if character == "," and depth == 0:
            parts.append(text[start:at])
            start = at + 1
    return [*parts, text[start:]]


def _scalar(text: str) -> Any:
    """A command-line value as YAML reads it, with ``1e-3`` a number (YAML 1.1 reads it as text)."""
    try:
        return float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        pass
    try:
        return load_yaml(text)
    except yaml.YAMLError:
        return text  # "[64" of a list split at its comma: the text, for its setting to refuse
