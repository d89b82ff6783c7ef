"""A small folder of photos, as a new user brings it: it trains, keeps its epoch, and its tables
leave out the neighbour counts the few photos cannot answer."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from clusterable.metric_table import format_metric_table
from clusterable.recipe import RunSpec, train_run
from clusterable.train import TrainConfig
from clusterable.train.answerable import ks_within


def write_photos(root, classes=4, per_class=6, size=(120, 90), seed=0):
    """``classes`` sub-folders of ``per_class`` JPEGs, each class its own colour."""
    rng = np.random.default_rng(seed)
    for c in range(classes):
        folder = root / f"class{c}"
        folder.mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.integers(0, 60, (size[1], size[0], 3)) + 60 * np.eye(3, dtype=int)[c % 3]
            Image.fromarray(pixels.astype(np.uint8)).save(folder / f"{i}.jpg", quality=90)
    return root


def test_ks_beyond_the_candidates_are_left_out_with_a_note():
    assert ks_within((1, 2, 4, 8), 8) == ((1, 2, 4, 8), None)
    kept, note = ks_within((1, 2, 4, 8), 3)
    assert kept == (1, 2) and "4, 8" in note and "3 candidate" in note
    table = format_metric_table({"recall@1": 0.5}, "test", notes=[note])
    assert table.splitlines()[-1] == f"  note: {note}"


@pytest.mark.parametrize("val_fraction", [0.2, 0.0])
def test_a_folder_of_six_photos_per_class_trains_one_epoch_and_keeps_it(tmp_path, val_fraction):
    photos = write_photos(tmp_path / "photos")
    spec = RunSpec(data=f"folder:{photos}", model="corel-cnn", val_fraction=val_fraction)
    config = TrainConfig(epochs=1, batch_size=8, device="cpu", progress=False, verbose=True)
    result, metrics = train_run(spec, config, out=tmp_path / "run")
    assert (tmp_path / "run" / "checkpoints" / "epoch-0001" / "weights.safetensors").is_file()
    assert result.checkpoint is not None
    assert "recall@1" in metrics and "recall@8" not in metrics  # 8 test photos: 7 candidates
    assert json.loads((tmp_path / "run" / "test_metrics.json").read_text()) == metrics


def test_photos_are_resized_to_the_documented_default(tmp_path):
    photos = write_photos(tmp_path / "photos", classes=2, per_class=3)
    train = RunSpec(data=f"folder:{photos}").load("train")
    assert train.input_shape == (3, 64, 64)


def test_an_unsupervised_run_of_a_backbone_clusters_its_features(tmp_path, capsys):
    """OPML on photos (Sec. V-D): the first pseudo-labels are t-SNE + AAS of the starting
    backbone's features, 512 a photo for a ResNet-18, not its 3 x 64 x 64 pixels."""
    pytest.importorskip("torchvision")
    photos = write_photos(tmp_path / "photos", classes=3, per_class=12)
    spec = RunSpec(
        data=f"folder:{photos}", model="torchvision:resnet18", loss="opml", unsupervised=True,
        embedding_dim=16, loss_args={"metric_dim": 8},
    )  # fmt: skip
    config = TrainConfig(epochs=1, batch_size=16, device="cpu", progress=False, verbose=True)
    result, metrics = train_run(spec, config, out=tmp_path / "run")
    assert result.checkpoint is not None and "nmi" in metrics
    banner = capsys.readouterr().out
    assert "pseudo-labels of t-SNE + AAS of the backbone's features" in banner
