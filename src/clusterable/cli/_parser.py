"""The verb factory: every verb's description, example, ``--seed`` and, where it runs a model or a
search, ``--device``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

#: The verbs that run a model, a search or a clustering, and so take ``--device``; ``train`` and
#: ``tune`` take it (and ``--seed``) as the TrainConfig fields of the same names.
DEVICE_VERBS = frozenset(
    {"train", "evaluate", "embed", "index", "search", "cluster", "assign", "tune", "demo"}
    | {"reproduce"}
)

#: Verbs whose ``--seed`` and ``--device`` are generated run settings (`clusterable.cli._settings`).
RUN_VERBS = frozenset({"train", "tune"})

DEVICE_HELP = (
    "where models, searches and k-means run: auto (CUDA, then MPS, then CPU), cpu, cuda, "
    "cuda:N or mps"
)

#: ``handler(args) -> exit status``.
Handler = Callable[[argparse.Namespace], int]


class Verbs:
    """Adds a verb to the command line: ``verbs(name, help, example, handler)`` returns its parser.

    ``help`` is the line of the verb list and the verb's description (argparse %-formats the
    former, so a literal % is written %%); ``example`` ends the verb's ``--help``.
    """

    def __init__(self, subparsers: Any) -> None:
        self._subparsers = subparsers

    def __call__(
        self, name: str, help: str, example: str, handler: Handler
    ) -> argparse.ArgumentParser:
        sub = self._subparsers.add_parser(
            name, help=help, description=help.replace("%%", "%"), epilog=f"example: {example}"
        )
        sub.set_defaults(handler=handler)
        if name in RUN_VERBS:
            return sub
        if name in DEVICE_VERBS:
            sub.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default: auto)")
        sub.add_argument(
            "--seed", type=int, default=0, help="seed of random steps (default: %(default)s)"
        )
        return sub


#: ``add_VERB(verbs)``: what each verb module offers the command line.
AddVerb = Callable[[Verbs], argparse.ArgumentParser]
