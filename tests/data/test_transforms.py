"""Backbone preprocessing: torchvision's conventions on PIL images, the backbone's defaults, and
training views that a resumed run draws again."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
import torch
from PIL import Image

from clusterable.data import ImageFiles
from clusterable.data.transforms import (
    IMAGENET_MEAN,
    Preprocessing,
    backbone_preprocessing,
    centre_box,
    random_resized_box,
    shorter_side_size,
)
from clusterable.recipe import RunSpec


@pytest.fixture
def photo(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "photo.png"
    Image.fromarray(rng.integers(0, 255, (300, 400, 3)).astype(np.uint8)).save(path)
    return path


def test_image_backbones_get_imagenet_224_and_other_models_none():
    prep = backbone_preprocessing("torchvision:resnet50")
    assert prep is not None
    # torchvision's ResNet-50 default weights (IMAGENET1K_V2) resize to 232; without torchvision
    # the ImageNet convention, 256.
    resize = 232 if importlib.util.find_spec("torchvision") else 256
    assert (prep.size, prep.resize_size, prep.mean) == (224, resize, IMAGENET_MEAN)
    assert backbone_preprocessing("mlp") is None and backbone_preprocessing("corel-cnn") is None


def test_boxes_follow_torchvision_formulas():
    assert shorter_side_size(400, 300, 256) == (341, 256)
    assert shorter_side_size(300, 400, 256) == (256, 341)
    assert centre_box(341, 256, 224) == (58, 16, 282, 240)
    rng = np.random.default_rng(3)
    for _ in range(200):
        left, top, right, bottom = random_resized_box(400, 300, rng)
        w, h = right - left, bottom - top
        assert 0 <= left and right <= 400 and 0 <= top and bottom <= 300
        assert 0.08 * 400 * 300 * 0.9 <= w * h <= 400 * 300
        assert 3 / 4 * 0.9 <= w / h <= 4 / 3 * 1.1


def test_the_evaluation_view_is_the_resized_centre_crop(photo):
    files = ImageFiles([photo], 224, preprocessing=Preprocessing())
    item = files[0]
    assert item.shape == (3, 224, 224)
    with Image.open(photo) as image:
        expected = image.convert("RGB").resize((341, 256), Image.Resampling.BILINEAR)
        expected = expected.crop((58, 16, 282, 240))
    np.testing.assert_array_equal(item, np.asarray(expected, np.float32).transpose(2, 0, 1) / 255)


def test_training_views_are_seeded_by_item_and_epoch(photo):
    files = ImageFiles([photo, photo], 32, preprocessing=Preprocessing(), augment_seed=7)
    again = files.replace()
    np.testing.assert_array_equal(files[0, 3], again[0, 3])  # a resumed run's draw
    assert not np.array_equal(files[0, 3], files[0, 4])
    assert not np.array_equal(files[0, 3], files[1, 3])
    assert files[0, 3].shape == (3, 32, 32)


def test_a_folder_for_a_backbone_takes_its_input_size_and_training_view(tmp_path, photo):
    for c in range(2):
        (tmp_path / "photos" / f"c{c}").mkdir(parents=True)
        for i in range(3):
            (tmp_path / "photos" / f"c{c}" / f"{i}.png").write_bytes(photo.read_bytes())
    spec = RunSpec(data=f"folder:{tmp_path / 'photos'}", model="torchvision:resnet18")
    train = spec.load("train")
    assert train.input_shape == (3, 224, 224) and train.x.augment_seed is None
    assert spec.training_view(train, seed=0).x.augment_seed == 0
    none = RunSpec(data=spec.data, model=spec.model, augment="none")
    assert none.training_view(train, seed=0).x.augment_seed is None
    small = RunSpec(data=spec.data, model=spec.model, image_size=32).load("test")
    assert small.input_shape == (3, 32, 32)


def test_the_normalisation_is_the_backbones_first_step():
    from clusterable.models.pretrained import InputNormalization

    norm = InputNormalization(IMAGENET_MEAN, (0.5, 0.5, 0.5), 3)
    x = torch.ones(1, 3, 2, 2)
    assert torch.allclose(norm(x)[0, :, 0, 0], (1 - torch.tensor(IMAGENET_MEAN)) / 0.5)
    assert norm.state_dict() == {}
    assert math.isclose(
        float(InputNormalization(IMAGENET_MEAN, (1, 1, 1), 1).mean), 0.449, rel_tol=1e-6
    )


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is not installed")
@pytest.mark.parametrize("arch", ["test_vit", "resnet18"])
def test_a_timm_backbone_gets_its_own_data_config(arch):
    import timm

    # timm's own answer, from the model it builds (its pretrained config as a dataclass)
    config = timm.data.resolve_model_data_config(timm.create_model(arch, pretrained=False))
    prep = backbone_preprocessing(f"timm:{arch}")
    assert prep == Preprocessing(
        size=config["input_size"][-1],
        mean=tuple(config["mean"]),
        std=tuple(config["std"]),
        interpolation=config["interpolation"],
        crop_fraction=config["crop_pct"],
    )
