"""TrainedRun: a run's model embeds datasets, image folders, tables and arrays alike."""

from __future__ import annotations

import csv
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from clusterable.data import LabelledDataset, load_dataset
from clusterable.device import detect_device
from clusterable.index import model_checksum
from clusterable.recipe import RunSpec, load_trained, train_run
from clusterable.train import embed_dataset
from clusterable.train.config import TrainConfig
from clusterable.trained_run import TrainedRun


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("embedder") / "run"
    spec = RunSpec(data="digits", model="mlp", loss="contrastive", embedding_dim=8)
    train_run(spec, TrainConfig(epochs=1, batch_size=64, progress=False, eval_every=0), out=out)
    return out


@pytest.fixture(scope="module")
def test_split():
    return load_dataset("digits", split="test")


def save_pngs(folder, images, labels) -> list:
    """Digits (values 0..1, ``(1, 8, 8)``) as 8-bit grayscale PNGs in class sub-folders."""
    paths = []
    for i, (image, label) in enumerate(zip(images, labels, strict=True)):
        path = folder / f"class-{label}" / f"{i:03d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.round(image[0] * 255).astype(np.uint8), mode="L").save(path)
        paths.append(path)
    return paths


def test_from_run_embeds_a_dataset_as_the_trainer_does(run, test_split):
    embedder = TrainedRun.load(run, device="cpu")
    model = load_trained(run)[0]
    expected, _ = embed_dataset(model, test_split)
    items = embedder.embed("digits", split="test", batch_size=37)
    np.testing.assert_allclose(items.embeddings, expected, rtol=1e-6, atol=1e-6)
    names = np.array(test_split.class_names)[test_split.labels]
    assert items.labels.tolist() == names.tolist()
    assert items.ids.tolist() == list(range(len(test_split)))
    assert embedder.model_id == model_checksum(model.state_dict())
    assert embedder.folder == run.resolve()


@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("batch_size", 0, "batch_size=0 must be an integer of at least 1"),
        ("batch_size", -8, "batch_size=-8 must be an integer of at least 1"),
        ("batch_size", 2.5, "batch_size=2.5 is not an integer"),
        ("batch_size", "64", "batch_size='64' is not a number"),
        ("batch_size", True, "batch_size=True is not a number"),
        ("workers", -1, "workers=-1 must be an integer of at least 0"),
    ],
)
def test_embed_refuses_a_batch_size_that_is_no_count_before_reading_items(
    run, monkeypatch, setting, value, says
):
    """One line naming the setting, before the items are read (torch's sampler would refuse
    ``batch_size=0`` only once the data set is loaded, in its own words)."""
    embedder = TrainedRun.load(run, device="cpu")

    def read(*args, **kwargs):
        raise AssertionError("the items were read before the refusal")

    monkeypatch.setattr(TrainedRun, "_as_dataset", read)
    with pytest.raises(ValueError, match=f"^TrainedRun.embed {says}") as caught:
        embedder.embed("digits", split="test", **{setting: value})
    assert "\n" not in str(caught.value)


def test_array_tensor_and_single_item_give_the_same_embeddings(run, test_split):
    embedder = TrainedRun.load(run, device="cpu")
    x = test_split.x[:10]
    from_array = embedder.embed(x).embeddings
    np.testing.assert_array_equal(embedder.embed(torch.from_numpy(x)).embeddings, from_array)
    np.testing.assert_allclose(embedder.embed(x[3]).embeddings, from_array[3:4], atol=1e-6)
    assert from_array.shape == (10, 8) and from_array.dtype == np.float32


def test_an_image_folder_is_read_with_the_runs_preprocessing(run, test_split, tmp_path):
    embedder = TrainedRun.load(run, device="cpu")
    x = np.round(test_split.x[:6] * 255) / 255  # what 8-bit PNGs can hold
    paths = save_pngs(tmp_path / "photos", x, test_split.labels[:6])
    items = embedder.embed(tmp_path / "photos")
    order = np.argsort([str(p) for p in paths])
    np.testing.assert_allclose(
        items.embeddings, embedder.embed(x[order]).embeddings, rtol=1e-5, atol=1e-6
    )
    assert items.ids.tolist() == sorted(str(p) for p in paths)
    assert items.labels.tolist() == [p.parent.name for p in sorted(paths)]
    one = embedder.embed(paths[0])
    assert one.ids.tolist() == [str(paths[0])] and one.labels is None


def test_a_table_is_read_row_by_row(run, test_split, tmp_path):
    embedder = TrainedRun.load(run, device="cpu")
    x = test_split.x[:5]
    table = tmp_path / "rows.csv"
    with table.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["label", *[f"p{i}" for i in range(64)]])
        for label, row in zip(test_split.labels[:5], x.reshape(5, 64), strict=True):
            writer.writerow([label, *row.tolist()])
    items = embedder.embed(table)
    np.testing.assert_allclose(items.embeddings, embedder.embed(x).embeddings, atol=1e-6)
    np.save(tmp_path / "items.npy", x)
    np.testing.assert_array_equal(
        embedder.embed(tmp_path / "items.npy").embeddings, embedder.embed(x).embeddings
    )


def test_table_path_is_the_table_in_the_runs_view(run, test_split, tmp_path):
    """``table:PATH``, as the commands' help spells it, reads the table as a data set (its
    labels, its splits) with rows of the run's width as items of its shape, as a bare table path
    is read; the audit found it refused by index, search, classify and assign ("array file
    table:... does not exist") and by ``evaluate --data`` (rows of shape (64,))."""
    embedder = TrainedRun.load(run, device="cpu")
    x = test_split.x[:40]
    np.save(tmp_path / "rows.npy", x.reshape(40, 64))
    np.save(tmp_path / "rows_labels.npy", test_split.labels[:40])
    named = embedder.embed(f"table:{tmp_path / 'rows.npy'}")
    np.testing.assert_allclose(named.embeddings, embedder.embed(x).embeddings, atol=1e-6)
    assert named.labels.tolist() == [str(v) for v in test_split.labels[:40]]
    bare = embedder.embed(tmp_path / "rows.npy")
    np.testing.assert_array_equal(bare.embeddings, named.embeddings)
    assert embedder.split("all", data=f"table:{tmp_path / 'rows.npy'}").input_shape == (1, 8, 8)
    with pytest.raises(FileNotFoundError):
        embedder.embed(f"table:{tmp_path / 'absent.npy'}")


def test_wrong_shapes_say_what_the_run_expects(run, tmp_path):
    embedder = TrainedRun.load(run, device="cpu")
    with pytest.raises(ValueError, match=r"expects grayscale images of 8x8 pixels \(1x8x8\)"):
        embedder.embed(np.zeros((4, 3, 8, 8), np.float32))
    with pytest.raises(ValueError, match="NaN"):
        embedder.embed(np.full((2, 1, 8, 8), np.nan, np.float32))
    wide = tmp_path / "wide.npz"
    np.savez(wide, x=np.zeros((3, 10), np.float32), y=np.arange(3))
    with pytest.raises(ValueError, match=r"10 feature columns .* give 64"):
        embedder.embed(wide)
    with pytest.raises(ValueError, match=r"shape \(1, 28, 28\) but the run expects"):
        embedder.embed(LabelledDataset("other", np.zeros((3, 1, 28, 28), np.float32), [0, 1, 2]))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        embedder.embed(tmp_path / "missing.png")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no image files"):
        embedder.embed(tmp_path / "empty")


def test_a_vector_model_refuses_images(tmp_path):
    embedder = TrainedRun(torch.nn.Linear(5, 2), (5,), device="cpu")
    Image.new("L", (5, 5)).save(tmp_path / "a.png")
    with pytest.raises(ValueError, match=r"takes items of shape \(5\), not images"):
        embedder.embed(tmp_path / "a.png")


def test_the_embedder_follows_the_device_rule(device):
    embedder = TrainedRun(torch.nn.Linear(5, 2), (5,), device=device)
    assert next(embedder.model.parameters()).device.type == device.type
    auto = TrainedRun(torch.nn.Linear(5, 2), (5,))  # "auto": the detection, nothing ambient
    assert auto.device.type == detect_device().type
    items = embedder.embed(np.ones((3, 5), dtype=np.float32), progress=False)
    assert isinstance(items.embeddings, np.ndarray) and items.embeddings.shape == (3, 2)


def test_an_image_backbones_run_embeds_new_images_in_its_evaluation_view(tmp_path):
    from clusterable.data import ImageFiles
    from clusterable.data.transforms import backbone_preprocessing
    from clusterable.recipe import RunSpec

    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (40, 96, 3), dtype=np.uint8)).save(tmp_path / "wide.png")
    flat = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 4))
    spec = RunSpec(model="torchvision:resnet18", image_size=32)
    embedder = TrainedRun(flat, (3, 32, 32), spec=spec, device="cpu")
    got = embedder.embed(tmp_path / "wide.png", progress=False).embeddings
    view = ImageFiles(
        [tmp_path / "wide.png"], 32, 3, preprocessing=backbone_preprocessing(spec.model)
    )[0]
    stretched = ImageFiles([tmp_path / "wide.png"], 32, 3)[0]
    with torch.no_grad():
        expected = flat(torch.from_numpy(view)[None]).numpy()
        other = flat(torch.from_numpy(stretched)[None]).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got, other, atol=1e-4)  # not the stretch of a small model's run


def test_a_backbone_runs_split_is_the_view_of_its_test_table(tmp_path):
    """A backbone run's split is read by RunSpec.load (its size and centre crop), and the same
    photos given as files are embedded identically."""
    from clusterable.data.transforms import backbone_preprocessing

    for c in range(2):
        for i in range(4):
            path = tmp_path / "photos" / f"c{c}" / f"{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            pixels = np.random.default_rng(4 * c + i).integers(0, 255, (50, 90, 3))
            Image.fromarray(pixels.astype(np.uint8)).save(path)
    spec = RunSpec(data=f"folder:{tmp_path / 'photos'}", model="timm:resnet18", image_size=32)
    flat = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 4))
    run = TrainedRun(flat, (3, 32, 32), spec=spec, device="cpu")
    test = run.split("test")
    assert test.input_shape == (3, 32, 32)
    assert test.x.preprocessing == backbone_preprocessing(spec.model)
    np.testing.assert_array_equal(test.x[0], spec.load("test").x[0])
    as_files = run.embed([str(p) for p in test.x.paths], progress=False).embeddings
    np.testing.assert_array_equal(as_files, run.embed(test, progress=False).embeddings)


def test_training_items_are_the_items_the_run_trained_on(run, tmp_path):
    """The reference of the test table's k-NN accuracy: the train split less the validation
    items held out with the run's seed (the whole split for an unsupervised run, which holds
    none out); a checkpoint copied out of its run has no seed to rebuild them with."""
    from clusterable.recipe import split_validation

    trained = TrainedRun.load(run, device="cpu")
    whole = trained.split("train")
    kept, held_out = split_validation(whole, trained.spec.val_fraction, trained.seed)
    items = trained.training_items()
    assert len(items) == len(kept) == len(whole) - len(held_out) and len(held_out) > 0
    np.testing.assert_array_equal(items.x, kept.x)
    spec = RunSpec(data="digits", model="mlp", loss="opml", unsupervised=True, embedding_dim=8)
    model = load_trained(run).model
    unsupervised = TrainedRun(model, (1, 8, 8), spec=spec, config={"seed": 0}, device="cpu")
    assert len(unsupervised.training_items()) == len(whole)
    shutil.copytree(next((run / "checkpoints").glob("epoch-*")), tmp_path / "lone")
    lone = TrainedRun.load(tmp_path / "lone", device="cpu")
    assert lone.training_items() is None
    reference, notes = lone.knn_reference(lone.split("test"))
    assert reference is None and "no run.json" in notes[0]


def test_a_tensor_fresh_from_a_model_is_embedded_as_its_values(run, test_split):
    """A tensor that requires grad was torch's "Can't call numpy() on Tensor that requires
    grad", a bfloat16 one "Got unsupported ScalarType BFloat16" (and a CUDA one failed too)."""
    embedder = TrainedRun.load(run, device="cpu")
    x = torch.from_numpy(test_split.x[:4])
    want = embedder.embed(x).embeddings
    np.testing.assert_array_equal(embedder.embed(x.clone().requires_grad_()).embeddings, want)
    halves = x.bfloat16()
    np.testing.assert_array_equal(
        embedder.embed(halves).embeddings, embedder.embed(halves.float()).embeddings
    )


@pytest.mark.parametrize(
    ("items", "error", "message"),
    [
        (np.full((2, 1, 8, 8), "a"), ValueError, r"^the array must hold numbers, got dtype <U1$"),
        ([[0.0] * 64], TypeError, r"^a list given to embed holds image paths, got a list; pass"),
        (None, TypeError, r"^cannot embed None \(NoneType\): give a dataset"),
        (5, TypeError, r"^cannot embed 5 \(int\): give a dataset"),
    ],
)
def test_items_of_no_kind_embed_takes_say_what_it_takes(run, items, error, message):
    """These were numpy's "could not convert string to float" and pathlib's "expected str,
    bytes or os.PathLike object"."""
    with pytest.raises(error, match=message):
        TrainedRun.load(run, device="cpu").embed(items)
