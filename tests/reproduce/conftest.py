"""Shared set-up of the reproduction tests: one quick run of an experiment per test module."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from clusterable.data import load_dataset
from clusterable.reproduce import Budget, run_experiment


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
