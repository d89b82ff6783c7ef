"""A run keeps the view of its images that it trained with (resize, crop, interpolation, mean and
std: its checkpoints store it): a timm or torchvision installed later that would give another
view changes neither how the run embeds nor what ``export`` describes, nor what a resumed run
trains on; a run stored before runs recorded their view loads with the installed library's, as
it always did."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest
import torch
from PIL import Image

from clusterable.data.transforms import IMAGENET_MEAN, IMAGENET_STD, Preprocessing
from clusterable.data.transforms import backbone_preprocessing as library_view
from clusterable.export import export_run
from clusterable.recipe import RunSpec, train_run
from clusterable.train.checkpoint import load_run_record, resolve_checkpoint
from clusterable.train.config import TrainConfig
from clusterable.trained_run import TrainedRun

MODEL = "torchvision:tiny"
#: What the stand-in torchvision's weights say when the run trains, and after an "upgrade".
TRAINED_WITH = {"crop": 32, "resize": 40, "mean": IMAGENET_MEAN, "std": IMAGENET_STD}
UPGRADED = {"crop": 48, "resize": 48, "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25)}


class _TinyClassifier(torch.nn.Module):
    """Stands in for a torchvision classifier: features, then a final linear ``fc``."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()
        )
        self.fc = torch.nn.Linear(4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


def install_torchvision(monkeypatch, crop, resize, mean, std):
    """A stand-in torchvision (none is needed) whose default weights' transforms give this
    view, as ``get_model_weights(NAME).DEFAULT.transforms()`` does."""
    transforms = types.SimpleNamespace(
        crop_size=[crop],
        resize_size=[resize],
        mean=list(mean),
        std=list(std),
        interpolation=types.SimpleNamespace(value="bilinear"),
    )
    weights = types.SimpleNamespace(DEFAULT=types.SimpleNamespace(transforms=lambda: transforms))
    models = types.SimpleNamespace(
        get_model=lambda arch, weights=None: _TinyClassifier(),
        get_model_weights=lambda arch: weights,
    )
    package = types.ModuleType("torchvision")
    package.models = models  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchvision", package)
    monkeypatch.setitem(sys.modules, "torchvision.models", models)


def spec_and_config(photos, epochs=1):
    spec = RunSpec(
        data=f"folder:{photos}", model=MODEL, loss="contrastive", embedding_dim=4, val_fraction=0
    )
    config = TrainConfig(
        epochs=epochs, batch_size=8, device="cpu", workers=0, eval_every=0, progress=False
    )
    return spec, config


def write_photos(root, draw, per_class, classes=2):
    """``root/SPLIT/cC/I.png`` for each split's ``per_class`` count, pixels ``draw(C, I)``
    (``(h, w, 3)`` values in [0, 255]); returns ``root``."""
    for split, count in per_class.items():
        for c in range(classes):
            (root / split / f"c{c}").mkdir(parents=True)
            for i in range(count):
                pixels = draw(c, i).astype(np.uint8)
                Image.fromarray(pixels).save(root / split / f"c{c}" / f"{i}.png")
    return root


@pytest.fixture
def trained(tmp_path, monkeypatch):
    """A run of the stand-in backbone, trained one epoch on non-square photos with the view of
    :data:`TRAINED_WITH`; its folder and its photos."""
    rng = np.random.default_rng(0)

    def draw(c, i):
        width, height = (61, 37) if i % 2 else (29, 53)
        return rng.integers(0, 255, (height, width, 3))

    photos = write_photos(tmp_path / "photos", draw, {"train": 6, "test": 3})
    install_torchvision(monkeypatch, **TRAINED_WITH)
    out = tmp_path / "run"
    train_run(*spec_and_config(photos), out=out)
    return out, sorted(photos.rglob("*.png"))


def test_a_run_keeps_its_view_when_the_installed_library_gives_another(
    trained, tmp_path, monkeypatch
):
    out, photos = trained
    before = TrainedRun.load(out, device="cpu")
    stored = Preprocessing(size=32, crop_fraction=32 / 40)  # ImageNet's mean and std, bilinear
    assert before.preprocessing == stored
    embedded = before.embed(photos, progress=False).embeddings
    described = before.view_description()
    install_torchvision(monkeypatch, **UPGRADED)
    assert library_view(MODEL) != stored  # what the run would get, were it loaded afresh
    after = TrainedRun.load(out, device="cpu")
    assert after.preprocessing == stored
    # The same pixels (resize 40, crop 32) and the same normalisation inside the model.
    np.testing.assert_array_equal(after.embed(photos, progress=False).embeddings, embedded)
    assert after.split("test").input_shape == (3, 32, 32)
    assert after.view_description() == described
    export_run(out, tmp_path / "model.pt", "torchscript")
    exported = json.loads((tmp_path / "model.pt.json").read_text())["preprocessing"]
    assert exported == described


def test_a_resumed_run_trains_on_the_view_it_started_with(trained, monkeypatch):
    out, photos = trained
    started = load_run_record(resolve_checkpoint(out))
    install_torchvision(monkeypatch, **UPGRADED)
    train_run(*spec_and_config(photos[0].parents[2], epochs=2), out=out, resume=True)
    resumed = load_run_record(resolve_checkpoint(out))
    assert resumed["input_shape"] == [3, 32, 32]
    assert resumed["preprocessing"] == started["preprocessing"]


def test_a_run_stored_before_views_were_recorded_loads_with_the_librarys_view(trained, monkeypatch):
    """An old run's checkpoints have no ``preprocessing``: its view is the installed library's,
    as it was before runs stored it; a damaged record is refused in one line."""
    out, photos = trained
    embedded = TrainedRun.load(out, device="cpu").embed(photos, progress=False).embeddings
    metas = sorted((out / "checkpoints").glob("*/meta.json"))
    for meta in metas:
        values = json.loads(meta.read_text())
        del values["run"]["preprocessing"]
        meta.write_text(json.dumps(values))
    old = TrainedRun.load(out, device="cpu")
    assert old.preprocessing == library_view(MODEL)
    np.testing.assert_array_equal(old.embed(photos, progress=False).embeddings, embedded)
    install_torchvision(monkeypatch, **UPGRADED)
    recomputed = TrainedRun.load(out, device="cpu")
    assert recomputed.preprocessing == library_view(MODEL) != old.preprocessing
    assert recomputed.embed(photos, progress=False).embeddings.shape == (len(photos), 4)
    for meta in metas:
        values = json.loads(meta.read_text())
        values["run"]["preprocessing"] = {"size": 32}
        meta.write_text(json.dumps(values))
    with pytest.raises(
        ValueError, match=r"records a damaged image view \(no 'interpolation'\); give another"
    ):
        TrainedRun.load(out, device="cpu")
