"""The seams between verbs, for each loss family: a pair loss, the losses with a classification
head, DSCL spectral, MsDNN with its decoder and unsupervised OPML each train on digits (report
included), and every later verb reads the run as the trainer left it: `evaluate RUN` reproduces
the run's test table, `index` holds the vectors `embed` writes, and search, classify, assign and
export take the run.

`tests/test_run_seams.py` does the same for the data and model families (with one loss).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from clusterable.cli import main
from clusterable.index import EmbeddingIndex

#: Each loss family's training flags. Spectral needs a batch above its embedding size.
LOSS_FAMILIES = {
    "lifted": ["--loss", "lifted", "--embedding-dim", "8"],
    "cross-entropy": ["--loss", "cross-entropy", "--embedding-dim", "8"],
    "center": ["--loss", "center", "--embedding-dim", "8"],
    "cosine-corel": ["--loss", "cosine-corel", "--embedding-dim", "8"],
    "spectral": ["--loss", "spectral", "--embedding-dim", "16"],
    "msdnn-autoencoder": ["--loss", "msdnn", "--autoencoder", "--embedding-dim", "8"],
    "opml-unsupervised": ["--unsupervised", "--loss", "opml", "--embedding-dim", "8"],
}


def cli(*argv: str | Path) -> int:
    return main([str(a) for a in argv])


@pytest.fixture(scope="module", params=sorted(LOSS_FAMILIES))
def family(request, tmp_path_factory):
    """A digits run of one loss family, its test split embedded (``emb/``), and indexes of its
    train and test splits."""
    root = tmp_path_factory.mktemp(request.param)
    run = root / "run"
    status = cli(
        "train", "--data", "digits", "--model", "mlp", *LOSS_FAMILIES[request.param],
        "--epochs", "1", "--batch-size", "64", "--device", "cpu", "--no-progress",
        "--seed", "3", "--out", run,
    )  # fmt: skip
    assert status == 0
    assert cli("embed", run, "--split", "test", "--out", root / "emb", "--device", "cpu") == 0
    for split in ("train", "test"):
        argv = ("--data", "digits", "--split", split, "--device", "cpu")
        assert cli("index", run, *argv, "--out", root / f"{split}.npz") == 0
    return root


def test_train_writes_its_report_and_report_writes_it_again(family, tmp_path):
    assert "<html" in (family / "run" / "report.html").read_text()[:500].lower()
    assert cli("report", family / "run", "--out", tmp_path / "again.html", "--device", "cpu") == 0
    assert (tmp_path / "again.html").is_file()


def test_evaluate_run_reproduces_the_runs_test_table_and_its_knn(family, tmp_path):
    own = json.loads((family / "run" / "test_metrics.json").read_text())
    table = tmp_path / "t.json"
    assert cli("evaluate", family / "run", "--json", table, "--device", "cpu") == 0
    evaluated = json.loads(table.read_text())
    assert list(evaluated) == list(own) and evaluated == own
    again = ("--json", table, "--overwrite")
    assert cli("evaluate", family / "run", "--metrics", "knn@3", *again) == 0
    assert json.loads(table.read_text()) == {"knn@3": own["knn@3"]}


#: The families whose loss has its own classifier (``loss.predict``).
CLASSIFIERS = ("center", "cosine-corel", "cross-entropy")


def test_a_classifier_runs_table_holds_its_classification_accuracy(family):
    """The trained loss's own classifier scores the test split in the run's table (so in
    ``evaluate RUN``'s, equal above): the share of test items ``loss.predict`` gets right."""
    import numpy as np
    import torch

    from clusterable.recipe import load_trained

    own = json.loads((family / "run" / "test_metrics.json").read_text())
    if family.name.rstrip("0123456789") not in CLASSIFIERS:
        assert "classification_accuracy" not in own
        return
    loss = load_trained(family / "run").loss
    embeddings = torch.from_numpy(np.load(family / "emb" / "embeddings.npy"))
    labels = np.load(family / "emb" / "labels.npy")
    with torch.no_grad():
        predicted = loss.predict(embeddings).numpy()
    assert own["classification_accuracy"] == pytest.approx(float((predicted == labels).mean()))


def test_evaluate_run_gives_the_classification_accuracy_asked_or_says_why_not(family, capsys):
    """``evaluate RUN --metrics classification_accuracy`` gives the table's value alone; a run
    whose loss has no classifier, the training items, or saved embeddings are refused in one
    line before any embedding."""
    own = json.loads((family / "run" / "test_metrics.json").read_text())
    table = family / "asked.json"
    argv = ("evaluate", family / "run", "--json", table, "--overwrite")
    argv += ("--metrics", "classification_accuracy")
    if family.name.rstrip("0123456789") not in CLASSIFIERS:
        with pytest.raises(SystemExit):
            cli(*argv)
        assert "has none; ask it of a run of center" in capsys.readouterr().err
        return
    assert cli(*argv, "--device", "cpu") == 0
    scores = {"classification_accuracy": own["classification_accuracy"]}
    assert json.loads(table.read_text()) == scores
    assert cli(*argv, "map@r", "knn@3", "--device", "cpu") == 0
    assert json.loads(table.read_text()) == {**scores, "map@r": own["map@r"], "knn@3": own["knn@3"]}
    capsys.readouterr()
    for refused, words in (
        (("--split", "train"), "the train split holds the training items themselves"),
        ((), "trained classifier, which saved embeddings do not hold"),
    ):
        source = family / "emb" / "embeddings.npy" if not refused else family / "run"
        extra = () if refused else (family / "emb" / "labels.npy",)
        with pytest.raises(SystemExit):
            cli("evaluate", source, *extra, "--metrics", "classification_accuracy", *refused)
        out, err = capsys.readouterr()
        assert words in err and "Traceback" not in err and "embedding" not in out, err


def test_classification_accuracy_of_other_data_says_how_many_items_it_cannot_get_right(
    family, tmp_path, capsys
):
    """The trained classifier predicts training classes only: ``evaluate RUN --data OTHER``
    counts the items of other classes as its errors, as k-NN accuracy does, and says how many,
    asked alone (its note was dropped, with who votes), beside knn@K or in the default table
    (whose note named k-NN alone)."""
    if family.name.rstrip("0123456789") not in CLASSIFIERS:
        return
    from clusterable.data import load_dataset

    test = load_dataset("digits", split="test")
    names = np.array(list("01234abcde"))[test.labels]  # half the classes are training classes
    np.savez(tmp_path / "half.npz", x=test.x.reshape(len(test), -1), y=names)
    unseen = int((test.labels >= 5).sum())
    argv = ("evaluate", family / "run", "--data", f"table:{tmp_path / 'half.npz'}", "--split")
    argv += ("all", "--device", "cpu", "--json", tmp_path / "t.json", "--overwrite", "--metrics")
    capsys.readouterr()
    assert cli(*argv, "classification_accuracy") == 0
    printed = capsys.readouterr().out
    counted = f"count as errors the {unseen} of {len(test)} items whose class is no training class"
    assert f"the trained classifier's accuracy {counted.replace('count', 'counts', 1)}" in printed
    assert "k-NN accuracy: each item takes" not in printed  # no one votes
    accuracy = json.loads((tmp_path / "t.json").read_text())["classification_accuracy"]
    assert accuracy <= 1 - unseen / len(test)
    both = f"k-NN accuracy from training items and the trained classifier's accuracy {counted}"
    assert cli(*argv, "classification_accuracy", "knn@1") == 0
    assert both in capsys.readouterr().out
    assert cli(*argv[:-1]) == 0  # the default table scores both too
    assert both in capsys.readouterr().out


def test_index_holds_the_vectors_embed_writes(family):
    """The same vectors, and the same classes: `embed` writes class codes and their names."""
    emb = family / "emb"
    index = EmbeddingIndex.load(family / "test.npz")
    np.testing.assert_array_equal(index.vectors, np.load(emb / "embeddings.npy"))
    names = np.load(emb / "class_names.npy")[np.load(emb / "labels.npy")]
    assert index.labels is not None and index.labels.tolist() == names.tolist()


def test_search_and_classify_take_the_embeddings_against_the_train_index(family, tmp_path):
    queries, gallery = family / "emb" / "embeddings.npy", family / "train.npz"
    assert cli("search", gallery, queries, "-k", "3", "--device", "cpu") == 0
    test_labels = np.load(family / "emb" / "labels.npy")
    for method in ("knn", "class-mean"):
        labelled = tmp_path / f"{method}.json"
        argv = ("--method", method, "--output", labelled, "--device", "cpu")
        assert cli("classify", gallery, queries, *argv) == 0
        items = json.loads(labelled.read_text())["items"]
        assert len(items) == len(test_labels)


def test_a_saved_partition_assigns_the_runs_items_within_an_automatic_distance(
    family, tmp_path, capsys
):
    """The distance is calibrated on the run's validation split; an unsupervised run keeps
    none, says so, and calibrates on a split it is given."""
    emb = family / "emb"
    argv = ("--n-clusters", "10", "--out", tmp_path / "c.npy", "--save", tmp_path / "p.npz")
    assert cli("cluster", emb / "embeddings.npy", *argv, "--device", "cpu") == 0
    auto = ("--max-distance", "auto", "--json", tmp_path / "a.json", "--device", "cpu")
    assign = ("assign", tmp_path / "p.npz", family / "run", "digits", *auto)
    if family.name.startswith("opml-unsupervised"):
        capsys.readouterr()
        with pytest.raises(SystemExit) as stop:
            cli(*assign)
        assert stop.value.code == 2
        err = capsys.readouterr().err.strip()
        assert "kept no validation split" in err and "--calibration" in err and "\n" not in err
        assign = (*assign, "--calibration", "test")
    assert cli(*assign) == 0
    assert json.loads((tmp_path / "a.json").read_text())["max_distance"] > 0


@pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime is not installed"
)
def test_export_onnx_of_the_run(family, tmp_path):
    assert cli("export", family / "run", "--format", "onnx", "--out", tmp_path / "m.onnx") == 0
    assert (tmp_path / "m.onnx").is_file()


def test_classify_by_a_run_refuses_a_bad_split_before_embedding_its_gallery(tmp_path, capsys):
    """`classify RUN DATA --split S` embeds the items before the run's training split, so a
    split the data set lacks is refused without embedding the gallery first."""
    run = tmp_path / "run"
    status = cli(
        "train", "--data", "digits", "--loss", "contrastive", "--embedding-dim", "4",
        "--epochs", "1", "--device", "cpu", "--no-progress", "--no-report", "--out", run,
    )  # fmt: skip
    assert status == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        cli("classify", run, "digits", "--split", "validation", "--device", "cpu")
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert "gallery:" not in out
    err = err.strip()
    assert err.startswith("clusterable classify: error:") and "split='validation'" in err
    assert "\n" not in err
    assert cli("classify", run, "digits", "--split", "test", "--device", "cpu") == 0
    out = capsys.readouterr().out
    assert "gallery: 1258 items of digits/train" in out and "classified 539 items" in out
