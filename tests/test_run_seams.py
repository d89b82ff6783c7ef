"""The seams between verbs, for each model family: a run trains and writes its report (exit 0),
and every later verb (evaluate, embed, index, search, assign, report, export) sees the run's own
data view, so that `evaluate RUN` reproduces the run's test table and an image embedded by `embed`
is embedded identically as a query.

Each family runs on the CPU, and on CUDA where torch sees a GPU (`make gpu-check` step a).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from clusterable.cli import main
from clusterable.trained_run import TrainedRun

#: The test table's scores that `evaluate RUN` must reproduce, at least.
HEADLINE = ("recall@1", "map@r", "nmi", "accuracy", "f1", "ari")


def write_photos(root: Path, splits: dict[str, int], classes: int = 3, seed: int = 0) -> Path:
    """``root/SPLIT/classC/`` JPEGs of mixed, non-square sizes, each class its own colour."""
    rng = np.random.default_rng(seed)
    for split, per_class in splits.items():
        for c in range(classes):
            folder = root / split / f"class{c}"
            folder.mkdir(parents=True)
            for i in range(per_class):
                width, height = (120, 90) if i % 2 else (70, 100)
                tint = 70 * np.eye(3, dtype=int)[c % 3]
                pixels = rng.integers(0, 80, (height, width, 3)) + tint
                Image.fromarray(pixels.astype(np.uint8)).save(folder / f"{i}.jpg", quality=90)
    return root


FAMILIES = {
    "digits-mlp": lambda root: ["--data", "digits", "--model", "mlp"],
    "photos-corel-cnn-48px": lambda root: [
        "--data",
        f"folder:{write_photos(root / 'photos', {'train': 10, 'test': 6})}",
        "--model",
        "corel-cnn",
        "--image-size",
        "48",
    ],
    "query-gallery-folder": lambda root: [
        "--data",
        f"folder:{write_photos(root / 'photos', {'train': 10, 'query': 3, 'gallery': 4})}",
        "--model",
        "corel-cnn",
        "--image-size",
        "40",
    ],
}


def backbone(model: str, size: int | None):
    """An image backbone's family (random weights: nothing is downloaded) on non-square photos,
    at its own input size (None) or at ``--image-size``."""

    def flags(root: Path) -> list[str]:
        photos = write_photos(root / "photos", {"train": 8, "test": 4})
        sized = [] if size is None else ["--image-size", str(size)]
        return ["--data", f"folder:{photos}", "--model", model, *sized]

    return flags


VISION = {
    f"{model.replace(':', '-')}-{size or 'default'}px": (model, backbone(model, size))
    for model in ("timm:resnet18", "torchvision:resnet18")
    for size in (None, 96)
}


def _family_params() -> list:
    """Each family on the CPU, and on CUDA (the ``cuda`` marker); backbones where their library
    is installed (`make test-vision`, `make gpu-check`)."""
    params = []
    families = {name: (None, flags) for name, flags in FAMILIES.items()} | VISION
    for name, (model, _) in sorted(families.items()):
        library = None if model is None else model.partition(":")[0]
        marks = []
        if library is not None and importlib.util.find_spec(library) is None:
            marks.append(pytest.mark.skip(reason=f"{library} is not installed (make test-vision)"))
        params.append(pytest.param((name, "cpu"), id=f"{name}-cpu", marks=marks))
        params.append(
            pytest.param((name, "cuda"), id=f"{name}-cuda", marks=[*marks, pytest.mark.cuda])
        )
    return params


def cli(*argv: str) -> int:
    return main([str(a) for a in argv])


@pytest.fixture(scope="module", params=_family_params())
def trained(request, tmp_path_factory):
    """A run of one family trained through the CLI on one device: its folder, its data flag and
    the device."""
    name, device = request.param
    root = tmp_path_factory.mktemp(name)
    flags = (FAMILIES[name] if name in FAMILIES else VISION[name][1])(root)
    out = root / "run"
    status = cli(
        "train", *flags, "--loss", "contrastive", "--epochs", "1", "--batch-size", "16",
        "--embedding-dim", "8", "--device", device, "--out", out, "--no-progress", "--seed", "3",
    )  # fmt: skip
    assert status == 0
    return out, flags[1], torch.device(device)


def test_train_exits_0_with_its_report(trained):
    out, _, _ = trained
    assert (out / "report.html").is_file() and (out / "test_metrics.json").is_file()
    assert "<html" in (out / "report.html").read_text()[:500].lower()


def assert_same_table(evaluated: dict, own: dict, device: torch.device) -> None:
    """Every key of the run's test table and no other, in its order; each value equal, to the
    last digit on the CPU (a GPU's kernels may round otherwise)."""
    assert list(evaluated) == list(own)
    assert set(HEADLINE) <= set(own)
    if device.type == "cpu":
        assert evaluated == own
    else:
        gaps = {name: abs(evaluated[name] - own[name]) for name in own}
        assert max(gaps.values()) <= 1e-6, gaps


def test_evaluate_run_reproduces_the_runs_test_table(trained, tmp_path):
    """`evaluate RUN --json` writes test_metrics.json again: the k-NN accuracies from the
    training items included (the audit found them left out)."""
    out, _, device = trained
    assert cli("evaluate", out, "--json", tmp_path / "t.json", "--device", device.type) == 0
    evaluated = json.loads((tmp_path / "t.json").read_text())
    own = json.loads((out / "test_metrics.json").read_text())
    assert any(name.startswith("knn@") for name in own)
    assert_same_table(evaluated, own, device)


@pytest.fixture(scope="module")
def coarse_run(tmp_path_factory):
    """A digits run on MsDNN's coarse labels (0-4, 5-9): its table adds the sub-class scores."""
    out = tmp_path_factory.mktemp("coarse") / "run"
    status = cli(
        "train", "--data", "digits", "--label-view", "coarse", "--loss", "contrastive",
        "--epochs", "1", "--batch-size", "64", "--embedding-dim", "8", "--device", "cpu",
        "--out", out, "--no-progress", "--seed", "5",
    )  # fmt: skip
    assert status == 0
    return out


def test_evaluate_a_coarse_run_reproduces_its_sub_class_scores(coarse_run, tmp_path, capsys):
    assert cli("evaluate", coarse_run, "--json", tmp_path / "t.json", "--device", "cpu") == 0
    evaluated = json.loads((tmp_path / "t.json").read_text())
    own = json.loads((coarse_run / "test_metrics.json").read_text())
    assert {"knn@1", "knn@7", "subclass_nmi", "subclass_accuracy", "subclass_f1"} <= set(own)
    assert_same_table(evaluated, own, torch.device("cpu"))
    printed = capsys.readouterr().out
    assert "sub-class NMI (clusters vs fine classes)" in printed
    # The note says which items vote, as `classify RUN` (the whole train split) does not.
    run = TrainedRun.load(coarse_run, device="cpu")
    training, whole = len(run.training_items()), len(run.split("train"))
    assert training < whole
    assert (
        f"K nearest among the run's {training} training items (the train split less its "
        f"{whole - training} validation items); a tie goes to the class of the nearest voter"
    ) in printed


def test_evaluate_run_asks_training_items_only_of_items_they_can_score(
    coarse_run, tmp_path, capsys
):
    """k-NN accuracy from training items is scored for test items only: the train split holds
    the training items themselves; another data set's classes are the training classes of the
    same name, and none shared leaves it out; `--metrics` computes only what it names."""
    table = tmp_path / "t.json"
    assert cli("evaluate", coarse_run, "--split", "train", "--json", table, "--device", "cpu") == 0
    evaluated = json.loads(table.read_text())
    assert not any(name.startswith("knn@") for name in evaluated)
    assert "subclass_nmi" in evaluated
    assert "the train split holds the training items themselves" in capsys.readouterr().out
    run = TrainedRun.load(coarse_run, device="cpu")
    test = run.split("test")
    x = test.x.reshape(len(test), -1)
    letters = np.array(list("abcdefghij"))[test.fine_labels]
    for name, labels in (("same", test.fine_labels), ("other", letters)):
        np.savez(tmp_path / f"{name}.npz", x=x, y=labels)
    # The test split as a table, read in the run's coarse view: classes "0 | 1 | 2 | 3 | 4" and
    # "5 | 6 | 7 | 8 | 9", the training classes; "a | b | c | d | e" is none of them.
    data = f"table:{tmp_path / 'same.npz'}"
    again = ("--json", table, "--overwrite")
    assert cli("evaluate", coarse_run, "--data", data, "--split", "all", *again) == 0
    own = json.loads((coarse_run / "test_metrics.json").read_text())
    evaluated = json.loads(table.read_text())
    assert {name: evaluated[name] for name in own if name.startswith("knn@")} == {
        name: value for name, value in own.items() if name.startswith("knn@")
    }
    data = f"table:{tmp_path / 'other.npz'}"
    again = ("--json", table, "--overwrite")
    assert cli("evaluate", coarse_run, "--data", data, "--split", "all", *again) == 0
    assert not any(name.startswith("knn@") for name in json.loads(table.read_text()))
    assert "no class of other/all is a training class of the run" in capsys.readouterr().out
    assert cli("evaluate", coarse_run, "--metrics", "nmi", *again) == 0
    assert json.loads(table.read_text()) == {"nmi": own["nmi"]}


def test_evaluate_run_on_other_data_says_how_many_items_no_training_class_can_vote_right(
    coarse_run, tmp_path, capsys
):
    """Items of a class the run never trained on count as k-NN errors, whatever the model: the
    table says how many, as it says when none is of a training class (the count was silent)."""
    run = TrainedRun.load(coarse_run, device="cpu")
    test = run.split("test")
    # Read in the run's coarse view: "0 | 1 | 2 | 3 | 4", a training class, and "a | b | c | d | e".
    names = np.array(list("01234abcde"))[test.fine_labels]
    np.savez(tmp_path / "half.npz", x=test.x.reshape(len(test), -1), y=names)
    data = f"table:{tmp_path / 'half.npz'}"
    assert cli("evaluate", coarse_run, "--data", data, "--split", "all", "--metrics", "knn@1") == 0
    unseen = int((test.fine_labels >= 5).sum())
    assert (
        f"counts as errors the {unseen} of {len(test)} items whose class is no training class"
    ) in capsys.readouterr().out


def one_line_error(capsys, *argv) -> str:
    """The refusal of ``argv``: exit 2, one line naming the verb, no traceback; and nothing
    embedded first (no "embedding ..." line)."""
    with pytest.raises(SystemExit) as stop:
        cli(*argv)
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert "embedding" not in out
    verb = argv[0]
    err = err.strip()
    assert err.startswith(f"clusterable {verb}: error:") and "\n" not in err
    return err


def test_evaluate_run_scores_knn_accuracy_when_metrics_ask_it(coarse_run, tmp_path):
    """`--metrics knn@K` (and the bare knn@k: the table's own K) scores the k-NN accuracy of the
    run's test table, from its training items, alone or beside the registry's metrics."""
    own = json.loads((coarse_run / "test_metrics.json").read_text())
    table = tmp_path / "t.json"
    assert cli("evaluate", coarse_run, "--metrics", "knn@3", "nmi", "--json", table) == 0
    assert json.loads(table.read_text()) == {"knn@3": own["knn@3"], "nmi": own["nmi"]}
    again = ("--json", table, "--overwrite")
    assert cli("evaluate", coarse_run, "--metrics", "knn@3", *again) == 0
    assert json.loads(table.read_text()) == {"knn@3": own["knn@3"]}
    assert cli("evaluate", coarse_run, "--metrics", "knn@k", "knn@9", *again) == 0
    evaluated = json.loads(table.read_text())
    assert sorted(evaluated) == ["knn@1", "knn@3", "knn@5", "knn@7", "knn@9"]
    assert {k: evaluated[k] for k in own if k.startswith("knn@")} == {
        k: v for k, v in own.items() if k.startswith("knn@")
    }


def test_evaluate_refuses_knn_accuracy_it_cannot_score_before_embedding(
    coarse_run, tmp_path, capsys
):
    emb = tmp_path / "emb"
    assert cli("embed", coarse_run, "--out", emb, "--device", "cpu") == 0
    capsys.readouterr()
    saved = (emb / "embeddings.npy", emb / "labels.npy")
    err = one_line_error(capsys, "evaluate", *saved, "--metrics", "knn@3")
    assert "training items" in err and "clusterable evaluate RUN --metrics knn@3" in err
    err = one_line_error(capsys, "evaluate", coarse_run, "--split", "train", "--metrics", "knn@3")
    assert "the train split holds the training items themselves" in err
    training = len(TrainedRun.load(coarse_run, device="cpu").training_items())
    err = one_line_error(capsys, "evaluate", coarse_run, "--metrics", f"knn@{training + 1}")
    assert f"the run has {training} training items to vote; ask K up to {training}" in err


def test_saved_embeddings_of_a_coarse_run_score_its_sub_classes(coarse_run, tmp_path, capsys):
    """`embed` writes fine_labels.npy; `evaluate EMB LABELS` scores the sub-classes from it as
    the run's own table does, and leaves it out, saying so, for labels it does not refine."""
    emb = tmp_path / "emb"
    assert cli("embed", coarse_run, "--out", emb, "--device", "cpu") == 0
    own = json.loads((coarse_run / "test_metrics.json").read_text())
    table = tmp_path / "t.json"
    saved = (emb / "embeddings.npy", emb / "labels.npy")
    # The run's seed (`coarse_run`'s) for the same k-means; saved arrays default to 0.
    assert cli("evaluate", *saved, "--json", table, "--device", "cpu", "--seed", "5") == 0
    evaluated = json.loads(table.read_text())
    subclass = [name for name in own if name.startswith("subclass_")]
    assert len(subclass) == 3
    assert {name: evaluated[name] for name in subclass} == {name: own[name] for name in subclass}
    assert f"sub-classes from {emb / 'fine_labels.npy'}: 10 fine classes" in capsys.readouterr().out
    # Labels the fine classes cross (each digit's items split between two labels): left out.
    fine = np.load(emb / "fine_labels.npy")
    crossing = np.arange(len(fine)) % 2
    np.save(tmp_path / "crossing.npy", crossing)
    assert cli("evaluate", saved[0], tmp_path / "crossing.npy", "--json", table, "--overwrite") == 0
    assert not any(name.startswith("subclass_") for name in json.loads(table.read_text()))
    assert "fine_labels.npy is left out: its classes are not sub-classes" in capsys.readouterr().out
    # The fine classes as the labels: nothing finer, no sub-class scores and no note.
    assert cli("evaluate", saved[0], emb / "fine_labels.npy", "--json", table, "--overwrite") == 0
    assert not any(name.startswith("subclass_") for name in json.loads(table.read_text()))
    assert "fine_labels.npy" not in capsys.readouterr().out


def test_embed_and_a_query_see_the_same_view(trained, tmp_path):
    out, _, device = trained
    assert cli("embed", out, "--out", tmp_path / "emb", "--device", device.type) == 0
    embedded = np.load(tmp_path / "emb" / "embeddings.npy")
    run = TrainedRun.load(out, device=device)
    test = run.split("test")
    if hasattr(test.x, "paths"):
        as_queries = run.embed([str(p) for p in test.x.paths]).embeddings
    else:
        as_queries = run.embed(test.x).embeddings
    np.testing.assert_allclose(as_queries, embedded, rtol=1e-5, atol=1e-6)
    if test.is_query is not None:  # evaluate of the saved arrays reads is_query.npy beside them
        assert (tmp_path / "emb" / "is_query.npy").is_file()
    ids = np.load(tmp_path / "emb" / "ids.npy")
    if hasattr(test.x, "paths"):  # the user's own files, named: embed --items, then cluster --json
        assert ids.tolist() == [str(Path(p).absolute()) for p in test.x.paths]
        mine = tmp_path / "mine"
        files = [str(p) for p in test.x.paths]
        assert cli("embed", out, "--items", *files, "--out", mine, "--device", device.type) == 0
        np.testing.assert_allclose(np.load(mine / "embeddings.npy"), embedded, rtol=1e-5, atol=1e-6)
        assert np.load(mine / "ids.npy").tolist() == ids.tolist()
        table = tmp_path / "clusters.json"
        argv = [mine / "embeddings.npy", "--n-clusters", "2", "--out", tmp_path / "c.npy"]
        assert cli("cluster", *argv, "--json", table, "--device", device.type) == 0
        clustered = json.loads(table.read_text())["items"]
        assert [item["id"] for item in clustered] == ids.tolist()
    else:
        assert ids.tolist() == list(range(len(test)))


def test_saved_embeddings_evaluate_with_the_roles_beside_them(trained, tmp_path):
    """`embed` writes is_query.npy for a query/gallery split; `evaluate EMB LABELS` reads it, so
    the saved arrays score as the run's own table does."""
    out, _, device = trained
    emb = tmp_path / "emb"
    assert cli("embed", out, "--out", emb, "--device", device.type) == 0
    table = tmp_path / "t.json"
    status = cli(
        "evaluate", emb / "embeddings.npy", emb / "labels.npy", "--json", table,
        "--device", device.type,
    )  # fmt: skip
    assert status == 0
    evaluated, own = (
        json.loads(table.read_text()),
        json.loads((out / "test_metrics.json").read_text()),
    )
    for name in ("recall@1", "map@r"):
        assert evaluated[name] == pytest.approx(own[name], abs=1e-6)


def test_index_honours_the_split_for_every_data_form(trained, tmp_path):
    out, data, device = trained
    run = TrainedRun.load(out, device=device)
    test = run.split("test")
    forms = [data] + ([data.removeprefix("folder:")] if data.startswith("folder:") else [])
    for number, form in enumerate(forms):
        index = tmp_path / f"i{number}.npz"
        args = ("--split", "test", "--device", device.type, "--out", index)
        assert cli("index", out, "--data", form, *args) == 0
        from clusterable.index import EmbeddingIndex

        assert len(EmbeddingIndex.load(index)) == len(test)


def test_report_and_export_of_the_run(trained, tmp_path):
    out, _, device = trained
    page = tmp_path / "again.html"
    assert cli("report", out, "--out", page, "--device", device.type) == 0
    assert page.is_file()
    assert cli("export", out, "--format", "torchscript", "--out", tmp_path / "m.pt") == 0
    described = json.loads((tmp_path / "m.pt.json").read_text())["preprocessing"]
    run = TrainedRun.load(out, device="cpu")
    assert described == run.view_description()
    if run.is_image_model:
        assert described["size"] == list(run.input_shape[1:])


def test_plot_writes_into_the_run_folder(trained, tmp_path, monkeypatch):
    out, _, device = trained
    monkeypatch.chdir(tmp_path)
    assert cli("plot", out, "--device", device.type) == 0
    assert (out / "plots" / "tsne.png").is_file()
    assert not (tmp_path / "plots").exists()


def test_a_failing_report_never_fails_the_training(tmp_path, monkeypatch, capsys):
    import clusterable.reports

    def broken(*args, **kwargs):
        raise ValueError("the page could not be drawn")

    monkeypatch.setattr(clusterable.reports, "write_run_report", broken)
    out = tmp_path / "run"
    status = cli(
        "train", "--data", "digits", "--epochs", "1", "--embedding-dim", "8", "--out", out,
        "--no-progress", "--device", "cpu",
    )  # fmt: skip
    assert status == 0 and (out / "test_metrics.json").is_file()
    err = capsys.readouterr().err
    assert "the run trained, but its report failed (the page could not be drawn)" in err
    assert f"clusterable report {out}" in err
