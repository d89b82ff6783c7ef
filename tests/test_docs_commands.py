"""Every command line and every Python import the documentation shows names what exists, without
running anything (seconds; tests/test_docs_examples.py runs the examples that can run here, and
`make docs` the gallery's scripts).

- A ``clusterable ...`` command (also ``torchrun ... -m clusterable ...``) in a fenced block of
  README.md, benchmarks/README.md (which the site includes) or a page of docs/, or in an inline
  code span of their prose: its verb is a verb of `clusterable.cli.build_parser`, and each flag it
  uses is an option of that verb, spelled out in full (argparse would take an abbreviation, which
  the doc would then teach). A command of a fenced block is a whole command line: the parser takes
  it as written (its positional arguments and each flag's values and choices). An inline span may
  be a part of one (``clusterable embed``), and placeholders (``VERB``, ``RUN``) stand for names.
- A ``python`` block there, and each script of the examples gallery (``examples/*.py``),
  compiles, and each name it imports from ``clusterable`` exists.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterable.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
#: Folders of docs/ that hold generated pages (Sphinx's output and API stubs, the gallery's,
#: `clusterable reproduce`'s reports), not documentation written by hand.
GENERATED = ("_build", "api", "auto_examples", "results")
FENCED = re.compile(r"^```([^\n]*)\n(.*?)^```", re.M | re.S)
#: The fenced blocks whose lines are command lines: a shell's, or text (shown, not run).
SHELL_BLOCKS = ("", "bash", "sh", "shell", "console", "text")
INLINE = re.compile(r"`([^`\n]+(?:\n[^`\n]+)*)`")
#: A verb that stands for every verb (``clusterable VERB --help``): its flags must be every verb's.
ANY_VERB = "VERB"


def documents() -> list[Path]:
    """README.md, benchmarks/README.md and every page of docs/, but the generated ones."""
    pages = [
        page
        for page in sorted((ROOT / "docs").rglob("*.md"))
        if page.relative_to(ROOT / "docs").parts[0] not in GENERATED
    ]
    return [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *pages]


@dataclass(frozen=True)
class Command:
    """The arguments after ``clusterable`` of a command line that ``where`` shows."""

    where: str
    text: str
    argv: list[str]
    whole: bool  # a fenced block's line, which the parser must take as written


def clusterable_arguments(text: str) -> list[str] | None:
    """The arguments after ``clusterable`` (the command, or ``-m clusterable``) of a command
    line; None when ``text`` runs something else."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError:  # an unbalanced quote: prose, not a command line
        return None
    if words[:1] == ["clusterable"]:
        return words[1:]
    for at in range(len(words) - 1):
        if words[at : at + 2] == ["-m", "clusterable"]:
            return words[at + 2 :]
    return None


def shown_as(path: Path) -> str:
    """``path`` as a problem names it: from the checkout's root, or its file name elsewhere."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


def line_number(text: str, position: int) -> int:
    """The line of ``text`` (from 1) that character ``position`` is on."""
    return text.count("\n", 0, position) + 1


def commands(document: Path) -> list[Command]:
    """The ``clusterable`` command lines of ``document``: each line of a fenced block (with its
    backslash continuations, a console's ``$`` prompt dropped) and each inline code span of its
    prose."""
    text = document.read_text()
    name = shown_as(document)
    found = []
    for block in FENCED.finditer(text):
        if block.group(1).strip() not in SHELL_BLOCKS:
            continue
        line, start = "", 0
        first = line_number(text, block.start()) + 1
        for number, part in enumerate(block.group(2).splitlines(), first):
            if not line:
                start = number
            line = f"{line} {part.strip()}".strip()
            if line.endswith("\\"):  # continued on the next line
                line = line[:-1]
                continue
            shown = line.removeprefix("$ ")
            argv = clusterable_arguments(shown)
            if argv is not None:
                found.append(Command(f"{name}:{start}", shown, argv, whole=True))
            line = ""
    prose = FENCED.sub(lambda block: "\n" * block.group(0).count("\n"), text)
    for span in INLINE.finditer(prose):
        line = " ".join(span.group(1).split())
        argv = clusterable_arguments(line)
        if argv is not None:
            where = f"{name}:{line_number(prose, span.start())}"
            found.append(Command(where, line, argv, whole=False))
    return found


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parsers of ``parser``'s sub-commands by name; empty where it has none."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` (``-k``, ``--k``, ``--no-progress``, ...)."""
    return {option for action in parser._actions for option in action.option_strings}


def flags_of(argv: list[str]) -> list[str]:
    """The flags ``argv`` uses, without their ``=VALUE``; an alternative such as ``KEY|--all``
    counts its flag, and a negative number is a value."""
    words = [part for word in argv for part in word.split("|")]
    return [
        word.split("=", 1)[0]
        for word in words
        if word.startswith("-") and not re.fullmatch(r"-[\d.]+(e-?\d+)?", word)
    ]


def parse_error(argv: list[str]) -> str | None:
    """What the real parser says of ``argv`` when it refuses it; None when it takes it."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as stop:
        if stop.code:
            return said.getvalue().strip() or f"exit status {stop.code}"
    return None


def command_problems(command: Command) -> list[str]:
    """What ``command`` names that the command line does not have, each as one line."""
    parser = build_parser()
    verbs = subparsers(parser)
    argv = command.argv
    at = f"{command.where}: `{command.text}`"
    if not argv or argv[0].startswith("-"):  # `clusterable --version`, `--help`
        unknown = [flag for flag in flags_of(argv) if flag not in options(parser)]
        return [f"{at}: clusterable has no {flag}" for flag in unknown]
    verb, rest = argv[0], argv[1:]
    if verb == ANY_VERB:
        shared = set.intersection(*(options(each) for each in verbs.values()))
        return [f"{at}: not every verb has {flag}" for flag in flags_of(rest) if flag not in shared]
    if verb not in verbs:
        return [f"{at}: no verb {verb!r}; the verbs: {', '.join(verbs)}"]
    known = options(verbs[verb])
    nested = subparsers(verbs[verb])
    if rest and rest[0] in nested:  # `cache list`, `cache clear`
        known |= options(nested[rest[0]])
    problems = [
        f"{at}: `clusterable {verb}` has no {flag}" for flag in flags_of(rest) if flag not in known
    ]
    if command.whole and not problems:
        refused = parse_error(argv)
        if refused:
            problems.append(f"{at}: the parser refuses it: {refused}")
    return problems


def python_sources(document: Path) -> list[tuple[str, str]]:
    """``(where, source)`` of each ``python`` block of a Markdown document, or of a script."""
    name = shown_as(document)
    if document.suffix == ".py":
        return [(name, document.read_text())]
    text = document.read_text()
    return [
        (f"{name}:{line_number(text, block.start())}", block.group(2))
        for block in FENCED.finditer(text)
        if block.group(1).strip() == "python"
    ]


def import_problems(where: str, source: str) -> list[str]:
    """Whether ``source`` compiles, and what it imports from ``clusterable`` that is not there."""
    try:
        tree = ast.parse(source, filename=where)
        compile(tree, where, "exec")
    except SyntaxError as error:
        return [f"{where}: does not compile: {error}"]
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
            names: list[tuple[str, str]] = []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
            names = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module in modules:
            if module.split(".")[0] != "clusterable":
                continue
            try:
                importlib.import_module(module)
            except ImportError as error:
                problems.append(f"{where}: import {module}: {error}")
        for module, name in names:
            if module.split(".")[0] == "clusterable" and not has_name(module, name):
                problems.append(f"{where}: {module} has no {name}")
    return problems


def has_name(module: str, name: str) -> bool:
    """Whether ``from module import name`` finds ``name``: an attribute or a submodule."""
    try:
        if hasattr(importlib.import_module(module), name):
            return True
        importlib.import_module(f"{module}.{name}")
    except ImportError:
        return False
    return True


DOCUMENTS = documents()
SCRIPTS = sorted((ROOT / "examples").glob("*.py"))


@pytest.mark.parametrize("document", DOCUMENTS, ids=shown_as)
def test_every_command_line_names_a_verb_and_flags_the_parser_has(document):
    problems = [problem for command in commands(document) for problem in command_problems(command)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("document", DOCUMENTS + SCRIPTS, ids=shown_as)
def test_every_python_example_compiles_and_its_clusterable_imports_exist(document):
    problems = [
        problem
        for where, source in python_sources(document)
        for problem in import_problems(where, source)
    ]
    assert not problems, "\n".join(problems)


def test_the_readme_commands_are_found_in_blocks_and_prose():
    found = {
        (command.text.split("  #")[0].strip(), command.whole)
        for command in commands(ROOT / "README.md")
    }
    assert ("clusterable demo --quick", True) in found
    assert ("clusterable train --loss lifted --memory-size 8192", False) in found
    assert any("-m clusterable train" in text for text, _ in found)


def test_a_wrong_verb_flag_value_or_import_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Train with `clusterable train --epoch 3` (an abbreviation argparse would take) or\n"
        "`clusterable trian`, then `clusterable VERB --json x.json`:\n\n"
        "```bash\n"
        "clusterable evaluate runs/x --clustering kmeans \\\n"
        "    --jsn table.json   # a misspelt flag\n"
        "clusterable cluster emb.npy --clustering nonesuch\n"
        "clusterable cache clear KEY|--every\n"
        "```\n\n"
        "```python\n"
        "from clusterable.losses import build_loss, build_los\n"
        "from clusterable import cluster, nowhere\n"
        "```\n"
    )
    problems = [problem for command in commands(page) for problem in command_problems(command)]
    assert len(problems) == 6, problems
    for wrong in ("--epoch", "'trian'", "not every verb has --json", "--jsn", "'nonesuch'"):
        assert any(wrong in problem for problem in problems), (wrong, problems)
    assert any("`clusterable cache` has no --every" in problem for problem in problems)
    assert [
        problem
        for where, source in python_sources(page)
        for problem in import_problems(where, source)
    ] == [
        "page.md:11: clusterable.losses has no build_los",
        "page.md:11: clusterable has no nowhere",
    ]
