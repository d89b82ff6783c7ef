"""Runs and reports shared by the report tests: a digits run trained for two epochs."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterable.cli import main


@pytest.fixture(scope="session")
def digits_run(tmp_path_factory) -> Path:
    """A digits run (two epochs, 8-d embedding) and the report `train` wrote in its folder."""
    run = tmp_path_factory.mktemp("reports") / "digits-run"
    argv = ["train", "--data", "digits", "--loss", "contrastive", "--embedding-dim", "8"]
    assert main([*argv, "--epochs", "2", "--no-progress", "--out", str(run)]) == 0
    assert (run / "report.html").is_file()
    return run
