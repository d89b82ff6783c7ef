"""The README's path from a trained model to use, run as written on the real Fashion-MNIST files
(slow), and its lists that a registry holds, checked against the registry."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clusterable.archive import load_archive
from clusterable.cli import main
from clusterable.data import load_dataset

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_block(marker: str, language: str) -> str:
    """The fenced ``language`` block that follows the comment ``<!-- marker ... -->``."""
    found = re.search(rf"<!-- {marker}[^>]*-->\s*```{language}\n(.*?)```", README.read_text(), re.S)
    assert found, f"README.md has no {language} block after <!-- {marker} -->"
    return found.group(1)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, fashion_mnist):
    """A working folder with ``queries/``: six Fashion-MNIST test images as PNG files."""
    folder = tmp_path_factory.mktemp("readme")
    test = load_dataset("fashion-mnist", split="test")
    (folder / "queries").mkdir()
    for row in range(6):
        image, _ = test[row]
        pixels = (np.asarray(image).reshape(28, 28) * 255).round().astype(np.uint8)
        Image.fromarray(pixels).save(folder / "queries" / f"item{row}.png")
    return folder


@pytest.mark.slow
def test_the_command_line_path_runs_as_written(workdir, monkeypatch, capsys):
    monkeypatch.chdir(workdir)
    commands = [
        shlex.split(line) for line in readme_block("readme-use-commands", "bash").splitlines()
    ]
    assert [c[:2] for c in commands] == [
        ["clusterable", verb] for verb in ("train", "index", "search", "embed", "cluster", "assign")
    ]
    for command in commands:
        assert main(command[1:]) == 0, " ".join(command)
    out = capsys.readouterr().out

    _, manifest = load_archive("fm-index.npz", "clusterable search index", 1, "")
    assert manifest["count"] == 10_000 and manifest["model"]
    hits = json.loads(Path("hits.json").read_text())
    assert len(hits["queries"]) == 6 and all(len(q["neighbours"]) == 5 for q in hits["queries"])
    # A query image is a test item of the gallery: its nearest neighbour is itself, at distance ~0.
    assert all(q["neighbours"][0]["distance"] < 1e-3 for q in hits["queries"])
    # The query images are the first six test items, so they fall in the clusters fitted on them.
    assigned = json.loads(Path("assigned.json").read_text())
    assert [item["cluster"] for item in assigned["items"]] == np.load("clusters.npy")[:6].tolist()
    assert "assigned 6 items to the 10 kmeans clusters" in out


@pytest.mark.slow
def test_the_python_example_runs(workdir, monkeypatch, capsys):
    monkeypatch.chdir(workdir)
    if not (workdir / "runs" / "fm").is_dir():
        assert main(["train", "--data", "fashion-mnist", "--epochs", "1", "--out", "runs/fm"]) == 0
    exec(compile(readme_block("readme-use-python", "python"), "README.md", "exec"), {})
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"\[(\d ?)+\]", printed.replace("  ", " ")), printed


def readme_list(marker: str) -> list[str]:
    """The names of the bullet list (``- `name` ...``) that follows ``<!-- marker ... -->``."""
    found = re.search(rf"<!-- {marker}[^>]*-->\n(.*?)\n\n", README.read_text(), re.S)
    assert found, f"README.md has no list after <!-- {marker} -->"
    return re.findall(r"^- `([^`]+)`", found.group(1), re.M)


def test_the_readme_lists_every_registered_clusterer():
    from clusterable.cluster import available_clusterings

    assert readme_list("readme-clusterers") == available_clusterings()


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
