"""The README's lists that a registry holds, checked against the registry (its examples run in
tests/test_docs_examples.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from clusterable.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_list(marker: str) -> list[str]:
    """The names of the bullet list (``- `name` ...``) that follows ``<!-- marker ... -->``."""
    found = re.search(rf"<!-- {marker}[^>]*-->\n(.*?)\n\n", README.read_text(), re.S)
    assert found, f"README.md has no list after <!-- {marker} -->"
    return re.findall(r"^- `([^`]+)`", found.group(1), re.M)


def test_the_readme_lists_every_registered_clusterer():
    from clusterable.cluster import available_clusterings

    assert readme_list("readme-clusterers") == available_clusterings()


def test_the_readme_lists_every_experiment():
    from clusterable.reproduce import available_experiments

    assert readme_list("readme-experiments") == available_experiments()


def test_the_cluster_help_lists_every_registered_clusterer_a_new_one_too(capsys):
    from clusterable.cluster import (
        Clusterer,
        available_clusterings,
        clusterer_info,
        register_clusterer,
    )
    from clusterable.cluster.registry import CLUSTERERS

    def help_text() -> str:
        with pytest.raises(SystemExit):
            main(["cluster", "--help"])
        return " ".join(capsys.readouterr().out.split())

    with CLUSTERERS.scratch():

        @register_clusterer("halves", label="split in halves")
        class Halves(Clusterer):
            def cluster(self, points):
                return (np.arange(len(points)) >= len(points) // 2).astype(np.int64)

        shown = help_text()
        for name in available_clusterings():
            assert clusterer_info(name).label in shown, name
        assert "HDBSCAN" in shown and "split in halves" in shown
    assert "split in halves" not in help_text()
