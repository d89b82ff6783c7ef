"""Shared set-up of the reproduction tests: one quick run of an experiment per test module, and
the check of each claim's verdict against the one the test works out from the report's numbers."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from clusterable.data import load_dataset
from clusterable.reproduce import Budget, run_experiment

#: How ``results.md`` writes a verdict in its claims table (``ExperimentReport.markdown``).
VERDICT_CELL = {True: "yes", False: "**no**", None: "not checked"}


@pytest.fixture(scope="module")
def run_quick(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, dict]]:
    """``run_quick(name)`` runs an experiment on Fashion-MNIST in ``--quick`` mode into a fresh
    folder and returns the folder and its ``results.json``; skips when the data is missing."""

    def run(name: str) -> tuple[Path, dict]:
        try:
            load_dataset("fashion-mnist", split="test")
        except FileNotFoundError as error:
            pytest.skip(f"Fashion-MNIST is not installed: {error}")
        folder = tmp_path_factory.mktemp(name)
        run_experiment(name, Budget(mode="quick", folder=folder))
        return folder, json.loads((folder / "results.json").read_text())

    return run


def _assert_verdicts(folder: Path, expected: Sequence[bool | set[bool] | None]) -> None:
    claims = json.loads((folder / "results.json").read_text())["claims"]
    assert len(claims) == len(expected)
    markdown = (folder / "results.md").read_text()
    for claim, verdict in zip(claims, expected, strict=True):
        if isinstance(verdict, set):  # the printed numbers cannot settle it
            assert claim["holds"] in verdict, claim
        else:
            assert claim["holds"] is verdict, claim
        cell = VERDICT_CELL[claim["holds"]]
        assert f"| {claim['text']} | {cell} | {claim['evidence']} |" in markdown, claim["text"]


@pytest.fixture
def assert_verdicts() -> Callable[[Path, Sequence[bool | set[bool] | None]], None]:
    """``assert_verdicts(folder, expected)``: every claim of the report written in ``folder`` has
    the verdict the test worked out from the report's numbers (in claim order; a set such as
    ``{True, False}`` where a value printed rounded sits within rounding of the claim's threshold),
    in ``results.json`` and, as the report writes it, in ``results.md``'s claims table."""
    return _assert_verdicts
