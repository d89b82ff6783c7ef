"""Photos given to a run trained on arrays: ``folder:PATH`` is read in the run's item view, as the
bare folder is (the audit found ``embed RUN --data folder:PATH``, ``evaluate`` and ``index``
refused what ``search`` and ``classify`` embedded: "folder:... has items of shape (3, 30, 40) in
the run's view, which its model cannot embed")."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from test_cli_use import one_line_error
from test_trained_run import run  # noqa: F401  (tests/: a digits run, items of shape (1, 8, 8))

from clusterable.cli import main
from clusterable.data import load_dataset
from clusterable.recipe import RunSpec, train_run
from clusterable.train.config import TrainConfig
from clusterable.trained_run import TrainedRun


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """A folder data set of RGB JPEGs 40 pixels wide and 30 high: two classes in train/ and
    test/."""
    root = tmp_path_factory.mktemp("photos") / "photos"
    rng = np.random.default_rng(0)
    for part in ("train", "test"):
        for name in ("boot", "shirt"):
            for i in range(3):
                path = root / part / name / f"{i}.jpg"
                path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)).save(path)
    return root


@pytest.fixture(scope="module")
def table_run(tmp_path_factory):
    """A run trained on a table of the digits' 64 pixel values: a model of feature rows."""
    folder = tmp_path_factory.mktemp("table-run")
    digits = load_dataset("digits", split="all")
    np.save(folder / "rows.npy", digits.x.reshape(len(digits), 64))
    np.save(folder / "rows_labels.npy", digits.labels)
    spec = RunSpec(data=f"table:{folder / 'rows.npy'}", loss="contrastive", embedding_dim=8)
    config = TrainConfig(epochs=1, batch_size=64, progress=False, eval_every=0)
    train_run(spec, config, out=folder / "run")
    return folder / "run"


def test_a_folder_data_set_takes_the_runs_item_view(run, photos):  # noqa: F811
    embedder = TrainedRun.load(run, device="cpu")
    split = embedder.split("test", data=f"folder:{photos}")
    assert split.input_shape == embedder.input_shape == (1, 8, 8)
    files = embedder.image_files(split.x.paths)
    assert (split.x.height, split.x.width, split.x.channels) == (files.height, files.width, 1)
    assert split.x.preprocessing is files.preprocessing is None
    np.testing.assert_array_equal(split.x[0], files[0])
    assert split.class_names == ["boot", "shirt"] and split.labels.tolist() == [0] * 3 + [1] * 3


def test_folder_data_set_and_bare_folder_embed_alike(run, photos):  # noqa: F811
    embedder = TrainedRun.load(run, device="cpu")
    named = embedder.embed(f"folder:{photos}", split="test", progress=False)
    bare = embedder.embed(photos / "test", progress=False)
    assert named.ids.tolist() == bare.ids.tolist()
    assert named.ids[0] == str((photos / "test" / "boot" / "0.jpg").resolve())
    np.testing.assert_array_equal(named.embeddings, bare.embeddings)
    assert named.labels.tolist() == bare.labels.tolist()
    every = embedder.embed(f"folder:{photos}", progress=False)  # the all split: train, then test
    files = embedder.embed(list(every.ids), progress=False)
    np.testing.assert_array_equal(every.embeddings, files.embeddings)


def test_embed_evaluate_and_index_take_a_folder_data_set(run, photos, tmp_path):  # noqa: F811
    data = ["--data", f"folder:{photos}", "--device", "cpu"]
    out = tmp_path / "emb"
    assert main(["embed", str(run), *data, "--split", "test", "--out", str(out)]) == 0
    bare = TrainedRun.load(run, device="cpu").embed(photos / "test", progress=False)
    np.testing.assert_array_equal(np.load(out / "embeddings.npy"), bare.embeddings)
    assert main(["evaluate", str(run), *data]) == 0
    assert main(["index", str(run), *data, "--out", str(tmp_path / "index.npz")]) == 0


def test_a_model_of_feature_rows_refuses_photos_either_way(table_run, photos, tmp_path, capsys):
    embedder = TrainedRun.load(table_run, device="cpu")
    assert embedder.input_shape == (64,)
    with pytest.raises(ValueError, match=r"items of shape \(64,\), not images; folder:"):
        embedder.split("test", data=f"folder:{photos}")
    with pytest.raises(ValueError, match=r"takes items of shape \(64\), not images"):
        embedder.embed(photos / "test")
    flags = ["--data", f"folder:{photos}", "--split", "test", "--out", str(tmp_path / "emb")]
    err = one_line_error(capsys, ["embed", str(table_run), *flags], "embed")
    assert "holds images, which its model cannot embed" in err


def test_a_folders_images_in_nested_folders_take_their_class_folders_label(run, tmp_path):  # noqa: F811
    # The folder data set labels an image by its class folder, however deep it lies; a folder
    # given as items labelled it by the folder just above it, making "2023 trip" a class.
    rng = np.random.default_rng(0)
    for name in ("boot/a.jpg", "boot/2023 trip/day 1/b.jpg", "boot/2023 trip/c.jpg", "shirt/d.jpg"):
        (tmp_path / "photos" / name).parent.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(tmp_path / "photos" / name)
    embedder = TrainedRun.load(run, device="cpu")
    bare = embedder.embed(tmp_path / "photos", progress=False)
    named = embedder.embed(f"folder:{tmp_path / 'photos'}", split="all", progress=False)
    assert bare.ids.tolist() == named.ids.tolist()
    assert bare.labels.tolist() == named.labels.tolist() == ["boot"] * 3 + ["shirt"]
