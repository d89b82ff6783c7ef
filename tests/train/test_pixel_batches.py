"""Image files reach the training step as uint8 pixels (issue 28): the step's floats are the
dataset's float items bit for bit, in either layout, on every device here; training from the
pixels is training from the floats; one loader streams all epochs' batches, each epoch's own
draw; a resumed run draws the same crops, whether the loader or the device makes the views
(issue 40); a broken file is named."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from test_trainer import assert_resume_is_exact, assert_same_weights  # tests/train: resume

from clusterable.data import ImageFiles, LabelledDataset
from clusterable.data.device_augment import CropBatch
from clusterable.data.transforms import IMAGENET_MEAN, IMAGENET_STD, Preprocessing
from clusterable.losses import build_loss
from clusterable.mining import SamplerSettings, build_sampler
from clusterable.models import build_model
from clusterable.models.pretrained import InputNormalization
from clusterable.train import TrainConfig, Trainer
from clusterable.train.loading import EpochBatches, PixelItems, collate_pixels, pixels_to_unit

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> list:
    """Twelve 40x30 JPEG photos (smooth fields with noise), four classes of three."""
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:30, 0:40] / 40
    paths = []
    for i in range(12):
        pixels = 128 + 80 * np.sin(5 * xx[..., None] * rng.uniform(0.5, 2, 3) + 3 * yy[..., None])
        pixels += rng.normal(0, 8, pixels.shape)
        path = folder / f"{i:02d}.jpg"
        Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(path, quality=90)
        paths.append(path)
    return paths


def float_item(path, files: ImageFiles, index: int, epoch: int) -> np.ndarray:
    """The float path before uint8 pixels: the view as float32, divided by 255, ``(C, H, W)``."""
    stored = files.stored_form.read(path)  # the image each view is drawn from (issue 40)
    view = files._view(stored, index, epoch)  # the crops it draws
    pixels = np.asarray(view, dtype=np.float32)
    pixels /= 255.0
    return pixels.transpose(2, 0, 1)


@pytest.mark.parametrize("device", DEVICES)
def test_pixels_to_unit_divides_every_value_as_float32_does(device):
    pixels = torch.arange(256, dtype=torch.uint8).reshape(1, 1, 16, 16).to(device)
    expected = torch.from_numpy(np.arange(256, dtype=np.float32) / np.float32(255))
    unit = pixels_to_unit(pixels).cpu().reshape(-1)
    assert unit.dtype == torch.float32
    # A multiplication by 1/255 (CUDA's way with a host scalar) misses 126 of the 256 values.
    reciprocal = torch.arange(256, dtype=torch.float32) * (torch.tensor(1.0) / 255)
    assert not torch.equal(reciprocal, expected)
    torch.testing.assert_close(unit, expected, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("augment_seed", [None, 5])
def test_a_pixel_batch_is_the_float_batch_and_normalises_alike(
    photos, device, channels_last, augment_seed
):
    files = ImageFiles(photos, 24, preprocessing=Preprocessing(size=24), augment_seed=augment_seed)
    data = LabelledDataset("photos", files, np.arange(12) // 3)
    at = [(i, 2) for i in (0, 4, 7, 11)]
    batch, labels = collate_pixels([PixelItems(data)[i] for i in at], channels_last=channels_last)
    assert batch.dtype == torch.uint8 and batch.shape == (4, 3, 24, 24)
    assert batch.is_contiguous(memory_format=torch.channels_last) == channels_last
    unit = pixels_to_unit(batch.to(device), channels_last=channels_last)
    assert unit.is_contiguous(memory_format=torch.channels_last) == channels_last
    old = torch.stack([torch.from_numpy(float_item(photos[i], files, i, e)) for i, e in at])
    dataset_items = torch.stack([data[i][0] for i in at])  # what evaluation embeds
    torch.testing.assert_close(unit.cpu(), old, rtol=0, atol=0)
    torch.testing.assert_close(dataset_items, old, rtol=0, atol=0)
    assert labels.tolist() == [0, 1, 2, 3]
    normalise = InputNormalization(IMAGENET_MEAN, IMAGENET_STD, 3).to(device)
    torch.testing.assert_close(
        normalise(unit).cpu(), normalise(old.to(device)).cpu(), rtol=0, atol=0
    )


def test_one_channel_pixels_stack_too(photos):
    files = ImageFiles(photos[:2], 16, channels=1)
    items = PixelItems(LabelledDataset("grey", files, [0, 1]))
    for channels_last in (False, True):
        batch, _ = collate_pixels([items[0], items[1]], channels_last=channels_last)
        assert batch.shape == (2, 1, 16, 16)
        expected = torch.stack([torch.from_numpy(files[0]), torch.from_numpy(files[1])])
        torch.testing.assert_close(pixels_to_unit(batch), expected, rtol=0, atol=0)


def quiet(**kwargs) -> TrainConfig:
    settings = {"device": "cpu", "progress": False, "eval_every": 0, "batch_size": 6}
    return TrainConfig(**{**settings, "items_per_class": 3, "seed": 3, **kwargs})


def test_training_from_pixels_is_training_from_the_float_items(photos):
    files = ImageFiles(photos, 16)
    on_disk = LabelledDataset("photos", files, np.arange(12) // 3)
    in_memory = on_disk.replace(x=on_disk.features()[0])  # the float items, the old batches

    def train(data, workers):
        torch.manual_seed(0)
        model = build_model("corel-cnn", data.input_shape, 8)
        config = quiet(epochs=2, workers=workers)
        result = Trainer(model, build_loss("triplet"), data, config=config).fit()
        return model, [record["loss"] for record in result.history]

    reference, losses = train(in_memory, 0)
    for workers in (0, 1):
        model, pixel_losses = train(on_disk, workers)
        assert pixel_losses == losses
        assert_same_weights(reference, model)


def test_streamed_epochs_are_each_epochs_own_draw_and_leave_the_sampler_alone():
    settings = SamplerSettings(batch_size=6, items_per_class=3, seed=4)
    sampler = build_sampler("class-balanced", np.arange(24) // 4, settings)
    sampler.set_epoch(9)
    streamed = list(EpochBatches(sampler, range(2, 4), tag=True))
    assert sampler.epoch == 9 and len(EpochBatches(sampler, range(2, 4), tag=True)) == 8
    expected = []
    for epoch in (2, 3):
        sampler.set_epoch(epoch)
        expected += [[(i, epoch) for i in batch] for batch in sampler]
    assert streamed == expected
    assert list(EpochBatches(sampler, range(3, 4), tag=False)) == list(sampler)


class ShortSampler:
    """A batch sampler whose len() promises one batch more than it draws."""

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        return iter([[0, 1], [2, 3]])

    def __len__(self):
        return 3


def test_a_sampler_that_draws_fewer_batches_than_its_len_is_an_error_not_a_shifted_epoch():
    with pytest.raises(RuntimeError, match="drew 2 batches in epoch 1 but its len"):
        list(EpochBatches(ShortSampler(), range(2), tag=False))


def test_one_loader_serves_every_epoch_of_image_files(photos, monkeypatch):
    data = LabelledDataset("photos", ImageFiles(photos, 16), np.arange(12) // 3)
    model = build_model("corel-cnn", data.input_shape, 8)
    trainer = Trainer(model, build_loss("triplet"), data, config=quiet(epochs=3, workers=1))
    built = []
    make = trainer.batches.loader  # the loader's workers are what a new loader starts again
    monkeypatch.setattr(trainer.batches, "loader", lambda *a, **k: built.append(1) or make(*a, **k))
    trainer.fit()
    assert len(built) == 1 and trainer.step == 3 * len(trainer.sampler)


def test_a_resumed_run_from_pixels_draws_the_same_crops(photos, tmp_path):
    files = ImageFiles(photos, 16, preprocessing=Preprocessing(size=16), augment_seed=0)
    data = LabelledDataset("photos", files, np.arange(12) // 3)

    def fit(out, resume=False, callbacks=()):
        torch.manual_seed(0)
        model = build_model("corel-cnn", data.input_shape, 8)
        config = quiet(epochs=3, workers=1)
        trainer = Trainer(model, build_loss("triplet"), data, config=config, out=out)
        trainer.callbacks.extend(callbacks)
        return trainer.fit(resume=resume), model

    assert_resume_is_exact(fit, tmp_path, kill_at=2)


def test_a_resumed_run_whose_device_makes_the_views_draws_the_same_crops(
    photos, tmp_path, monkeypatch
):
    files = ImageFiles(photos, 16, preprocessing=Preprocessing(size=16), augment_seed=0)
    data = LabelledDataset("photos", files, np.arange(12) // 3)
    stepped = []
    step = Trainer.train_step
    monkeypatch.setattr(
        Trainer, "train_step", lambda self, x, y: stepped.append(type(x)) or step(self, x, y)
    )

    def fit(out, resume=False, callbacks=()):
        torch.manual_seed(0)
        model = build_model("corel-cnn", data.input_shape, 8)
        config = quiet(epochs=3, workers=1, augment_on="device")  # forced on the CPU
        trainer = Trainer(model, build_loss("triplet"), data, config=config, out=out)
        trainer.callbacks.extend(callbacks)
        return trainer.fit(resume=resume), model

    assert_resume_is_exact(fit, tmp_path, kill_at=2)
    assert set(stepped) == {CropBatch}  # the loader handed over crops, the step resized them


@pytest.mark.parametrize("workers", [0, 1])
def test_an_unreadable_photo_is_named_by_the_pixel_loader(photos, tmp_path, workers):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(photos[0].read_bytes()[:200])  # a cut-off download
    paths = [*photos[:5], broken]
    files = ImageFiles(paths, 16, preprocessing=Preprocessing(size=16), augment_seed=0)
    data = LabelledDataset("photos", files, [0, 0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match=r"broken\.jpg"):
        files.pixels((5, 0))
    model = build_model("corel-cnn", data.input_shape, 8)
    trainer = Trainer(model, build_loss("triplet"), data, config=quiet(epochs=1, workers=workers))
    with pytest.raises(ValueError, match=r"broken\.jpg"):
        trainer.fit()
