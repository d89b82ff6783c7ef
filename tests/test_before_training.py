"""The test table before training (``train --before-training``): the representation a run starts
from, scored as the trained model is, kept in the run folder and shown beside the trained table."""

from __future__ import annotations

import json
import types
from contextlib import redirect_stdout
from dataclasses import replace
from io import StringIO

import numpy as np
import pytest
import torch
from sklearn.neighbors import KNeighborsClassifier
from test_trained_run_stored_view import (
    MODEL,
    TRAINED_WITH,
    _TinyClassifier,
    install_torchvision,
    write_photos,
)

from clusterable.before_training import RAW_WIDTH_LIMIT, BeforeTraining, starting_representation
from clusterable.cli import main
from clusterable.data import load_dataset
from clusterable.evaluate import evaluate_embeddings
from clusterable.metric_table import format_metric_table
from clusterable.models import EmbeddingNet, build_model
from clusterable.recipe import RunSpec, build, train_run
from clusterable.train.config import TrainConfig
from clusterable.train.run_folder import BEFORE_TRAINING
from clusterable.trained_run import TrainedRun
from clusterable.unsupervised import backbone_features


def digits_run(epochs: int = 1) -> list[str]:
    """``train``'s flags of a small digits run of the bundled MLP."""
    return ["--data", "digits", "--model", "mlp", "--embedding-dim", "8", "--epochs", str(epochs),
            "--batch-size", "64", "--no-progress", "--eval-every", "0"]  # fmt: skip


def unit_rows(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def trained_digits(tmp_path_factory):
    """A digits run of the bundled MLP, one epoch, and what ``train`` printed."""
    out = tmp_path_factory.mktemp("before") / "run"
    printed = StringIO()
    with redirect_stdout(printed):
        assert main(["train", *digits_run(), "--out", str(out)]) == 0
    return out, printed.getvalue()


def test_a_bundled_model_run_scores_its_raw_inputs_as_the_trained_model_is_scored(trained_digits):
    out, printed = trained_digits
    before = BeforeTraining.load(out)
    assert before is not None
    assert before.representation == "the raw inputs, 64 numbers an item, each l2-normalised"
    # The same test items and k-NN voters as the trained table, on the raw digits, by hand.
    run = TrainedRun.load(out, device="cpu")
    test, voters = run.split("test"), run.training_items()
    assert voters is not None
    x_test, y_test = test.features(flat=True)
    x_voters, y_voters = voters.features(flat=True)
    recall = evaluate_embeddings(unit_rows(x_test), y_test, metrics=("recall@k",), ks=(1,))
    assert before.metrics["recall@1"] == pytest.approx(recall["recall@1"], abs=1e-12)
    for k in (1, 3, 5, 7):
        vote = KNeighborsClassifier(n_neighbors=k).fit(unit_rows(x_voters), y_voters)
        accuracy = (vote.predict(unit_rows(x_test)) == y_test).mean()
        # ties aside (a tie goes to the nearest voter here), the same majority
        assert before.metrics[f"knn@{k}"] == pytest.approx(accuracy, abs=2 / len(y_test))
    trained = json.loads((out / "test_metrics.json").read_text())
    assert set(before.metrics) <= set(trained)
    # Both columns, each metric's row with its two values.
    assert "trained  before training" in printed
    row = next(line for line in printed.splitlines() if line.startswith("  recall@1"))
    assert row.split()[-4:] == [
        f"{100 * trained['recall@1']:.2f}",
        "%",
        f"{100 * before.metrics['recall@1']:.2f}",
        "%",
    ]
    assert "note: before training: the raw inputs, 64 numbers an item" in printed


def test_the_report_shows_the_table_before_training_beside_the_trained_one(trained_digits):
    out, _ = trained_digits
    page = (out / "report.html").read_text()
    before = BeforeTraining.load(out)
    assert "before training, %" in page
    assert f"<td>{100 * before.metrics['map@r']:.2f}</td>" in page
    assert "Before training: the raw inputs, 64 numbers an item" in page


def losses(run) -> list[float]:
    """Every step's loss in a run's log."""
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    return [record["loss"] for record in records if record["event"] == "step"]


def test_no_before_training_scores_nothing_and_the_training_is_the_same(
    trained_digits, tmp_path, capsys
):
    out = tmp_path / "run"
    assert main(["train", *digits_run(), "--no-before-training", "--out", str(out)]) == 0
    assert not (out / BEFORE_TRAINING).exists()
    assert "before training" not in capsys.readouterr().out
    assert TrainedRun.load(out, device="cpu").before_training is None
    # Scoring the start draws no number the training draws: the same steps either way.
    scored, _ = trained_digits
    assert losses(out) == losses(scored)


def test_a_resumed_run_reads_its_table_back_and_an_overwritten_one_scores_afresh(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *digits_run(), "--out", str(out)]) == 0
    kept = BeforeTraining.load(out)
    marked = BeforeTraining("as kept in the run folder", {**kept.metrics, "recall@1": 0.5})
    marked.save(out)
    capsys.readouterr()
    assert main(["train", *digits_run(epochs=2), "--out", str(out), "--resume"]) == 0
    printed = capsys.readouterr().out
    assert "note: before training: as kept in the run folder" in printed
    assert BeforeTraining.load(out) == marked
    # A new run in the same folder never shows the old run's table.
    assert main(["train", *digits_run(), "--out", str(out), "--overwrite"]) == 0
    assert BeforeTraining.load(out) == kept
    assert "as kept in the run folder" not in capsys.readouterr().out


@pytest.fixture
def pretrained_photos(tmp_path, monkeypatch):
    """Photos of two classes, a stand-in torchvision backbone, and a weights file for it."""
    rng = np.random.default_rng(0)

    def darker(c, i):  # class 1 darker than class 0
        return rng.integers(0, 255, (40, 40, 3)) // (1 + c)

    photos = write_photos(tmp_path / "photos", darker, {"train": 8, "test": 4})
    install_torchvision(monkeypatch, **TRAINED_WITH)
    torch.manual_seed(1)
    weights = tmp_path / "weights.pth"
    torch.save(_TinyClassifier().state_dict(), weights)
    return photos, weights


def test_a_pretrained_backbone_is_scored_on_its_own_features_before_the_first_step(
    pretrained_photos, tmp_path
):
    photos, weights = pretrained_photos
    spec = RunSpec(
        data=f"folder:{photos}",
        model=MODEL,
        loss="contrastive",
        embedding_dim=4,
        val_fraction=0,
        model_args={"weights": str(weights)},
    )
    config = TrainConfig(
        epochs=3, batch_size=8, lr=0.05, device="cpu", workers=0, eval_every=0, progress=False
    )
    out = tmp_path / "run"
    train_run(spec, config, out=out)
    before = BeforeTraining.load(out)
    assert before.representation == (
        "the pretrained features of torchvision:tiny, 4-d, each l2-normalised"
    )
    # The weights file's features (a model built afresh from it), not the trained backbone's.
    test = spec.load("test")
    started = build(spec, test.input_shape, 2).model.backbone
    features = backbone_features(started, test, "cpu")
    expected = evaluate_embeddings(features, test.labels, metrics=("recall@k", "map@r"), ks=(1,))
    assert before.metrics["recall@1"] == pytest.approx(expected["recall@1"], abs=1e-12)
    assert before.metrics["map@r"] == pytest.approx(expected["map@r"], abs=1e-12)
    trained = TrainedRun.load(out, device="cpu").model.backbone
    after = backbone_features(trained, test, "cpu")
    assert not np.allclose(after, features, atol=1e-3)  # the run trained its backbone


def test_where_a_run_starts_from_nothing_worth_a_row_there_is_no_table():
    net = EmbeddingNet(torch.nn.Flatten(), 3 * 32 * 32, 4)
    image_backbone = types.SimpleNamespace(model="timm:resnet18", model_args={})
    assert starting_representation(image_backbone, net, (3, 32, 32)) is None  # random weights
    bundled = types.SimpleNamespace(model="corel-cnn", model_args={})
    assert starting_representation(bundled, net, (3, 64, 64)) is None  # 12,288 numbers: a photo
    wide = (1, RAW_WIDTH_LIMIT + 1)
    assert starting_representation(bundled, net, wide) is None
    narrow = starting_representation(bundled, net, (1, RAW_WIDTH_LIMIT))
    assert narrow is not None and narrow[1].startswith(f"the raw inputs, {RAW_WIDTH_LIMIT} numbers")


def test_an_image_backbone_with_weights_is_represented_by_its_unit_features():
    model = build_model("mlp", (1, 8, 8), 4)
    spec = types.SimpleNamespace(model="timm:resnet18", model_args={"weights": "w.safetensors"})
    represent, words = starting_representation(spec, model, (1, 8, 8))
    items = load_dataset("digits", split="test").subset(np.arange(30))
    features = represent(items)
    with torch.no_grad():
        outputs = model.backbone(torch.as_tensor(items.features()[0])).numpy()
    np.testing.assert_allclose(features, unit_rows(outputs), rtol=1e-5)
    assert words == f"the pretrained features of timm:resnet18, {model.feature_dim}-d, each " + (
        "l2-normalised"
    )


def test_the_table_beside_another_lines_up_and_marks_what_it_lacks():
    trained = {"recall@1": 0.9, "classification_accuracy": 0.75}
    beside = ("trained", "before training", {"recall@1": 0.5})
    text = format_metric_table(trained, "heading", notes=["a note"], beside=beside)
    lines = text.splitlines()
    assert lines[0] == "heading" and lines[-1] == "  note: a note"
    titles, recall, accuracy = lines[1:4]
    assert titles.endswith("trained  before training")
    assert recall.endswith("90.00 %          50.00 %")
    assert accuracy.endswith("75.00 %                -")
    assert len({len(line) for line in (titles, recall, accuracy)}) == 1


# ---------------------------------------------------------------------------------------------
# A run of no epochs: the pretrained backbone's features, a run for every verb


def untrained_run(photos, weights, out, **settings):
    """``train --epochs 0`` of the stand-in backbone and its weights file, in ``out``."""
    settings = {"loss": "contrastive", **settings}
    spec = RunSpec(
        data=f"folder:{photos}", model=MODEL, model_args={"weights": str(weights)}, **settings
    )
    config = TrainConfig(epochs=0, batch_size=8, device="cpu", workers=0, progress=False)
    train_run(spec, config, out=out)
    return spec


def test_a_run_of_no_epochs_embeds_with_the_pretrained_features_for_every_verb(
    pretrained_photos, tmp_path, capsys
):
    photos, weights = pretrained_photos
    out = tmp_path / "run"
    spec = untrained_run(photos, weights, out)
    run = TrainedRun.load(out, device="cpu")
    assert (run.spec.embedding_dim, run.spec.normalize) == (4, True)  # the features' width
    test = run.split("test")
    started = build(spec, test.input_shape, 2).model.backbone  # the weights file's own
    features = backbone_features(started, test, "cpu")
    np.testing.assert_allclose(run.embed(test).embeddings, features, atol=1e-6)
    table = json.loads((out / "test_metrics.json").read_text())
    expected = evaluate_embeddings(features, test.labels, metrics=("recall@k", "map@r"), ks=(1,))
    assert table["map@r"] == pytest.approx(expected["map@r"], abs=1e-6)
    assert not (out / BEFORE_TRAINING).exists()  # the table is the one before training
    # The verbs after training take it as any run.
    capsys.readouterr()
    assert main(["evaluate", str(out), "--device", "cpu"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "MAP@R" in line)
    assert row.split()[-2] == f"{100 * table['map@r']:.2f}"
    index = tmp_path / "index.npz"
    assert main(["index", str(out), "--out", str(index), "--device", "cpu"]) == 0
    photo = sorted((photos / "test" / "c1").glob("*.png"))[0]
    capsys.readouterr()
    assert main(["search", str(index), str(photo), "-k", "1", "--device", "cpu"]) == 0
    nearest = capsys.readouterr().out.splitlines()[-1].split()
    assert nearest[1] == "0.0000" and nearest[2] == str(photo)


def test_a_run_of_no_epochs_goes_on_training_when_resumed(pretrained_photos, tmp_path):
    photos, weights = pretrained_photos
    out = tmp_path / "run"
    spec = untrained_run(photos, weights, out)
    config = TrainConfig(epochs=1, batch_size=8, device="cpu", workers=0, progress=False)
    train_run(replace(spec, embedding_dim=4, normalize=True), config, out=out, resume=True)
    assert losses(out)  # it trained
    assert TrainedRun.load(out, device="cpu").checkpoint.name == "epoch-0001"


def test_no_epochs_of_a_model_without_pretrained_weights_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--data", "digits", "--epochs", "0", "--model", "mlp",
              "--out", str(tmp_path / "run")])  # fmt: skip
    assert (
        "--epochs 0 trains nothing: the run would keep the starting model, and mlp starts "
        + ("from its own random weights")
        in capsys.readouterr().err
    )
    assert not (tmp_path / "run").exists()


def test_no_epochs_with_another_embedding_size_is_refused(pretrained_photos, tmp_path):
    photos, weights = pretrained_photos
    with pytest.raises(ValueError, match="with epochs 0 the embedding is torchvision:tiny's own 4"):
        untrained_run(photos, weights, tmp_path / "run", embedding_dim=7)
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_a_run_of_no_epochs_reports_no_accuracy_of_a_classifier_it_never_trained(
    pretrained_photos, tmp_path, capsys
):
    photos, weights = pretrained_photos
    out = tmp_path / "run"
    untrained_run(photos, weights, out, loss="cross-entropy")
    assert "classification_accuracy" not in json.loads((out / "test_metrics.json").read_text())
    assert TrainedRun.load(out, device="cpu").loss is None
    capsys.readouterr()
    assert main(["evaluate", str(out), "--device", "cpu"]) == 0
    assert "classification accuracy" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["evaluate", str(out), "--metrics", "classification_accuracy", "--device", "cpu"])
    assert "and this run trained none (a run of no epochs" in capsys.readouterr().err
