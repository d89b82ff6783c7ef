"""The command line starts at once: building the parser and every ``--help`` import no torch,
scikit-learn, SciPy, faiss or matplotlib (issue 36). The parser is built from declarations: the
names `clusterable.cli._names` lists and the run settings read from the dataclasses' source, each
checked here against what the imported registries and dataclasses say."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from clusterable.cli import VERBS, build_parser
from clusterable.cli._names import LISTINGS
from clusterable.cli._parser import DEVICE_WORK, Verbs
from clusterable.cli._settings import RUN_CLASSES, fields_in_source, imported_fields

HEAVY = ("torch", "sklearn", "scipy", "faiss", "matplotlib")

#: Builds the parser, runs ``--help`` and each ``VERB --help``, and prints what was imported and
#: every verb's flags; run in a fresh interpreter, and its description part in this one.
DESCRIBE = """
import argparse, contextlib, io, json, sys

from clusterable.cli import build_parser, main


def describe(parser):
    verbs = parser._subparsers._group_actions[0].choices
    return {
        name: [
            [a.option_strings, a.dest, a.nargs, repr(a.default), a.help, a.metavar,
             None if a.choices is None else [str(c) for c in a.choices]]
            for a in sub._actions
        ]
        for name, sub in verbs.items()
    }


def helped(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main(argv)
        except SystemExit:
            pass
    return out.getvalue()


parser = build_parser()
helps = {verb: helped([verb, "--help"]) for verb in describe(parser)}
helps[""] = helped(["--help"])
"""

FRESH = (
    DESCRIBE
    + """
print(json.dumps({
    "modules": sorted({name.split(".")[0] for name in sys.modules}),
    "verbs": describe(parser),
    "helps": helps,
}))
"""
)


@pytest.fixture(scope="module")
def fresh() -> dict:
    """What a fresh ``clusterable --help`` and every ``clusterable VERB --help`` imported, with
    the parser they built."""
    run = subprocess.run(
        [sys.executable, "-c", FRESH], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(run.stdout)


def test_help_imports_no_heavy_library(fresh):
    assert len(fresh["helps"]) == len(VERBS) + 1
    assert all("usage: clusterable" in text for text in fresh["helps"].values())
    imported = set(HEAVY) & set(fresh["modules"])
    assert not imported, f"clusterable --help imported {sorted(imported)}"


def test_the_declared_parser_is_the_registries_parser(fresh):
    """The parser a fresh process builds from declarations equals the one built where every
    registry and dataclass is imported (and so answers for itself)."""
    import clusterable.cluster
    import clusterable.data
    import clusterable.evaluate.registry
    import clusterable.losses
    import clusterable.mining
    import clusterable.models
    import clusterable.recipe
    import clusterable.train.config  # noqa: F401

    pytest.importorskip("clusterable.reproduce")  # its extras installed: it answers for itself

    namespace: dict = {}
    exec(DESCRIBE, namespace)
    imported = json.loads(json.dumps(namespace["describe"](build_parser())))
    assert imported == fresh["verbs"]


@pytest.mark.parametrize("kind", sorted(LISTINGS))
def test_each_declared_listing_is_its_registry(kind):
    listing = LISTINGS[kind]
    pytest.importorskip(listing.module)
    registered = listing.registered()
    assert list(listing.names) == registered, (
        f"clusterable/cli/_names.py lists {kind} {list(listing.names)}, the registry "
        f"{registered}: list the registry's names there, in its order"
    )


@pytest.mark.parametrize("section", sorted(RUN_CLASSES))
def test_run_settings_read_from_source_are_the_dataclass_fields(section):
    module, name = RUN_CLASSES[section]
    assert fields_in_source(module, name) == imported_fields(module, name)


def test_a_name_registered_in_this_process_reaches_the_parser(monkeypatch):
    import clusterable.losses

    names = [*clusterable.losses.available_losses(), "my-loss"]
    monkeypatch.setattr(clusterable.losses, "available_losses", lambda: names)
    args = build_parser().parse_args(["train", "--loss", "my-loss"])
    assert args.loss == "my-loss"


def declared_runs() -> tuple[dict[str, frozenset[str]], dict[str, argparse.ArgumentParser]]:
    """What each verb declares it runs, and its parser."""
    verbs = Verbs(argparse.ArgumentParser().add_subparsers())
    parsers = {}
    for add_verb in VERBS:
        parser = add_verb(verbs)
        parsers[parser.prog.split()[-1]] = parser
    return verbs.runs, parsers


def test_device_is_on_every_verb_that_runs_a_model_a_search_or_a_clustering():
    runs, parsers = declared_runs()
    with_device = {
        verb
        for verb, parser in parsers.items()
        if any("--device" in action.option_strings for action in parser._actions)
    }
    assert with_device == {verb for verb, work in runs.items() if work}
    assert with_device == {
        "demo",
        "train",
        "tune",
        "evaluate",
        "embed",
        "cluster",
        "plot",
        "index",
        "search",
        "assign",
        "classify",
        "report",
        "reproduce",
    }
    # export traces and checks on the CPU whatever the run's device (clusterable.export)
    assert runs["cluster"] == {"model", "clustering"} and runs["export"] == set()
    assert all(work <= DEVICE_WORK for work in runs.values())


def test_the_factory_gives_device_from_the_declaration_alone():
    verbs = Verbs(argparse.ArgumentParser().add_subparsers())
    quiet = verbs("quiet", "reads a file", "clusterable quiet", lambda args: 0)
    loud = verbs("loud", "embeds", "clusterable loud", lambda args: 0, runs=("model",))
    assert not any("--device" in a.option_strings for a in quiet._actions)
    assert loud.parse_args(["--device", "cpu"]).device == "cpu"
    with pytest.raises(ValueError, match="declare it among"):
        verbs("odd", "x", "y", lambda args: 0, runs=("printing",))
