"""train -> export -> the exported file run by its own runtime -> the same embeddings as `embed`.

For each built-in model family, on digits (arrays) and on a folder of JPEG photos: the items are
prepared by hand, with PIL and numpy only, following the steps the export's description JSON
gives, and fed to onnxruntime and to ``torch.jit.load`` at batch sizes 1 and 7 (neither the
trace's nor the parity check's). One tiny run per case, trained once for the module.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from clusterable.cli import main
from clusterable.export import PARITY_BATCH, SUFFIX, TRACE_BATCH
from clusterable.models import available_models

#: Case -> the `clusterable train` flags of its run (a photos case besides ``--data
#: folder:PHOTOS``); between them every built-in model family, both kinds of data, both channel
#: counts, an autoencoder run and l2-normalised runs.
CASES = {
    "digits-mlp-normalize": "--data digits --model mlp --normalize",
    "photos-corel-cnn-rgb": "--model corel-cnn --image-size 24",
    "photos-lenet-grayscale-normalize": "--model lenet --channels 1 --image-size 24 --normalize",
    "photos-msdnn-cnn-autoencoder": "--model msdnn-cnn --image-size 20 --autoencoder",
}

#: Batch sizes the exported files are run at.
BATCHES = (1, 7)


def write_shape_photos(root: Path, classes: int = 5, per_class: int = 10) -> Path:
    """``root/classC/N.jpg``: a coloured shape per class on a random background, each photo
    of its own size between 48 and 100 px, neither square nor the runs' image size."""
    rng = np.random.default_rng(0)
    colours = [(220, 30, 30), (30, 200, 40), (40, 60, 220), (230, 200, 20), (160, 40, 200)]
    for c in range(classes):
        folder = root / f"class{c}"
        folder.mkdir(parents=True)
        for i in range(per_class):
            width, height = (int(s) for s in rng.integers(48, 101, 2))
            background = tuple(int(v) for v in rng.integers(0, 256, 3))
            image = Image.new("RGB", (width, height), background)
            box = (width // 6, height // 6, width * 5 // 6, height * 5 // 6)
            draw = ImageDraw.Draw(image)
            (draw.ellipse if c % 2 else draw.rectangle)(box, fill=colours[c % len(colours)])
            image.save(folder / f"{i}.jpg", quality=90)
    return root


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> Path:
    """Five classes of ten JPEG photos."""
    return write_shape_photos(tmp_path_factory.mktemp("export-seams") / "photos")


@pytest.fixture(scope="module", params=sorted(CASES))
def exported(request, photos, tmp_path_factory):
    """A case's run trained for one epoch, its items embedded by `clusterable embed`, and its
    model exported in both formats: ``(case, embed folder, {format: exported file})``."""
    case = request.param
    folder = tmp_path_factory.mktemp(case)
    data = [] if case.startswith("digits") else ["--data", f"folder:{photos}"]
    train = ["train", *data, *CASES[case].split(), "--loss", "contrastive", "--embedding-dim", "8"]
    train += ["--epochs", "1", "--eval-every", "0", "--no-progress", "--no-report"]
    assert main([*train, "--device", "cpu", "--out", str(folder / "run")]) == 0
    items = ["--split", "all"] if case.startswith("digits") else ["--items", str(photos)]
    embed = ["embed", str(folder / "run"), *items, "--device", "cpu"]
    assert main([*embed, "--out", str(folder / "embedded")]) == 0
    files = {}
    for fmt, suffix in SUFFIX.items():
        out = folder / f"model{suffix}"
        assert main(["export", str(folder / "run"), "--format", fmt, "--out", str(out)]) == 0
        files[fmt] = out
    return case, folder / "embedded", files


def test_every_built_in_model_family_has_a_case():
    models = {flags.split()[flags.split().index("--model") + 1] for flags in CASES.values()}
    assert models == set(available_models())


def test_the_batches_are_neither_the_trace_nor_the_parity_batch():
    assert not {TRACE_BATCH, PARITY_BATCH} & set(BATCHES)


def prepared_by_hand(ids: np.ndarray, view: dict) -> np.ndarray:
    """The items of image files ``ids`` as the description's steps say, by PIL and numpy only;
    each step is checked to be the one the description names."""
    height, width = view["size"]
    mode = "L" if view["channels"] == "grayscale" else "RGB"
    assert view["decode"].startswith(f"Image.open(file).convert('{mode}'), before resizing")
    assert f"image.resize(({width}, {height}), Image.Resampling.BILINEAR)" in view["resize"]
    to_layout = "[None]" if mode == "L" else ".transpose(2, 0, 1)"
    assert f"(np.asarray(image, np.float32) / 255){to_layout}" in view["layout"]
    assert view["normalisation"] == "none"
    items = []
    for path in ids:
        image = Image.open(path).convert(mode)
        image = image.resize((width, height), Image.Resampling.BILINEAR)
        pixels = np.asarray(image, np.float32) / 255  # (H, W) or (H, W, C)
        items.append(pixels[None] if mode == "L" else pixels.transpose(2, 0, 1))
    return np.stack(items)  # (n, C, H, W)


def digits_by_hand(view: dict) -> np.ndarray:
    """scikit-learn's digits as the description's ``data_items`` says the run read them."""
    from sklearn.datasets import load_digits

    assert "load_digits().images (pixel values 0..16) / 16" in view["data_items"]
    return (load_digits().images / 16).astype(np.float32)[:, None]  # (n, 1, 8, 8)


def run_exported(path: Path, fmt: str, batch: np.ndarray) -> np.ndarray:
    """The exported file's output, run by its own runtime, not by clusterable."""
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return session.run(None, {"input": batch})[0]
    with torch.no_grad():
        return torch.jit.load(str(path))(torch.from_numpy(batch)).numpy()


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_the_exported_model_embeds_by_hand_prepared_items_as_embed_does(exported, fmt):
    case, embedded, files = exported
    description = json.loads(files[fmt].with_name(files[fmt].name + ".json").read_text())
    view = description["preprocessing"]
    ids = np.load(embedded / "ids.npy")
    items = digits_by_hand(view) if case.startswith("digits") else prepared_by_hand(ids, view)
    expected = np.load(embedded / "embeddings.npy")  # (n, 8)
    assert description["input"]["shape"] == ["batch", *items.shape[1:]]
    for size in BATCHES:
        got = run_exported(files[fmt], fmt, items[:size])
        assert got.shape == (size, 8)
        np.testing.assert_allclose(got, expected[:size], atol=1e-5, err_msg=f"batch {size}")
    if "normalize" in case:
        assert description["l2_normalised"] is True
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)


def test_the_description_names_the_run_and_weights_model_json_names(exported):
    _, embedded, files = exported
    identity = json.loads((embedded / "model.json").read_text())
    for path in files.values():
        description = json.loads(path.with_name(path.name + ".json").read_text())
        assert description["model_checksum"] == identity["model"]
        assert description["run"] == identity["run"]
        assert Path(description["checkpoint"]).parent.parent == Path(identity["run"])
