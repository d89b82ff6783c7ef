"""A run given as one of its checkpoints is that run, with that checkpoint's weights: its record,
seed, validation split and training items come from the run folder, and what records the model
(``model.json``, an index) names the run folder and the checkpoint apart. A checkpoint copied out
of its run is read alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clusterable.cli import main
from clusterable.index import EmbeddingIndex
from clusterable.trained_run import ModelIdentity, TrainedRun


def cli(*argv: str | Path) -> int:
    return main([str(a) for a in argv])


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A digits run of three epochs, each kept as a checkpoint (the best among them)."""
    run = tmp_path_factory.mktemp("checkpoints") / "run"
    # fmt: off
    assert cli(
        "train", "--data", "digits", "--model", "mlp", "--loss", "lifted", "--embedding-dim", "8",
        "--epochs", "3", "--batch-size", "64", "--device", "cpu", "--no-progress", "--no-report",
        "--seed", "3", "--out", run,
    ) == 0
    # fmt: on
    return run.resolve()


def best_and_other(run: Path) -> tuple[Path, Path]:
    """The run's best checkpoint, and another one it kept."""
    folder = run / "checkpoints"
    best = folder / (folder / "best").read_text().strip()
    other = next(path for path in sorted(folder.glob("epoch-*")) if path != best)
    return best, other


def table(source: Path, out: Path) -> dict:
    assert cli("evaluate", source, "--json", out, "--device", "cpu") == 0
    return json.loads(out.read_text())


def test_the_best_checkpoint_and_the_checkpoints_folder_evaluate_as_the_run(run, tmp_path):
    """`evaluate RUN/checkpoints/BEST` and `evaluate RUN/checkpoints` give the table of
    `evaluate RUN`, k-NN accuracy from the run's training items included (a checkpoint read
    without the run's seed leaves it out)."""
    best, _ = best_and_other(run)
    expected = table(run, tmp_path / "run.json")
    assert any(key.startswith("knn") for key in expected), expected
    assert table(best, tmp_path / "best.json") == expected
    assert table(run / "checkpoints", tmp_path / "folder.json") == expected


def test_a_checkpoint_of_a_run_is_the_run_with_its_weights(run):
    best, other = best_and_other(run)
    whole = TrainedRun.load(run, device="cpu")
    given = TrainedRun.load(other, device="cpu")
    assert given.folder == run and given.config == whole.config
    assert given.checkpoint == other and given.model_id != whole.model_id
    assert len(given.validation_split()) == len(whole.validation_split()) > 0
    assert given.test_metrics is None and whole.test_metrics is not None  # it scored the best
    identity = given.identity()
    assert (identity.run, identity.checkpoint) == (str(run), str(other))
    assert TrainedRun.load(best, device="cpu").identity() == whole.identity()


def test_embed_index_and_search_of_a_checkpoint_name_its_run_and_its_weights(run, tmp_path):
    """model.json and the index name the run folder as the run and the checkpoint apart; search
    embeds its queries with the checkpoint's weights, not the run's best's."""
    _, other = best_and_other(run)
    emb = tmp_path / "emb"
    assert cli("embed", other, "--split", "test", "--out", emb, "--device", "cpu") == 0
    identity = ModelIdentity.beside(emb / "embeddings.npy")
    assert (identity.run, identity.checkpoint) == (str(run), str(other))
    for source in (emb / "embeddings.npy", other):
        argv = ("--data", "digits", "--split", "test") if source == other else ()
        index_file = tmp_path / f"{source.name}.npz"
        assert cli("index", source, *argv, "--out", index_file, "--device", "cpu") == 0
        index = EmbeddingIndex.load(index_file)
        assert (index.run, index.checkpoint) == (str(run), str(other))
        assert cli("search", index_file, "digits", "-k", "2", "--device", "cpu") == 0


def test_a_checkpoint_copied_out_of_its_run_is_read_alone(run, tmp_path):
    _, other = best_and_other(run)
    lone = tmp_path / "lone"
    shutil.copytree(other, lone)
    trained = TrainedRun.load(lone, device="cpu")
    assert trained.folder == lone.resolve() and trained.config == {}
    assert trained.identity().run == str(lone.resolve())
    reference, notes = trained.knn_reference(trained.split("test"))
    assert reference is None and "no run.json" in notes[0]


def test_report_of_a_checkpoint_is_the_runs_page_beside_the_runs_own(run):
    """The page of another checkpoint than the best goes beside the run's page, not over it,
    and shows no test table (the run's scored the best)."""
    _, other = best_and_other(run)
    assert cli("report", other, "--device", "cpu") == 0
    page = run / f"report-{other.name}.html"
    assert page.is_file() and not (run / "report.html").exists()
    assert other.name in page.read_text() and "test evaluation" not in page.read_text()


def test_an_index_of_another_checkpoint_is_refused_naming_the_checkpoint(run, tmp_path, capsys):
    """Queries embedded with one checkpoint against an index of the run's best: the refusal
    names that checkpoint (the weights that differ), not only the run folder."""
    _, other = best_and_other(run)
    index_file = tmp_path / "best.npz"
    argv = ("--data", "digits", "--split", "test", "--device", "cpu")
    assert cli("index", run, *argv, "--out", index_file) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli("search", index_file, "digits", "--run", other, "--device", "cpu")
    err = capsys.readouterr().err
    assert f"was made by another model than the one of {other} " in err, err
    assert err.count("\n") == 1


def test_a_run_given_by_a_relative_path_records_absolute_folders(run, monkeypatch):
    # `TrainedRun.load("runs/x")` kept the checkpoint relative (the folder absolute), and an
    # index built from it recorded a checkpoint that another working folder could not find.
    best, other = best_and_other(run)
    monkeypatch.chdir(run.parent)
    for given, checkpoint in ((Path(run.name), best), (other.relative_to(run.parent), other)):
        trained = TrainedRun.load(given, device="cpu")
        assert (trained.folder, trained.checkpoint) == (run, checkpoint)
        assert trained.identity().checkpoint in (None, str(checkpoint))
