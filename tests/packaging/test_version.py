"""The version is single-sourced (issue 39): ``clusterable.__version__`` is the one literal,
pyproject.toml declares it dynamic and reads that attribute, and the installed metadata,
``clusterable --version`` and the versions recorded beside results all say the same."""

from __future__ import annotations

import ast
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import clusterable
from clusterable.versions import library_versions

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_reads_the_version_from_the_package():
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11's TOML reader")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"], "a second version literal in pyproject.toml"
    assert project["project"]["dynamic"] == ["version"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "clusterable.__version__"}


def test_the_package_holds_one_version_literal():
    tree = ast.parse((ROOT / "src/clusterable/__init__.py").read_text())
    literals = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
        and isinstance(node.value, ast.Constant)
    ]
    assert literals == [clusterable.__version__]


def test_metadata_command_line_and_recorded_versions_agree():
    # The installed (editable) metadata: stale when the literal changed after `make setup`.
    assert version("clusterable") == clusterable.__version__, "run `make setup` again"
    shown = subprocess.run(
        [sys.executable, "-m", "clusterable", "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == f"clusterable {clusterable.__version__}\n"
    assert library_versions()["clusterable"] == clusterable.__version__
