"""The one atomic write (`clusterable._atomic`): flushed, renamed into place, cleaned up on error;
and every file the package saves for later goes through it."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest
import torch

from clusterable import _atomic, cluster
from clusterable._atomic import atomic_write, atomic_write_text, replacing
from clusterable.export import export_model
from clusterable.index import EmbeddingIndex
from clusterable.train.checkpoint import save_checkpoint

FAILURES = [
    OSError(28, "No space left on device"),
    RuntimeError("writer failed"),
    KeyboardInterrupt,
]


@pytest.mark.parametrize("failure", FAILURES, ids=lambda e: type(e).__name__)
def test_a_failing_stream_writer_leaves_the_old_file_and_no_temporary(tmp_path, failure):
    target = atomic_write_text(tmp_path / "record.json", '{"old": true}')

    def half_then_fail(out):
        out.write(b'{"new": ')
        raise failure

    with pytest.raises(type(failure) if isinstance(failure, BaseException) else failure):
        atomic_write(target, half_then_fail)
    assert target.read_text() == '{"old": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


@pytest.mark.parametrize("failure", FAILURES, ids=lambda e: type(e).__name__)
def test_a_failing_path_writer_leaves_the_old_file_and_no_temporary(tmp_path, failure):
    target = tmp_path / "weights.pt"
    torch.save({"w": torch.zeros(2)}, target)
    with (
        pytest.raises(type(failure) if isinstance(failure, BaseException) else failure),
        replacing(target) as temporary,
    ):
        torch.save({"w": torch.ones(2)}, temporary)
        raise failure
    assert torch.equal(torch.load(target)["w"], torch.zeros(2))
    assert [p.name for p in tmp_path.iterdir()] == ["weights.pt"]


def test_a_failure_before_any_file_leaves_no_file(tmp_path):
    with pytest.raises(RuntimeError), replacing(tmp_path / "new" / "file.bin"):
        raise RuntimeError("nothing written")
    assert not (tmp_path / "new" / "file.bin").exists()
    assert list((tmp_path / "new").iterdir()) == []


def test_the_file_is_on_disk_before_the_rename_and_the_rename_after(tmp_path, monkeypatch):
    events = []
    real_flush, real_replace = _atomic._flush_to_disk, os.replace
    monkeypatch.setattr(_atomic, "_flush_to_disk", lambda p: events.append(("flush", p.name)))
    monkeypatch.setattr(
        _atomic.os, "replace", lambda a, b: (events.append(("rename", b.name)), real_replace(a, b))
    )
    atomic_write_text(tmp_path / "a.txt", "text")
    monkeypatch.undo()
    assert [e[0] for e in events] == ["flush", "rename", "flush"]
    assert events[0][1].startswith(".a.txt.")  # the temporary, beside the target
    assert events[1:] == [("rename", "a.txt"), ("flush", tmp_path.name)]
    real_flush(tmp_path / "a.txt")  # a file and a folder can both be flushed here
    real_flush(tmp_path)


def test_a_new_file_gets_the_umask_permissions_not_the_temporarys(tmp_path):
    path = atomic_write_text(tmp_path / "shared.json", "{}")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def _saved_files(monkeypatch) -> list[str]:
    """The names of the files the atomic write puts in place, from now on (its temporaries,
    ``.NAME.XXXXXX``, flushed to disk before the rename)."""
    names: list[str] = []
    real = _atomic._flush_to_disk

    def recorded(path):
        if path.is_file():
            names.append(path.name[1:].rsplit(".", 1)[0])
        return real(path)

    monkeypatch.setattr(_atomic, "_flush_to_disk", recorded)
    return names


def test_checkpoints_write_every_file_through_the_atomic_write(tmp_path, monkeypatch):
    names = _saved_files(monkeypatch)
    model, loss = torch.nn.Linear(3, 2), torch.nn.Module()
    final = save_checkpoint(
        tmp_path, "epoch-0001", model, loss, {"epoch": 1}, {"epoch": 1}, ("latest", "best")
    )
    assert sorted(names) == ["best", "latest", "meta.json", "state.pt", "weights.safetensors"]
    assert sorted(p.name for p in final.iterdir()) == [
        "meta.json",
        "state.pt",
        "weights.safetensors",
    ]
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".")]


def test_a_checkpoint_whose_state_fails_leaves_the_pointers_and_no_temporary(tmp_path, monkeypatch):
    model, loss = torch.nn.Linear(3, 2), torch.nn.Module()
    save_checkpoint(tmp_path, "epoch-0001", model, loss, {"epoch": 1}, {"epoch": 1})
    from clusterable.train import checkpoint

    def broken_save(state, path):
        open(path, "wb").write(b"half")
        raise RuntimeError("disk went away")

    monkeypatch.setattr(checkpoint.torch, "save", broken_save)
    with pytest.raises(checkpoint.CheckpointWriteError, match="previous checkpoint is intact"):
        save_checkpoint(tmp_path, "epoch-0002", model, loss, {"epoch": 2}, {"epoch": 2})
    root = tmp_path / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["epoch-0001", "latest"]
    assert (root / "latest").read_text() == "epoch-0001"


def test_export_writes_the_model_and_its_description_through_the_atomic_write(
    tmp_path, monkeypatch
):
    names = _saved_files(monkeypatch)
    export_model(torch.nn.Linear(4, 2), (4,), tmp_path / "m", "torchscript")
    assert names == ["m.pt", "m.pt.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt", "m.pt.json"]


def test_a_failed_parity_check_leaves_the_previous_export_and_no_temporary(tmp_path, monkeypatch):
    from clusterable import export

    target = export_model(torch.nn.Linear(4, 2), (4,), tmp_path / "m", "torchscript")
    before = target.read_bytes()
    monkeypatch.setattr(export, "PARITY_TOLERANCE", -1.0)
    with pytest.raises(RuntimeError, match="differs from PyTorch"):
        export_model(torch.nn.Linear(4, 3), (4,), tmp_path / "m", "torchscript")
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt", "m.pt.json"]


def test_index_and_partition_files_are_written_through_the_atomic_write(tmp_path, monkeypatch):
    names = _saved_files(monkeypatch)
    x = np.random.default_rng(0).normal(size=(30, 2))
    EmbeddingIndex.build(x).save(tmp_path / "g.npz")
    cluster.fit(x, "kmeans", 2).save(tmp_path / "p.npz")
    assert names == ["g.npz", "p.npz"]


def test_a_training_run_writes_its_records_through_the_atomic_write(tmp_path, monkeypatch):
    from clusterable.cli import main

    names = _saved_files(monkeypatch)
    out = tmp_path / "run"
    argv = ["train", "--data", "digits", "--model", "mlp", "--epochs", "1", "--no-progress"]
    assert main([*argv, "--embedding-dim", "8", "--out", str(out)]) == 0
    written = set(names)
    assert {"run.json", "test_metrics.json", "result.json", "report.html"} <= written
    assert {"weights.safetensors", "state.pt", "meta.json", "latest"} <= written
