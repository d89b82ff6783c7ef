"""A metric registered by a user reaches every place a table is shown, with no other edit:
``evaluate --metrics``, its printed table and JSON, ``cluster --labels``, ``tune --metric``, the
run's test table and both HTML reports (a run's and a clustering's)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from clusterable.cli import main
from clusterable.evaluate import register_metric
from clusterable.evaluate.registry import METRICS, available_metrics

NAME, LABEL = "largest_share", "largest cluster share (clusters)"


@pytest.fixture
def toy_metric():
    """The share of the items in the largest cluster, registered for the test only."""
    with METRICS.scratch():
        register_metric(NAME, needs={"partition"}, label=LABEL)(
            lambda a: float(a.table.cluster_sizes.max() / a.table.n)
        )
        yield NAME
    assert NAME not in available_metrics()


@pytest.fixture
def saved(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 20)
    np.save(tmp_path / "e.npy", rng.normal(size=(60, 4)) + 8 * np.eye(4)[labels])
    np.save(tmp_path / "l.npy", labels)
    return tmp_path


def test_evaluate_cluster_and_the_clustering_report_show_it(toy_metric, saved, capsys):
    emb, labels = str(saved / "e.npy"), str(saved / "l.npy")
    table = saved / "t.json"
    assert main(["evaluate", emb, labels, "--metrics", NAME, "nmi", "--json", str(table)]) == 0
    assert json.loads(table.read_text())[NAME] == pytest.approx(1 / 3)
    assert f"  {LABEL}   33.33 %" in capsys.readouterr().out
    again = ["--json", str(table), "--overwrite"]
    assert main(["evaluate", emb, labels, *again]) == 0  # the default table
    assert NAME in json.loads(table.read_text()) and LABEL in capsys.readouterr().out

    clusters = saved / "c.npy"
    assert main(["cluster", emb, "--labels", labels, "--out", str(clusters)]) == 0
    assert LABEL in capsys.readouterr().out

    page = saved / "c.html"
    argv = ["report", str(clusters), "--embeddings", emb, "--labels", labels, "--out", str(page)]
    assert main(argv) == 0
    assert LABEL in page.read_text()


def test_a_run_and_tune_show_it(toy_metric, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "--data", "digits", "--epochs", "1", "--embedding-dim", "8"]
    assert main([*argv, "--batch-size", "60", "--no-progress", "--out", str(run)]) == 0
    assert LABEL in capsys.readouterr().out  # the test table
    assert NAME in json.loads((run / "test_metrics.json").read_text())
    if not (run / "report.html").is_file():  # a run written without its report
        assert main(["report", str(run)]) == 0
    assert LABEL in (run / "report.html").read_text()

    config = tmp_path / "run.yaml"
    settings = {"data": "digits", "loss": "contrastive", "embedding_dim": 8}
    settings["train"] = {"epochs": 1, "batch_size": 60, "items_per_class": 6}
    settings["search"] = {"margin": {"log": [0.1, 2]}}
    config.write_text(yaml.safe_dump(settings))
    argv = ["tune", "--config", str(config), "--folds", "2", "--trials", "1"]
    assert main([*argv, "--metric", NAME, "--out", str(tmp_path / "study")]) == 0
    printed = capsys.readouterr().out
    assert f"maximising {NAME}" in printed and "1 trial completed" in printed
