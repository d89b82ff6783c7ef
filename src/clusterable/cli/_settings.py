"""The flags of a run, generated from the RunSpec and TrainConfig fields (the idea of nanoGPT's
``configurator.py``), and the settings a command names: its ``--config`` file, then its flags.

Every field is a flag named after it (``embedding_dim`` -> ``--embedding-dim``), typed as the field
declares (`clusterable.train.config_typing`), with the field's source comment as its help and its
default shown. A bool field is ``--name`` / ``--no-name``; a dict of keywords (``loss_args``) is a
repeatable ``--loss-arg NAME=VALUE``; a field whose values a registry, a ``Literal`` or a constant
beside the dataclass names (``OPTIMIZERS`` for ``optimizer``) offers them as choices. A field added
to either dataclass is a flag without an edit here. ``--set NAME=VALUE`` sets any TrainConfig
field too, and ``--config run.yaml`` any setting; flags override the file.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import io
import sys
import textwrap
import tokenize
import typing
from collections.abc import Callable, Iterator
from dataclasses import MISSING, Field, asdict, dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from clusterable.data import available_datasets
from clusterable.losses import available_losses
from clusterable.mining import available_samplers
from clusterable.models import available_models
from clusterable.train.config_typing import field_types, typed_settings

#: Flags whose name is not their field's: the names users know, kept.
FLAG_NAMES = {"labels": "--label-view"}

#: Fields the verb sets itself, never a flag (``train`` prints its banner and epoch lines).
NOT_FLAGS = frozenset({"verbose"})

#: Bool fields whose flag has no ``--no-`` form, as it never had: naming it turns the part on.
SWITCHES = frozenset({"normalize", "autoencoder", "unsupervised"})

#: Values a field takes that neither a registry nor its type names.
FIXED_CHOICES: dict[str, tuple[Any, ...]] = {"labels": ("fine", "coarse"), "channels": (1, 3)}

#: Fields whose values a registry names: ``(names, closed)``; an open field also takes forms of
#: its own (``folder:PATH``, ``timm:NAME``), so its help lists the names instead of enforcing them.
REGISTRIES: dict[str, tuple[Callable[[], list[str]], bool]] = {
    "data": (available_datasets, False),
    "model": (available_models, False),
    "loss": (available_losses, True),
    "sampler": (available_samplers, True),
}

#: What the command line adds to a field's comment.
CLI_NOTES = {
    "data": "folder:PATH holds one sub-folder of images per class, table:PATH is a .npz, .csv "
    "or .npy; see the README's data rules",
    "model": "or timm:NAME / torchvision:NAME",
    "model_args": "lists comma-separated, e.g. channels=16,16,32,32,64,64",
    "autoencoder": "its term's weight is --loss-arg reconstruction_weight=W (default 1)",
}


@dataclass(frozen=True)
class RunFlag:
    """One generated flag: the field it sets, and where (``"spec"``: RunSpec, ``"train"``:
    TrainConfig, a YAML file's ``train:`` mapping)."""

    field: Field
    owner: type
    section: str
    annotation: Any

    @property
    def name(self) -> str:
        return self.field.name

    @property
    def flag(self) -> str:
        if self.is_keywords:
            return f"--{self.name.removesuffix('s').replace('_', '-')}"  # loss_args -> --loss-arg
        return FLAG_NAMES.get(self.name, f"--{self.name.replace('_', '-')}")

    @property
    def is_keywords(self) -> bool:
        return typing.get_origin(self.annotation) is dict or self.annotation is dict


def run_flags(skip: frozenset[str] = frozenset()) -> list[RunFlag]:
    """The flags of every RunSpec and TrainConfig field, in field order, but ``skip``."""
    from clusterable.recipe import RunSpec
    from clusterable.train.config import TrainConfig

    flags = []
    for cls, section in ((RunSpec, "spec"), (TrainConfig, "train")):
        types = field_types(cls)
        for f in fields(cls):
            if f.name not in NOT_FLAGS | skip:
                flags.append(RunFlag(f, cls, section, types[f.name]))
    return flags


@cache
def field_comments(cls: type) -> dict[str, str]:
    """Field name -> its source comment: the ``# ...`` on its line(s), continued by comment lines
    right beneath it (a blank line or code ends it)."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments: dict[int, str] = {}
    code: set[int] = set()
    skipped = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
        elif token.type not in skipped:
            code.add(token.start[0])
    found = {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    for node in body.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        end = node.end_lineno or node.lineno
        # A wrapped field (``x: str = (\n "a"  # comment\n)``) has its comment inside.
        parts = [comments[line] for line in range(node.lineno, end + 1) if line in comments]
        line = end + 1
        while parts and line in comments and line not in code:
            parts.append(comments[line])
            line += 1
        if parts:
            found[node.target.id] = " ".join(parts)
    return found


def _default_of(f: Field) -> Any:
    return f.default_factory() if f.default is MISSING else f.default  # type: ignore[misc]


def _choices(flag: RunFlag) -> tuple[list[Any] | None, str]:
    """Enforced choices, and names the help lists (an open registry's)."""
    if flag.name in FIXED_CHOICES:
        return list(FIXED_CHOICES[flag.name]), ""
    if flag.name in REGISTRIES:
        names, closed = REGISTRIES[flag.name]
        return (names(), "") if closed else (None, ", ".join(names()))
    options = [a for a in typing.get_args(flag.annotation) if a is not type(None)]
    if typing.get_origin(flag.annotation) is typing.Literal:
        return list(typing.get_args(flag.annotation)), ""
    if len(options) == 1 and typing.get_origin(options[0]) is typing.Literal:
        return list(typing.get_args(options[0])), ""
    named = getattr(sys.modules[flag.owner.__module__], f"{flag.name.upper()}S", None)
    if isinstance(named, (tuple, list, dict)) and all(isinstance(v, str) for v in named):
        return list(named), ""  # OPTIMIZERS beside the field optimizer
    return None, ""


def _help(flag: RunFlag, comment: str | None, known: str) -> str:
    default = _default_of(flag.field)
    parts = [comment or flag.name.replace("_", " ")]
    if flag.is_keywords:  # loss_args: typed against the loss's constructor
        parts[0] += f", typed as the {flag.name.removesuffix('_args')} declares it"
    if known:
        parts.append(f"known: {known}")
    if flag.name in CLI_NOTES:
        parts.append(CLI_NOTES[flag.name])
    text = "; ".join(parts).replace("%", "%%")  # argparse %-formats help
    if flag.is_keywords:
        return f"{text} (repeatable)"
    if flag.name in SWITCHES:
        return text
    if default is None and "(None:" in text:  # the comment says what None means
        return text
    return f"{text} (default: {'none' if default is None else default})"


def _typed(name: str, annotation: Any) -> Callable[[str], Any]:
    """An argparse ``type``: the text as the field's type, or a message naming the field."""

    def convert(text: str) -> Any:
        try:
            return typed_settings({name: text}, {name: annotation}, "setting")[name]
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return convert


def _assignment(flag: str) -> Callable[[str], tuple[str, Any]]:
    """An argparse ``type``: ``"margin=0.5"`` -> ``("margin", 0.5)`` (values read as YAML)."""

    def convert(text: str) -> tuple[str, Any]:
        try:
            return parse_assignments([text], flag).popitem()
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return convert


def parse_assignments(pairs: list[str], flag: str) -> dict[str, Any]:
    """``["margin=0.5", "mining=all"]`` -> ``{"margin": 0.5, "mining": "all"}`` (YAML values)."""
    values = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"{flag} takes name=value, got {pair!r}; e.g. {flag} margin=0.5")
        values[name.replace("-", "_")] = yaml.safe_load(text)
    return values


def add_run_flags(
    parser: argparse.ArgumentParser, skip: frozenset[str] = frozenset()
) -> argparse.ArgumentParser:
    """``--config``, a flag for each RunSpec and TrainConfig field but ``skip``, and ``--set``:
    the settings of ``train`` and ``tune``, read back by :func:`given_settings`."""
    from clusterable.recipe import RunSpec
    from clusterable.train.config import TrainConfig

    parser.add_argument("--config", help="YAML run file: RunSpec keys and a `train:` mapping")
    groups = {
        "spec": parser.add_argument_group(
            "run settings", "what to train (RunSpec; the keys of a --config file)"
        ),
        "train": parser.add_argument_group(
            "training settings", "how to train (TrainConfig; the `train:` mapping of --config)"
        ),
    }
    comments = {"spec": field_comments(RunSpec), "train": field_comments(TrainConfig)}
    for flag in run_flags(skip):
        choices, known = _choices(flag)
        text = _help(flag, comments[flag.section].get(flag.name), known)
        group = groups[flag.section]
        if flag.is_keywords:
            group.add_argument(
                flag.flag,
                dest=flag.name,
                action="append",
                type=_assignment(flag.flag),
                metavar="NAME=VALUE",
                help=text,
            )
        elif flag.annotation is bool:
            action = "store_true" if flag.name in SWITCHES else argparse.BooleanOptionalAction
            group.add_argument(flag.flag, dest=flag.name, action=action, default=None, help=text)
        else:
            typed = _typed(flag.name, flag.annotation)
            group.add_argument(
                flag.flag, dest=flag.name, type=typed, choices=choices, default=None, help=text
            )
    groups["train"].add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="any TrainConfig field, typed as the field declares it (repeatable)",
    )
    return parser


def defaults_of(cls: type) -> dict[str, Any]:
    return {f.name: _default_of(f) for f in fields(cls)}


def config_file(args: argparse.Namespace) -> dict[str, Any]:
    """The mapping of the ``--config`` YAML file (empty without one)."""
    if not args.config:
        return {}
    values = yaml.safe_load(Path(args.config).read_text()) or {}
    if not isinstance(values, dict):
        raise ValueError(f"{args.config} must hold a mapping of setting: value")
    return values


def _named(args: argparse.Namespace) -> Iterator[tuple[RunFlag, Any]]:
    """Each generated flag the command line names, with its value."""
    for flag in run_flags():
        value = getattr(args, flag.name, None)
        if value is not None:
            yield flag, dict(value) if flag.is_keywords else value


def given_settings(
    args: argparse.Namespace, file_values: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run and training settings this command names (YAML file, then flags), typed as far as
    the flags are: ``(RunSpec keys, TrainConfig keys)``.

    ``file_values``: the ``--config`` file's mapping when the caller has read it already.
    """
    spec = config_file(args) if file_values is None else file_values
    if "search" in spec:
        raise ValueError(
            f"{args.config} holds a search: mapping: run it with `clusterable tune --config`"
        )
    settings = {"spec": spec, "train": dict(spec.pop("train", {}) or {})}
    for flag, value in _named(args):
        section = settings[flag.section]
        if flag.is_keywords:  # the flags' keywords update the file's
            value = {**section.get(flag.name, {}), **value}
        section[flag.name] = value
    settings["train"].update(parse_assignments(args.set, "--set"))
    return settings["spec"], settings["train"]


def resumed_settings(
    out: Path, spec_given: dict[str, Any], train_given: dict[str, Any]
) -> tuple[Any, Any]:
    """The run's own stored settings; the ones named again must agree (epochs may grow)."""
    from clusterable.recipe import RunSpec
    from clusterable.train import TrainConfig
    from clusterable.train.run_folder import (
        CHANGEABLE_ON_RESUME,
        check_resume_settings,
        read_run_record,
    )

    record = read_run_record(out)
    stored_train = record["config"]
    stored_spec = asdict(RunSpec.from_dict(record["spec"]))
    stored_config = TrainConfig.from_dict(stored_train).to_dict()
    wanted_spec = asdict(RunSpec.from_dict({**record["spec"], **spec_given}))
    wanted_config = TrainConfig.from_dict({**stored_train, **train_given}).to_dict()
    check_resume_settings(stored_spec, wanted_spec, spec_given, "run setting")
    check_resume_settings(
        stored_config, wanted_config, train_given, "training setting", CHANGEABLE_ON_RESUME
    )
    config = TrainConfig.from_dict(
        {**stored_train, **{k: wanted_config[k] for k in train_given}, "verbose": True}
    )
    return RunSpec.from_dict(record["spec"]), config
