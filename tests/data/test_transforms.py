"""Backbone preprocessing: torchvision's conventions on PIL images, the backbone's defaults, timm's
crop modes, and training views that a resumed run draws again."""

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
    describe_evaluation_view,
    evaluation_size,
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


def test_each_crop_mode_resizes_as_timm_says():
    """center: the shorter side; squash: the whole image to a square; border: the longer side."""
    assert evaluation_size(400, 300, 256, "center") == (341, 256)
    assert evaluation_size(400, 300, 256, "squash") == (256, 256)
    assert evaluation_size(400, 300, 256, "border") == (256, 192)
    assert evaluation_size(157, 301, 256, "border") == (134, 256)
    with pytest.raises(ValueError, match="crop mode 'letterbox' is none of center, squash"):
        Preprocessing(crop_mode="letterbox")


def test_squash_keeps_the_whole_image_and_border_pads_it_with_the_mean(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "wide.png"
    Image.fromarray(rng.integers(0, 255, (20, 40, 3)).astype(np.uint8)).save(path)
    with Image.open(path) as image:
        squashed = image.convert("RGB").resize((32, 32), Image.Resampling.BILINEAR)
    squash = Preprocessing(size=32, crop_fraction=1.0, crop_mode="squash")
    np.testing.assert_array_equal(
        ImageFiles([path], 32, preprocessing=squash)[0],
        np.asarray(squashed, np.float32).transpose(2, 0, 1) / 255,
    )
    border = Preprocessing(size=32, crop_fraction=1.0, crop_mode="border")
    item = ImageFiles([path], 32, preprocessing=border)[0]  # the image at 32 x 16, rows 8-23
    fill = np.array([round(255 * m) for m in IMAGENET_MEAN], np.float32)[:, None, None] / 255
    np.testing.assert_array_equal(item[:, :8], np.broadcast_to(fill, (3, 8, 32)))
    np.testing.assert_array_equal(item[:, 24:], np.broadcast_to(fill, (3, 8, 32)))
    assert not np.allclose(item[:, 8:24], fill)
    grey = ImageFiles([path], 32, 1, preprocessing=border)[0]  # the channels' average mean
    assert (grey[0, :8] * 255).round().tolist() == [[round(255 * 0.449)] * 32] * 8


def test_the_described_view_is_each_modes_resize_then_the_centre_crop():
    """What ``export`` tells a deployer names the crop mode's resize, and the padding border
    mode adds."""
    words = {
        "center": "shorter side resized (bilinear) to 256 px",
        "squash": "the whole image resized (bilinear) to 256x256 px, aspect ratio not kept",
        "border": "longer side resized (bilinear) to 256 px",
    }
    for mode, resize in words.items():
        text = describe_evaluation_view(Preprocessing(crop_mode=mode), 3, 224, 224)
        assert text.startswith(resize) and "then the centre 224x224 cropped" in text
        assert ("padded to it with pixel value (124, 116, 104)" in text) == (mode == "border")


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
        crop_mode=config["crop_mode"],
    )


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is not installed")
def test_a_timm_backbone_whose_input_is_no_square_needs_an_image_size(tmp_path, photo, monkeypatch):
    """timm's sapiens2 models take 1024 x 768 px (height x width): their view is not taken as a
    square of the width (768 x 768, squashed otherwise than timm's), but refused, with what to
    give, unless the run gives the side of its square; the view's record keeps the rectangle."""
    import dataclasses

    import timm

    own = timm.models.get_pretrained_cfg
    monkeypatch.setattr(
        timm.models,
        "get_pretrained_cfg",
        lambda arch: dataclasses.replace(own("resnet18"), input_size=(3, 48, 32)),
    )
    prep = backbone_preprocessing("timm:resnet18")
    assert prep is not None and prep.size == (48, 32)
    assert Preprocessing.from_record(prep.to_record(), "the checkpoint") == prep
    for c in range(2):
        (tmp_path / "photos" / f"c{c}").mkdir(parents=True)
        for i in range(3):
            (tmp_path / "photos" / f"c{c}" / f"{i}.png").write_bytes(photo.read_bytes())
    spec = RunSpec(data=f"folder:{tmp_path / 'photos'}", model="timm:resnet18")
    with pytest.raises(ValueError, match=r"48 x 32 px .* is no square.* give --image-size N"):
        spec.load("train")
    square = RunSpec(data=spec.data, model=spec.model, image_size=32).load("test")
    assert square.input_shape == (3, 32, 32)
    assert square.x[0].shape == (3, 32, 32)


#: timm pretrained configs of each crop mode; volo's crop_pct 1.15 pads the centre crop.
CROP_MODE_CONFIGS = {
    "center": "resnet18.a1_in1k",
    "center-padded": "volo_d4_448.sail_in1k",
    "squash": "convnext_base.fb_in22k_ft_in1k_384",
    "border": "deepseek_vit_412m.deepseek_v4_1_flash",
}


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is not installed")
@pytest.mark.parametrize("mode", sorted(CROP_MODE_CONFIGS))
def test_the_evaluation_view_is_timms_for_each_crop_mode(tmp_path, mode):
    """The view of a timm backbone, normalised as its model does, is the tensor timm's own
    evaluation transform gives, on images of odd sizes, wide and tall, smaller than the crop too."""
    import timm

    from clusterable.models.pretrained import InputNormalization

    name = CROP_MODE_CONFIGS[mode]
    pretrained_cfg = timm.models.get_pretrained_cfg(name).to_dict()
    config = timm.data.resolve_data_config(pretrained_cfg=pretrained_cfg)
    assert config["crop_mode"] == mode.partition("-")[0]
    timms = timm.data.create_transform(**config, is_training=False)
    prep = backbone_preprocessing(f"timm:{name}")
    normalise = InputNormalization(prep.mean, prep.std, 3)
    rng = np.random.default_rng(2)
    for i, (width, height) in enumerate([(301, 157), (97, 211), (643, 480)]):
        path = tmp_path / f"{i}.png"
        Image.fromarray(rng.integers(0, 255, (height, width, 3)).astype(np.uint8)).save(path)
        with Image.open(path) as image:
            expected = timms(image.convert("RGB"))
        item = ImageFiles([path], prep.size, preprocessing=prep)[0]
        got = normalise(torch.from_numpy(item)[None])[0]
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
