"""The registry of experiments and the budget each runs with."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch

from clusterable._register import Registry
from clusterable.reports import ExperimentReport, write_report
from clusterable.versions import library_versions

T = TypeVar("T")


@dataclass(frozen=True)
class Budget:
    """How much an experiment may spend: ``quick`` (about a minute, for tests), the default (the
    paper's protocol scaled to two CPU cores; each experiment says what it scaled), or ``full``
    (the paper's own budget)."""

    mode: str = "default"  # "quick" | "default" | "full"
    seeds: int | None = None  # None: the experiment's own default for the mode
    folder: Path = Path("reports/reproduce")  # where this experiment writes its files
    first_seed: int = 0  # seeds are first_seed, first_seed + 1, ...
    #: Where the experiment's models train, searches search and k-means assigns (``--device``):
    #: handed to every `TrainConfig`, evaluation and clustering it runs; ``"auto"``: the
    #: detection (`clusterable.device.detect_device`).
    device: str = "auto"

    @property
    def quick(self) -> bool:
        """Whether this is the ``--quick`` budget."""
        return self.mode == "quick"

    @property
    def full(self) -> bool:
        """Whether this is the ``--full`` budget."""
        return self.mode == "full"

    def pick(self, quick: T, default: T, full: T | None = None) -> T:
        """The value for this mode (``full`` falls back to ``default``)."""
        if self.quick:
            return quick
        if self.full and full is not None:
            return full
        return default

    def seed_list(self, quick: int, default: int, full: int | None = None) -> list[int]:
        """The seeds to run: ``--seeds`` of them, else the count for this budget (`pick`)."""
        count = self.seeds if self.seeds else self.pick(quick, default, full)
        return list(range(self.first_seed, self.first_seed + count))


Experiment = Callable[[Budget], ExperimentReport]

#: Every reproduction by name, in registration order (the order of ``reproduce all`` and of the
#: summary page).
EXPERIMENTS: Registry[Experiment] = Registry("experiment", sort=False)


def experiment(name: str, **metadata: Any) -> Callable[[Experiment], Experiment]:
    """Decorator: register a reproduction under ``name`` (with ``metadata``, e.g. ``label``)."""
    return EXPERIMENTS.register(name, **metadata)


def available_experiments() -> list[str]:
    """The registered experiments, in registration order."""
    return EXPERIMENTS.names()


def command_line() -> str:
    """The command that is running, as the report records it."""
    return "clusterable " + " ".join(sys.argv[1:]) if sys.argv[1:] else "clusterable reproduce"


def run_experiment(name: str, budget: Budget) -> ExperimentReport:
    """Run one experiment, record how, and write its report into ``budget.folder``."""
    run = EXPERIMENTS[name]  # an unknown name: a ValueError listing the experiments
    budget.folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    torch.manual_seed(0)
    report = run(budget)
    report.record = {
        "command": command_line(),
        "mode": budget.mode,
        "seeds": report.record.get("seeds", budget.seeds),  # the experiment says which it used
        "wall_time_s": round(time.perf_counter() - start, 1),
        "versions": library_versions(),
    }
    write_report(report, budget.folder)
    return report
