"""Every verb's ``--help`` ends with an example: it must be a command line the parser takes."""

from __future__ import annotations

import argparse
import shlex

import pytest

from clusterable.cli import build_parser


def verb_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (verbs,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(verbs.choices)


@pytest.mark.parametrize("verb", sorted(verb_parsers()))
def test_the_help_example_parses(verb):
    epilog = verb_parsers()[verb].epilog
    assert epilog is not None and epilog.startswith("example: "), epilog
    for example in epilog.removeprefix("example: ").split("; "):  # one or more command lines
        argv = shlex.split(example)
        assert argv[:2] == ["clusterable", verb], example
        args = build_parser().parse_args(argv[1:])  # an unknown flag or missing argument: exit 2
        assert args.command == verb
