"""Run folders hold one run: resumed with its own settings, never mixed, checked before work."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterable.cli import main
from clusterable.train import checkpoint as checkpoint_module
from clusterable.train.trainer import Trainer

QUICK = ["--embedding-dim", "8", "--batch-size", "60", "--no-progress"]


def train(out, *extra: str) -> int:
    return main(["train", "--data", "digits", *QUICK, "--out", str(out), *extra])


def one_line_error(capsys, call) -> str:
    with pytest.raises(SystemExit) as exit_info:
        call()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.fixture(scope="module")
def contrastive_run(tmp_path_factory):
    """One epoch of a run whose settings all differ from the defaults."""
    out = tmp_path_factory.mktemp("runs") / "contrastive"
    assert (
        train(out, "--loss", "contrastive", "--model", "mlp", "--epochs", "1", "--lr", "2e-3") == 0
    )
    return out


def test_resume_without_flags_continues_with_the_runs_own_settings(contrastive_run, tmp_path):
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(contrastive_run, out)
    # How data is loaded may change on resume: it changes no result; so may the chunks a batch
    # is embedded in (the same gradient in less memory: a run out of GPU memory goes on).
    resume = ["--resume", "--epochs", "2", "--no-progress", "--workers", "0"]
    resume += ["--cache-images", "none", "--chunk-size", "16"]
    assert main(["train", "--out", str(out), *resume]) == 0
    record = json.loads((out / "run.json").read_text())
    assert record["config"]["chunk_size"] == 16
    assert record["spec"]["loss"] == "contrastive" and record["spec"]["embedding_dim"] == 8
    assert record["config"]["lr"] == pytest.approx(2e-3) and record["config"]["epochs"] == 2
    assert json.loads((out / "result.json").read_text())["epochs_run"] == 2


def test_resume_with_a_conflicting_flag_fails_before_writing(contrastive_run, capsys):
    before = {p: p.read_bytes() for p in contrastive_run.rglob("*") if p.is_file()}
    err = one_line_error(
        capsys,
        lambda: main(["train", "--out", str(contrastive_run), "--resume", "--loss", "lifted"]),
    )
    assert "loss='lifted'" in err and "'contrastive'" in err
    after = {p: p.read_bytes() for p in contrastive_run.rglob("*") if p.is_file()}
    assert after == before


def test_resume_with_the_same_settings_given_again_is_accepted(contrastive_run, tmp_path):
    import shutil

    out = tmp_path / "again"
    shutil.copytree(contrastive_run, out)
    # The same learning rate typed another way, and the loss named again.
    assert train(out, "--resume", "--loss", "contrastive", "--lr", "0.002", "--epochs", "1") == 0


def test_a_non_empty_out_needs_resume_or_overwrite(contrastive_run, tmp_path, capsys):
    import shutil

    out = tmp_path / "taken"
    shutil.copytree(contrastive_run, out)
    err = one_line_error(capsys, lambda: train(out, "--epochs", "1"))
    assert "--resume" in err and "--overwrite" in err
    assert train(out, "--epochs", "2", "--overwrite") == 0
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert names == ["best", "epoch-0001", "epoch-0002", "latest"]
    epochs = [
        json.loads(line)["epoch"]
        for line in (out / "log.jsonl").read_text().splitlines()
        if json.loads(line)["event"] == "epoch"
    ]
    assert epochs == [1, 2], "the log holds one run"


def test_overwrite_keeps_the_old_run_when_the_new_one_is_refused(contrastive_run, tmp_path, capsys):
    # --overwrite emptied the folder before the data was read: a mistyped --data deleted the
    # old run and trained nothing in its place.
    import shutil

    out = tmp_path / "kept"
    shutil.copytree(contrastive_run, out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    nowhere = tmp_path / "nowhere"
    err = one_line_error(capsys, lambda: train(out, "--data", f"folder:{nowhere}", "--overwrite"))
    assert str(nowhere) in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_an_unwritable_out_fails_before_the_data_is_read(tmp_path, capsys, monkeypatch):
    (tmp_path / "file").write_text("not a folder")

    def no_loading(*args, **kwargs):
        raise AssertionError("data was loaded before the run folder was checked")

    monkeypatch.setattr("clusterable.recipe.load_dataset", no_loading)
    err = one_line_error(capsys, lambda: train(tmp_path / "file" / "run"))
    assert str(tmp_path / "file") in err and "cannot write" in err


@pytest.mark.parametrize("verb", ["evaluate", "embed", "cluster", "plot", "demo"])
def test_other_verbs_check_their_output_before_work(tmp_path, capsys, monkeypatch, verb):
    np.save(tmp_path / "e.npy", np.random.default_rng(0).normal(size=(12, 3)))
    np.save(tmp_path / "l.npy", np.arange(12) % 2)
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    # Both names, demo's first: clusterable.demo binds its own at import, so a patch of
    # clusterable.plots alone is missed when demo came first, and is bound by demo for good
    # when this import of demo comes after it.
    for name in ("clusterable.demo.plot_tsne", "clusterable.plots.plot_tsne"):
        monkeypatch.setattr(name, lambda *a, **k: pytest.fail("t-SNE ran"))
    emb, lab = str(tmp_path / "e.npy"), str(tmp_path / "l.npy")
    argv = {
        "evaluate": ["evaluate", emb, lab, "--json", str(blocked / "t.json")],
        "embed": ["embed", emb, lab, "--out", str(blocked / "emb")],
        "cluster": ["cluster", emb, "--n-clusters", "2", "--out", str(blocked / "c.npy")],
        "plot": ["plot", emb, lab, "--out", str(blocked / "plots")],
        "demo": ["demo", "--quick", "--out", str(blocked / "demo")],
    }[verb]
    err = one_line_error(capsys, lambda: main(argv))
    assert str(blocked) in err


def test_a_full_disk_during_a_checkpoint_is_one_line_and_leaves_no_temporary(
    tmp_path, capsys, monkeypatch
):
    out = tmp_path / "run"
    original = checkpoint_module.save_file
    calls = []

    def fills_up(tensors, path):
        calls.append(path)
        if len(calls) == 2:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 512")
        original(tensors, path)

    monkeypatch.setattr(checkpoint_module, "save_file", fills_up)
    monkeypatch.setattr(
        checkpoint_module.shutil, "disk_usage", lambda path: type("U", (), {"free": 0})()
    )
    err = one_line_error(capsys, lambda: train(out, "--epochs", "3", "--set", "eval_every=0"))
    assert "disk full" in err and "epoch-0002" in err
    checkpoints = out / "checkpoints"
    assert (checkpoints / "latest").read_text().strip() == "epoch-0001"
    assert not [p for p in checkpoints.iterdir() if p.name.startswith(".")]


def test_resume_removes_the_temporaries_of_an_interrupted_write(contrastive_run, tmp_path):
    import shutil

    out = tmp_path / "stale"
    shutil.copytree(contrastive_run, out)
    stale = out / "checkpoints" / ".epoch-0002.abc123"
    stale.mkdir()
    (stale / "weights.safetensors").write_bytes(b"half")
    (out / "checkpoints" / ".latest.xyz").write_text("epoch-0002")
    assert train(out, "--resume", "--epochs", "1") == 0
    assert not [p for p in (out / "checkpoints").iterdir() if p.name.startswith(".")]


def test_ctrl_c_says_where_the_last_checkpoint_is_and_how_to_resume(tmp_path, capsys, monkeypatch):
    run_epoch = Trainer._run_epoch
    epochs = []

    def interrupted_on_the_second(self):
        epochs.append(self.epoch)
        if len(epochs) == 2:
            raise KeyboardInterrupt
        return run_epoch(self)

    monkeypatch.setattr(Trainer, "_run_epoch", interrupted_on_the_second)
    out = tmp_path / "run"
    assert train(out, "--epochs", "3") == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    assert "last checkpoint is epoch 1" in err and f"--out {out} --resume" in err


def test_folder_and_table_runs_are_named_after_the_data_not_its_path():
    from clusterable.train.run_folder import default_run_folder

    assert default_run_folder("folder:/tmp/x/fm/", "lifted").as_posix() == "runs/fm-lifted"
    assert default_run_folder("table:data/fm.csv", "msdnn").as_posix() == "runs/fm-msdnn"
    assert default_run_folder("digits", "lifted").as_posix() == "runs/digits-lifted"


def test_a_run_on_relative_table_data_is_usable_from_another_directory(
    tmp_path, monkeypatch, capsys
):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "data").mkdir(parents=True)
    elsewhere.mkdir()
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 100)
    np.savez(work / "data" / "blobs.npz", x=rng.normal(size=(400, 6)) + 4 * np.eye(6)[y], y=y)
    monkeypatch.chdir(work)
    argv = ["train", "--data", "table:data/blobs.npz", "--epochs", "1", *QUICK]
    assert main(argv) == 0
    run = work / "runs" / "blobs-lifted"
    assert (run / "run.json").is_file(), sorted(str(p) for p in (work / "runs").rglob("*"))
    spec = json.loads((run / "run.json").read_text())["spec"]
    assert spec["data"] == f"table:{work / 'data' / 'blobs.npz'}"
    monkeypatch.chdir(elsewhere)
    assert main(["evaluate", str(run)]) == 0
