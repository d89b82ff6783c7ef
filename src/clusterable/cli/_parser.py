"""The verb factory: every verb's description, example, ``--seed`` and, where it runs a model, a
search or a clustering, ``--device``.

A verb declares what it runs (``runs=("model", "search")``) and the factory gives it ``--device``
from that: no list of device verbs is kept here. This module and the verbs' declarations import
no torch, scikit-learn or faiss (the handlers do), so ``clusterable VERB --help`` starts at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from typing import Any

from clusterable.cli._flag_types import seed

#: What a verb may run that takes a device: ``model`` (it loads a trained model, or trains one),
#: ``search`` (a nearest-neighbour search), ``clustering`` (k-means and the other clusterers).
DEVICE_WORK = frozenset({"model", "search", "clustering"})

DEVICE_HELP = (
    "where models, searches and k-means run: auto (CUDA, then MPS, then CPU), cpu, cuda, "
    "cuda:N or mps"
)

#: ``handler(args) -> exit status``.
Handler = Callable[[argparse.Namespace], int]


class Verbs:
    """Adds a verb to the command line: ``verbs(name, help, example, handler, runs=...)`` returns
    its parser.

    ``help`` is the line of the verb list and the verb's description (argparse %-formats the
    former, so a literal % is written %%); ``example`` ends the verb's ``--help``. ``runs``: what
    the verb runs among `DEVICE_WORK`; a verb that runs any of it takes ``--device``.
    ``run_settings``: the verb's ``--seed`` and ``--device`` are generated run settings, the
    TrainConfig fields of those names (`clusterable.cli._settings.add_run_flags`), not the
    factory's. ``seed_of_run``: the verb takes a run or saved arrays, and ``--seed`` defaults to
    the run's own seed (so that ``evaluate RUN`` clusters as the run's test table did).
    ``seeded``: False for a verb with no random step (``cache``), which then takes no ``--seed``.
    """

    def __init__(self, subparsers: Any) -> None:
        self._subparsers = subparsers
        #: Verb name -> what it declared it runs.
        self.runs: dict[str, frozenset[str]] = {}

    def __call__(
        self,
        name: str,
        help: str,
        example: str,
        handler: Handler,
        *,
        runs: Iterable[str] = (),
        run_settings: bool = False,
        seed_of_run: bool = False,
        seeded: bool = True,
    ) -> argparse.ArgumentParser:
        work = frozenset(runs)
        if not work <= DEVICE_WORK:
            raise ValueError(
                f"verb {name} runs {', '.join(sorted(work - DEVICE_WORK))}: "
                f"declare it among {', '.join(sorted(DEVICE_WORK))}"
            )
        self.runs[name] = work
        sub = self._subparsers.add_parser(
            name, help=help, description=help.replace("%%", "%"), epilog=f"example: {example}"
        )
        sub.set_defaults(handler=handler)
        if run_settings:
            return sub
        if work:
            sub.add_argument("--device", default="auto", help=f"{DEVICE_HELP} (default: auto)")
        if not seeded:
            return sub
        if seed_of_run:  # None: the run's own seed (`clusterable.cli._files.seed_of`)
            help = "seed of random steps (default: a run's own seed; 0 for saved arrays)"
            sub.add_argument("--seed", type=seed, default=None, help=help)
        else:
            sub.add_argument(
                "--seed", type=seed, default=0, help="seed of random steps (default: %(default)s)"
            )
        return sub


#: ``add_VERB(verbs)``: what each verb module offers the command line.
AddVerb = Callable[[Verbs], argparse.ArgumentParser]
