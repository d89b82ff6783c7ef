"""A Ctrl-C ends every verb in one line and exit status 130, never a traceback; `train`'s
end-of-run report, interrupted, says the run trained and how to write the report. An unknown
flag names its verb."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from clusterable.cli import main


def test_an_interrupted_verb_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    import clusterable.recipe

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(clusterable.recipe, "score_test_table", interrupted)  # evaluate's work
    rng = np.random.default_rng(0)
    np.save(tmp_path / "e.npy", rng.normal(size=(30, 4)).astype(np.float32))
    np.save(tmp_path / "l.npy", np.arange(30) % 3)
    assert main(["evaluate", str(tmp_path / "e.npy"), str(tmp_path / "l.npy")]) == 130
    assert capsys.readouterr().err.strip() == "clusterable evaluate: interrupted"


def test_an_interrupted_train_report_says_the_run_trained(tmp_path, capsys, monkeypatch):
    import clusterable.reports

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(clusterable.reports, "write_run_report", interrupted)
    out = tmp_path / "run"
    argv = ["train", "--data", "digits", "--epochs", "1", "--embedding-dim", "8"]
    assert main([*argv, "--no-progress", "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip()
    assert err == (
        f"clusterable train: the run trained, and its report was interrupted; write it with "
        f"`clusterable report {out}`"
    )
    assert (out / "test_metrics.json").is_file()  # the training's own files are all there


def test_a_real_ctrl_c_leaves_no_traceback(tmp_path):
    """SIGINT to a process clustering 4,000 points by affinity propagation (40 s of work here)."""
    rng = np.random.default_rng(1)
    np.save(tmp_path / "e.npy", rng.normal(size=(4000, 16)).astype(np.float32))
    argv = [sys.executable, "-m", "clusterable", "cluster", str(tmp_path / "e.npy")]
    argv += ["--clustering", "affinity_propagation", "--n-clusters", "50"]
    argv += ["--out", str(tmp_path / "c.npy")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        cwd=Path(__file__).parent,
    )  # fmt: skip
    time.sleep(12)  # the imports (seconds on a loaded machine), then into the 40 s clustering
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 130, (out, err)
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "clusterable cluster: interrupted"
    assert not (tmp_path / "c.npy").exists()


def test_an_unknown_flag_names_the_verb(capsys):
    """argparse reports a verb's unknown flags from the top parser, as "clusterable: error"."""
    with pytest.raises(SystemExit) as stop:
        main(["search", "index.npz", "queries.npy", "--bogus", "1"])
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        "clusterable search: error: unrecognized arguments: --bogus 1 "
        "(see `clusterable search --help`)\n"
    )
