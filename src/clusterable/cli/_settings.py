"""The flags of a run, generated from the RunSpec and TrainConfig fields (the idea of nanoGPT's
``configurator.py``), and the settings a command names: its ``--config`` file, then its flags.

Every field is a flag named after it (``embedding_dim`` -> ``--embedding-dim``), typed as the field
declares (`clusterable.train.config_typing`), with the field's source comment as its help and its
default shown. A bool field is ``--name`` / ``--no-name``; a dict of keywords (``loss_args``) is a
repeatable ``--loss-arg NAME=VALUE``; a field whose values a registry, a ``Literal`` or a constant
beside the dataclass names (``OPTIMIZERS`` for ``optimizer``) offers them as choices. A field added
to either dataclass is a flag without an edit here. ``--set NAME=VALUE`` sets any TrainConfig
field too, and ``--config run.yaml`` any setting; flags override the file.

The fields are read from the dataclasses' source, not imported (`declared_fields`): their modules
import torch, and ``clusterable train --help`` should start at once. Where the source cannot be
read (a field whose default is no literal), the dataclasses are imported instead.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import inspect
import io
import sys
import textwrap
import tokenize
import typing
from collections.abc import Callable, Iterator
from dataclasses import MISSING, asdict, dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any, TypeGuard

from clusterable.cli._names import registry_names

#: Flags whose name is not their field's: the names users know, kept.
FLAG_NAMES = {"labels": "--label-view"}

#: Fields the verb sets itself, never a flag (``train`` prints its banner and epoch lines).
NOT_FLAGS = frozenset({"verbose"})

#: Bool fields whose flag has no ``--no-`` form, as it never had: naming it turns the part on.
SWITCHES = frozenset({"normalize", "autoencoder", "unsupervised"})

#: Values a field takes that neither a registry nor its type names.
FIXED_CHOICES: dict[str, tuple[Any, ...]] = {"labels": ("fine", "coarse"), "channels": (1, 3)}

#: Fields whose values a registry names: ``(registry, closed)``, the registry a key of
#: `clusterable.cli._names.LISTINGS`; an open field also takes forms of its own (``folder:PATH``,
#: ``timm:NAME``), so its help lists the names instead of enforcing them.
REGISTRIES: dict[str, tuple[str, bool]] = {
    "data": ("datasets", False),
    "model": ("models", False),
    "loss": ("losses", True),
    "sampler": ("samplers", True),
}

#: The dataclasses whose fields are the run flags, by section: ``(module, class)``.
RUN_CLASSES = {
    "spec": ("clusterable.recipe", "RunSpec"),
    "train": ("clusterable.train.config", "TrainConfig"),
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
class DeclaredField:
    """A dataclass field as its class declares it."""

    name: str
    annotation: Any  # the resolved type
    default: Any  # the default value (a default_factory's product)
    comment: str | None  # the source comment on its line(s)
    named_values: tuple[Any, ...] | None  # a constant beside the class that names its values:
    # OPTIMIZERS for the field optimizer (None: no such constant)


@dataclass(frozen=True)
class RunFlag:
    """One generated flag: the field it sets, and where (``"spec"``: RunSpec, ``"train"``:
    TrainConfig, a YAML file's ``train:`` mapping)."""

    field: DeclaredField
    section: str

    @property
    def name(self) -> str:
        """The setting's field name."""
        return self.field.name

    @property
    def annotation(self) -> Any:
        """The setting's type annotation."""
        return self.field.annotation

    @property
    def flag(self) -> str:
        """The command-line flag (``loss_args`` -> ``--loss-arg``)."""
        if self.is_keywords:
            return f"--{self.name.removesuffix('s').replace('_', '-')}"  # loss_args -> --loss-arg
        return FLAG_NAMES.get(self.name, f"--{self.name.replace('_', '-')}")

    @property
    def is_keywords(self) -> bool:
        """Whether the setting is a dict of keywords, given as repeated ``NAME=VALUE`` flags."""
        return typing.get_origin(self.annotation) is dict or self.annotation is dict


def run_flags(skip: frozenset[str] = frozenset()) -> list[RunFlag]:
    """The flags of every RunSpec and TrainConfig field, in field order, but ``skip``."""
    return [
        RunFlag(f, section)
        for section in RUN_CLASSES
        for f in declared_fields(section)
        if f.name not in NOT_FLAGS | skip
    ]


def run_defaults(section: str) -> dict[str, Any]:
    """Field name -> default of the ``section`` dataclass (``"spec"`` or ``"train"``)."""
    return {f.name: f.default for f in declared_fields(section)}


class _Unreadable(Exception):
    """A declaration that the source reader cannot evaluate without importing its module."""


@cache
def declared_fields(section: str) -> tuple[DeclaredField, ...]:
    """The fields of the ``section`` dataclass (`RUN_CLASSES`), read from its module's source;
    from the imported class where the source cannot be read."""
    try:
        return fields_in_source(*RUN_CLASSES[section])
    except (_Unreadable, OSError, SyntaxError):
        return imported_fields(*RUN_CLASSES[section])


def imported_fields(module: str, name: str) -> tuple[DeclaredField, ...]:
    """The fields of the dataclass ``module.name``, imported."""
    from clusterable.train.config_typing import field_types

    cls = getattr(importlib.import_module(module), name)
    types, comments = field_types(cls), field_comments(cls)
    found = []
    for f in fields(cls):
        named = getattr(sys.modules[cls.__module__], f"{f.name.upper()}S", None)
        default = f.default
        if default is MISSING and f.default_factory is not MISSING:
            default = f.default_factory()
        found.append(
            DeclaredField(
                f.name,
                types[f.name],
                default,
                comments.get(f.name),
                tuple(named) if _names_values(named) else None,
            )
        )
    return tuple(found)


def fields_in_source(module: str, name: str) -> tuple[DeclaredField, ...]:
    """The fields of the dataclass ``module.name``, read from the module's source without
    importing it: annotations evaluated among the module's ``typing`` / ``collections.abc`` /
    ``pathlib`` imports, defaults as literals (``field(default_factory=dict)`` too).

    Raises
    ------
    _Unreadable
        For a field whose annotation or default needs the module itself.
    """
    source, tree = _module_source(module)
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if node is None:
        raise _Unreadable(f"no class {name} at the top of {module}")
    namespace = _annotation_namespace(tree)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    lines = source.splitlines(keepends=True)[first - 1 : node.end_lineno]
    comments = _comments_in(textwrap.dedent("".join(lines)))
    found = []
    for item in node.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        field_name, text = item.target.id, ast.unparse(item.annotation)
        if text.split("[")[0].split(".")[-1] in ("ClassVar", "InitVar"):
            continue
        try:
            annotation = eval(text, dict(namespace))  # the package's own source
        except Exception as error:
            raise _Unreadable(f"{name}.{field_name}: {text}") from error
        named = _constant(module, f"{field_name.upper()}S")
        found.append(
            DeclaredField(
                field_name,
                annotation,
                _literal_default(item.value, f"{name}.{field_name}"),
                comments.get(field_name),
                tuple(named) if _names_values(named) else None,
            )
        )
    return tuple(found)


#: The package's folder: modules are read from here (`fields_in_source`).
_PACKAGE = Path(__file__).resolve().parents[1]

#: Modules whose names a field's annotation may use (imported to evaluate it: all light).
_ANNOTATION_MODULES = frozenset({"typing", "collections.abc", "pathlib", "types"})


@cache
def _module_source(module: str) -> tuple[str, ast.Module]:
    """The source text and tree of ``clusterable.X.Y``, found in the package without importing."""
    path = _PACKAGE.joinpath(*module.split(".")[1:])
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    source = path.read_text()
    return source, ast.parse(source)


def _annotation_namespace(tree: ast.Module) -> dict[str, Any]:
    """The names a module's top-level ``typing`` / ``collections.abc`` / ``pathlib`` imports
    bind."""
    namespace: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            if node.module in _ANNOTATION_MODULES:
                imported = importlib.import_module(node.module)
                for alias in node.names:
                    namespace[alias.asname or alias.name] = getattr(imported, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in _ANNOTATION_MODULES:
                    bound = alias.name if alias.asname else alias.name.split(".")[0]
                    importlib.import_module(alias.name)
                    namespace[alias.asname or bound] = importlib.import_module(bound)
    return namespace


def _literal_default(node: ast.expr | None, where: str) -> Any:
    """The default a field's source gives: a literal, or ``field(default=...)`` /
    ``field(default_factory=dict)`` (or list, set, tuple)."""
    if node is None:
        raise _Unreadable(f"{where} has no default")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "field":
        keywords = {k.arg: k.value for k in node.keywords}
        factory = keywords.get("default_factory")
        if "default" in keywords:
            node = keywords["default"]
        elif isinstance(factory, ast.Name) and factory.id in ("dict", "list", "set", "tuple"):
            return getattr(builtins, factory.id)()
        else:
            raise _Unreadable(f"{where}: {ast.unparse(node)}")
    try:
        return ast.literal_eval(node)
    except ValueError as error:
        raise _Unreadable(f"{where}: {ast.unparse(node)}") from error


def _constant(module: str, name: str) -> Any:
    """The literal value of ``name`` at the top of ``module``, following ``from clusterable.X
    import name``; None where it is absent or no literal."""
    _, tree = _module_source(module)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("clusterable."):
            for alias in node.names:
                if (alias.asname or alias.name) == name and node.level == 0:
                    return _constant(node.module, alias.name)  # type: ignore[arg-type]
            continue
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            try:
                return ast.literal_eval(node.value)  # type: ignore[arg-type]
            except ValueError:
                return None
    return None


def _names_values(named: object) -> TypeGuard[tuple[str, ...] | list[str] | dict[str, Any]]:
    """Whether a constant beside a field names its values (``OPTIMIZERS``: a tuple of text)."""
    return isinstance(named, (tuple, list, dict)) and all(isinstance(v, str) for v in named)


@cache
def field_comments(cls: type) -> dict[str, str]:
    """Field name -> its source comment: the ``# ...`` on its line(s), continued by comment lines
    right beneath it (a blank line or code ends it)."""
    return _comments_in(textwrap.dedent(inspect.getsource(cls)))


def _comments_in(source: str) -> dict[str, str]:
    """:func:`field_comments` of the source text of one class."""
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


def _choices(flag: RunFlag) -> tuple[list[Any] | None, str]:
    """Enforced choices, and names the help lists (an open registry's)."""
    if flag.name in FIXED_CHOICES:
        return list(FIXED_CHOICES[flag.name]), ""
    if flag.name in REGISTRIES:
        registry, closed = REGISTRIES[flag.name]
        listed = registry_names(registry)
        return (listed, "") if closed else (None, ", ".join(listed))
    options = [a for a in typing.get_args(flag.annotation) if a is not type(None)]
    if typing.get_origin(flag.annotation) is typing.Literal:
        return list(typing.get_args(flag.annotation)), ""
    if len(options) == 1 and typing.get_origin(options[0]) is typing.Literal:
        return list(typing.get_args(options[0])), ""
    if flag.field.named_values is not None:
        return list(flag.field.named_values), ""  # OPTIMIZERS beside the field optimizer
    return None, ""


def _help(flag: RunFlag, comment: str | None, known: str) -> str:
    default = flag.field.default
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
        from clusterable.train.config_typing import typed_settings

        try:
            return typed_settings({name: text}, {name: annotation}, "setting")[name]
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return convert


def assignment(flag: str, example: str = "margin=0.5") -> Callable[[str], tuple[str, Any]]:
    """An argparse ``type``: ``"margin=0.5"`` -> ``("margin", 0.5)`` (values read as YAML);
    ``example`` is the pair a refusal shows."""

    def convert(text: str) -> tuple[str, Any]:
        try:
            return parse_assignments([text], flag, example).popitem()
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return convert


def parse_assignments(pairs: list[str], flag: str, example: str = "margin=0.5") -> dict[str, Any]:
    """``["margin=0.5", "mining=all"]`` -> ``{"margin": 0.5, "mining": "all"}`` (YAML values).

    Raises
    ------
    ValueError
        One line naming ``flag``: a pair that is no ``name=value``, or a value that is not YAML.
    """
    import yaml

    from clusterable._yaml import DuplicateKeyError, load_yaml

    values = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"{flag} takes name=value, got {pair!r}; e.g. {flag} {example}")
        try:
            values[name.replace("-", "_")] = load_yaml(text)
        except DuplicateKeyError as error:
            raise ValueError(f"{flag} {pair!r}: {error.problem}") from None
        except yaml.YAMLError as error:
            problem = " ".join(str(getattr(error, "problem", None) or "not YAML").split())
            raise ValueError(
                f"{flag} {pair!r}: the value is not YAML ({problem}); quote a text value, or "
                f"write it as YAML, e.g. {flag} {example}"
            ) from None
    return values


def add_run_flags(
    parser: argparse.ArgumentParser, skip: frozenset[str] = frozenset()
) -> argparse.ArgumentParser:
    """``--config``, a flag for each RunSpec and TrainConfig field but ``skip``, and ``--set``:
    the settings of ``train`` and ``tune``, read back by :func:`given_settings`."""
    parser.add_argument("--config", help="YAML run file: RunSpec keys and a `train:` mapping")
    groups = {
        "spec": parser.add_argument_group(
            "run settings", "what to train (RunSpec; the keys of a --config file)"
        ),
        "train": parser.add_argument_group(
            "training settings", "how to train (TrainConfig; the `train:` mapping of --config)"
        ),
    }
    for flag in run_flags(skip):
        choices, known = _choices(flag)
        text = _help(flag, flag.field.comment, known)
        group = groups[flag.section]
        if flag.is_keywords:
            group.add_argument(
                flag.flag,
                dest=flag.name,
                action="append",
                type=assignment(flag.flag),
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


def config_file(args: argparse.Namespace) -> dict[str, Any]:
    """The mapping of the ``--config`` YAML file (empty without one)."""
    if not args.config:
        return {}
    from clusterable.train.config_typing import read_settings_file

    return read_settings_file(args.config)  # one line naming the file and line where it fails


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
    settings["train"].update(parse_assignments(args.set, "--set", "lr=0.001"))
    return settings["spec"], settings["train"]


def resumed_settings(
    out: Path, spec_given: dict[str, Any], train_given: dict[str, Any]
) -> tuple[Any, Any]:
    """The run's own stored settings; the ones named again must agree (epochs may grow, but not
    below those the run's latest checkpoint has trained)."""
    from clusterable.recipe import RunSpec
    from clusterable.train import TrainConfig
    from clusterable.train.run_folder import (
        CHANGEABLE_ON_RESUME,
        check_resume_epochs,
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
    check_resume_epochs(out, wanted_config["epochs"], given="epochs" in train_given)
    config = TrainConfig.from_dict(
        {**stored_train, **{k: wanted_config[k] for k in train_given}, "verbose": True}
    )
    return RunSpec.from_dict(record["spec"]), config
