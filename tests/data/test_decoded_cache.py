"""Image files decoded once into memory (``TrainConfig.cache_images``, issues 28 and 40): the same
pixels in every view as decoding at access, so training, its seeds and a resumed run are
unchanged; what ``auto`` decides; an unreadable file named as at access; the setting as a flag.
The disk cache itself: tests/data/test_image_cache.py."""

from __future__ import annotations

import gc
import io
import json
import math
import pickle
import sys

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from clusterable.cli import build_parser
from clusterable.cli._settings import given_settings
from clusterable.data import ImageFiles, LabelledDataset
from clusterable.data.image_cache import CACHE_DIR_VARIABLE
from clusterable.data.transforms import Preprocessing, shorter_side_size
from clusterable.losses import build_loss
from clusterable.models import build_model
from clusterable.train import TrainConfig, Trainer, TrainerCallback, loading
from clusterable.train.loading import decoded_images

#: (width, height, how it is stored): JPEG photos of several shapes, and modes that convert.
PHOTOS = [
    (40, 30, "RGB.jpg"),
    (23, 37, "RGB.jpg"),
    (64, 48, "L.jpg"),
    (31, 31, "P.png"),
    (50, 20, "RGBA.png"),
    (36, 27, "RGB.jpg"),
    (45, 33, "RGB.jpg"),
    (28, 40, "L.png"),
]


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> list:
    """Eight small images of the shapes and modes of :data:`PHOTOS` (smooth fields, noise)."""
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    paths = []
    for i, (width, height, stored) in enumerate(PHOTOS):
        yy, xx = np.mgrid[0:height, 0:width] / max(width, height)
        pixels = 128 + 80 * np.sin(5 * xx[..., None] * rng.uniform(0.5, 2, 4) + 3 * yy[..., None])
        pixels += rng.normal(0, 8, pixels.shape)
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGBA")
        mode, suffix = stored.split(".")
        image = image.convert("RGB").convert("P") if mode == "P" else image.convert(mode)
        path = folder / f"{i:02d}.{suffix}"
        image.save(path, quality=90) if suffix == "jpg" else image.save(path)
        paths.append(path)
    return paths


@pytest.fixture(autouse=True)
def cache_folder(tmp_path, monkeypatch):
    """Disk caches in this test's folder, never the user's."""
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    return tmp_path / "cache"


def views(paths, channels: int = 3) -> dict[str, ImageFiles]:
    """The three ways files are read: stretched to a square, the evaluation view (centre crop),
    the training view (seeded random resized crop and flip)."""
    prep = Preprocessing(size=16)
    return {
        "stretch": ImageFiles(paths, (12, 20), channels),
        "evaluation": ImageFiles(paths, 16, channels, preprocessing=prep),
        "training": ImageFiles(paths, 16, channels, preprocessing=prep, augment_seed=7),
    }


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("view", ["stretch", "evaluation", "training"])
def test_decoded_images_give_the_pixels_of_decoding_at_access(photos, channels, view):
    files = views(photos, channels)[view]
    cached = files.with_decoded(threads=3)
    assert files.decoded is None and cached.decoded is not None
    for index in range(len(photos)):
        for epoch in (0, 1, 5):
            expected = files.pixels((index, epoch))
            np.testing.assert_array_equal(cached.pixels((index, epoch)), expected)
        np.testing.assert_array_equal(cached[index], files[index])  # the float items too
    stored = np.asarray(files.stored_form.read(photos[2]))  # a grayscale JPEG, converted
    assert stored.shape == ((12, 20), (18, 24), (18, 24))[list(views(photos)).index(view)] + (
        (3,) if channels == 3 else ()
    )
    np.testing.assert_array_equal(cached.decoded.image(2), stored)


def test_copies_over_the_same_files_read_the_same_decoded_images(photos):
    files = views(photos)["training"]
    cached = files.with_decoded(threads=2)
    assert cached.replace(augment_seed=3).decoded is cached.decoded  # stored alike
    evaluation = cached.replace(augment_seed=None)  # not from the training view's draft JPEGs
    assert evaluation.decoded is None
    for index in range(len(photos)):
        expected = views(photos)["evaluation"].pixels(index)
        np.testing.assert_array_equal(evaluation.pixels(index), expected)
    assert cached.replace(size=12).decoded is None  # another resolution
    subset = cached[np.array([5, 1, 6])]
    assert subset.decoded.buffer is cached.decoded.buffer  # nothing copied
    for row in range(3):
        np.testing.assert_array_equal(subset.pixels((row, 2)), files[[5, 1, 6]].pixels((row, 2)))
    assert cached.replace(photos[:3]).decoded is None  # other paths
    assert cached.replace(channels=1).decoded is None  # another mode
    shipped = pickle.loads(pickle.dumps(cached))  # to a worker that is not forked
    np.testing.assert_array_equal(shipped.pixels((4, 3)), files.pixels((4, 3)))
    assert len(cached[np.array([], dtype=np.int64)].decoded) == 0
    assert len(ImageFiles([]).with_decoded(threads=2).decoded) == 0


def cache(files: ImageFiles, setting: str) -> tuple[ImageFiles, str]:
    return decoded_images(files, setting, workers=1)


def stored_bytes(channels: int = 3) -> int:
    """The bytes of the photos stored for the training view: the shorter side at 18 (16 / 0.875)."""
    return sum(math.prod(shorter_side_size(w, h, 18)) * channels for w, h, _ in PHOTOS)


def test_auto_caches_what_fits_its_budget_and_says_so(photos, monkeypatch, cache_folder):
    files = views(photos)["training"]
    decoded_bytes = stored_bytes()
    monkeypatch.setattr(loading, "image_holders", lambda workers: 1)  # a forked worker
    monkeypatch.setattr(loading, "auto_cache_budget", lambda: decoded_bytes)
    cached, note = cache(files, "auto")
    assert cached.decoded.nbytes == decoded_bytes
    assert note.startswith("images cached: 8 decoded in ") and "(cache_images: auto)" in note
    monkeypatch.setattr(loading, "auto_cache_budget", lambda: decoded_bytes - 1)
    on_disk, note = cache(files, "auto")  # memory cannot hold them: the disk cache
    assert isinstance(on_disk.decoded.buffer, np.memmap) and on_disk.decoded.nbytes == decoded_bytes
    assert note.startswith("images cached on disk: 8 decoded in ") and str(cache_folder) in note
    _, note = cache(files, "auto")
    assert note.startswith("images cached on disk: 8 reused, 0 MiB in ")
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(photos[0]))  # a file: no disk cache either
    kept, note = cache(files, "auto")
    assert kept is files and note.startswith("images decoded at every access: the 8 images")
    assert note.endswith(
        f"image cache folder {photos[0]}: {photos[0]} is a file, not a folder; set "
        f"{CACHE_DIR_VARIABLE} to a writable folder"
    )
    _, note = cache(files, "ram")  # ram does not ask the budget
    assert note.startswith("images cached: 8 decoded")
    kept, note = cache(files, "none")
    assert kept is files and note == "images decoded at every access (cache_images: none)"


def test_the_auto_budget_is_a_quarter_of_the_memory_available_up_to_its_cap(monkeypatch):
    gib = 2**30
    for available, budget in ((4 * gib, gib), (100 * gib, 8 * gib), (None, 8 * gib)):
        monkeypatch.setattr(loading, "available_memory", lambda a=available: a)
        assert loading.auto_cache_budget() == budget
    monkeypatch.undo()
    assert loading.available_memory() > 0  # this machine says


def test_a_containers_memory_limit_bounds_the_memory_available(tmp_path, monkeypatch):
    limit, usage = tmp_path / "memory.max", tmp_path / "memory.current"
    monkeypatch.setattr(loading, "_CGROUP_MEMORY", ((str(limit), str(usage)),))
    monkeypatch.setattr(loading, "_system_memory_available", lambda: 64 * 2**30)
    limit.write_text("max\n")  # cgroup v2 without a limit
    usage.write_text("1000\n")
    assert loading.available_memory() == 64 * 2**30
    limit.write_text(f"{2**30 + 1000}\n")
    assert loading.available_memory() == 2**30
    limit.write_text("500\n")  # over its limit already: nothing left, not unknown
    assert loading.available_memory() == 0 and loading.auto_cache_budget() == 0


@pytest.mark.parametrize(
    ("method", "workers", "holders"), [("fork", 3, 1), ("spawn", 3, 4), ("forkserver", 0, 1)]
)
def test_workers_that_are_not_forked_each_hold_a_copy(monkeypatch, method, workers, holders):
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.setattr(loading.multiprocessing, "get_start_method", lambda allow_none: method)
    assert loading.image_holders(workers) == holders
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two training processes on this machine (torchrun)
    assert loading.image_holders(workers) == 2 * holders


def test_auto_counts_every_copy_against_its_budget(photos, monkeypatch):
    monkeypatch.setattr(loading, "auto_cache_budget", lambda: 3 * stored_bytes())
    monkeypatch.setattr(loading, "image_holders", lambda workers: 3)
    _, note = cache(views(photos)["training"], "auto")
    assert "held by 3 processes" in note and "in memory" in note
    monkeypatch.setattr(loading, "auto_cache_budget", lambda: 3 * stored_bytes() - 1)
    on_disk, note = cache(views(photos)["training"], "auto")
    assert on_disk.decoded.file is not None and note.startswith("images cached on disk")


def test_the_header_pass_stops_once_past_its_limit(photos):
    files = views(photos)["training"]
    shapes = files.stored_shapes(threads=2)
    assert shapes.tolist() == [list(shorter_side_size(w, h, 18))[::-1] for w, h, _ in PHOTOS]
    assert files.stored_shapes(threads=2, max_bytes=stored_bytes()) is not None
    assert files.stored_shapes(threads=2, max_bytes=stored_bytes() - 1) is None
    assert views(photos)["stretch"].stored_shapes(threads=2).tolist() == [[12, 20]] * 8


def test_ram_refuses_more_than_the_memory_available(photos, monkeypatch):
    monkeypatch.setattr(loading, "available_memory", lambda: 1000)
    with pytest.raises(ValueError, match=r"cache_images ram: the 8 images decode to .* 0 MiB of"):
        cache(views(photos)["training"], "ram")


@pytest.fixture
def broken(photos, tmp_path):
    """Downloads cut off in the header and after it (its size reads, its pixels do not), a text
    file named .jpg, and a file that is gone."""
    cut, half = tmp_path / "cut.jpg", tmp_path / "half.jpg"
    cut.write_bytes(photos[0].read_bytes()[:200])
    half.write_bytes(photos[0].read_bytes()[: photos[0].stat().st_size * 2 // 3])
    text = tmp_path / "notes.jpg"
    text.write_text("not an image")
    return {"cut": cut, "half": half, "text": text, "gone": tmp_path / "gone.jpg"}


@pytest.mark.parametrize("kind", ["cut", "half", "text", "gone"])
@pytest.mark.parametrize("setting", ["auto", "ram", "disk"])
def test_an_unreadable_file_is_named_as_decoding_at_access_names_it(
    photos, broken, kind, setting, cache_folder
):
    files = views([*photos, broken[kind]])["training"]
    with pytest.raises((ValueError, FileNotFoundError)) as at_access:
        files.pixels(len(photos))
    with pytest.raises(type(at_access.value)) as cached:
        cache(files, setting)
    assert str(cached.value) == str(at_access.value) and broken[kind].name in str(cached.value)
    assert not list(cache_folder.glob(".*.tmp"))  # a failed build leaves nothing behind
    assert cache(files, "none")[0] is files  # none reads nothing before training


def test_a_failing_decode_stops_the_others(photos, broken, monkeypatch):
    files = views([broken["half"], *photos * 20])["stretch"]
    shapes = files.stored_shapes(threads=1)  # the half file's header reads
    opened = []
    real_open = Image.open
    monkeypatch.setattr(Image, "open", lambda path: opened.append(path) or real_open(path))
    with pytest.raises(ValueError, match=r"half\.jpg"):
        files.with_decoded(threads=1, shapes=shapes)
    assert len(opened) < len(files.paths) / 2  # the decoding stopped early


def test_cache_images_is_a_flag_a_yaml_setting_and_a_checked_value(tmp_path, capsys):
    args = build_parser().parse_args(["train", "--cache-images", "none"])
    _, train = given_settings(args)
    assert train == {"cache_images": "none"}
    assert TrainConfig.from_dict(train).cache_images == "none"
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"train": {"cache_images": "ram"}}))
    _, train = given_settings(build_parser().parse_args(["train", "--config", str(config)]))
    assert TrainConfig.from_dict(train).to_dict()["cache_images"] == "ram"
    assert TrainConfig().cache_images == "auto"
    assert TrainConfig(cache_images="disk").cache_images == "disk"
    with pytest.raises(ValueError, match="cache_images='tape'"):
        TrainConfig(cache_images="tape")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--cache-images", "tape"])
    wanted = "cache_images='tape' is not one of 'auto', 'none', 'ram', 'disk'"
    assert wanted in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    assert "--cache-images {auto,none,ram,disk}" in " ".join(capsys.readouterr().out.split())


# ------------------------------------------------------------------------------------------------
# training: the same batches, weights and resumed run with the cache on
def photo_set(photos) -> LabelledDataset:
    """The eight photos, each twice (16 items, four classes of four), in the training view."""
    files = views([*photos, *photos])["training"]
    return LabelledDataset("photos", files, np.arange(16) // 4)


class Killed(Exception):
    pass


class KilledAfter(TrainerCallback):
    """Stops the run at the start of epoch ``epoch`` (0-based), as Ctrl-C would."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_epoch_start(self, trainer) -> None:
        if trainer.epoch == self.epoch:
            raise Killed


class GoneAfterFirstEpoch(TrainerCallback):
    """Moves the photos away once the first epoch is done: only a cache can serve the others."""

    def __init__(self, paths) -> None:
        self.paths = paths

    def on_epoch_start(self, trainer) -> None:
        if trainer.epoch == 1:
            for path in self.paths:
                path.rename(path.with_suffix(".gone"))


def fit(data, setting, out=None, resume=False, callbacks=(), epochs=3):
    """A short run from the photos with one loader worker: its model, result, and the batches
    its steps took."""
    torch.manual_seed(0)
    model = build_model("corel-cnn", data.input_shape, 8)
    config = TrainConfig(
        epochs=epochs,
        batch_size=8,
        items_per_class=4,
        workers=1,
        cache_images=setting,
        device="cpu",
        progress=False,
        eval_every=0,
        seed=3,
    )
    trainer = Trainer(model, build_loss("triplet"), data, config=config, out=out)
    trainer.callbacks.extend(callbacks)
    batches, step = [], trainer.train_step
    trainer.train_step = lambda x, y: batches.append((x.clone(), y.clone())) or step(x, y)
    result = trainer.fit(resume=resume)
    return model, result, batches


def test_training_with_the_cache_trains_on_the_same_batches_to_the_same_weights(photos, tmp_path):
    """Decoding at every access, into memory and into the disk cache: one run, bit for bit."""
    data = photo_set(photos)
    model_a, result_a, batches_a = fit(data, "none", out=tmp_path / "none")
    for setting in ("ram", "disk"):
        model_b, result_b, batches_b = fit(data, setting, out=tmp_path / setting)
        assert len(batches_a) == len(batches_b) == 3 * 2
        for (x_a, y_a), (x_b, y_b) in zip(batches_a, batches_b, strict=True):
            assert x_a.dtype == torch.uint8 and torch.equal(x_a, x_b) and torch.equal(y_a, y_b)
        assert [r["loss"] for r in result_a.history] == [r["loss"] for r in result_b.history]
        for a, b in zip(model_a.state_dict().values(), model_b.state_dict().values(), strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    notes = {
        setting: [
            record["note"]
            for record in map(json.loads, (tmp_path / setting / "log.jsonl").open())
            if record["event"] == "note"
        ]
        for setting in ("none", "ram", "disk")
    }
    assert notes["none"] == ["images decoded at every access (cache_images: none)"]
    assert len(notes["ram"]) == 1 and notes["ram"][0].startswith("images cached: 16 decoded")
    assert len(notes["disk"]) == 1
    assert notes["disk"][0].startswith("images cached on disk: 16 decoded")


def test_epochs_after_the_decoding_read_no_file(photos, tmp_path):
    copies = []
    for path in photos:
        copies.append(tmp_path / path.name)
        copies[-1].write_bytes(path.read_bytes())
    data = photo_set(copies)
    # Six epochs of two batches: the worker's four prefetched batches do not reach the last.
    for setting in ("ram", "disk"):
        _, result, _ = fit(data, setting, callbacks=[GoneAfterFirstEpoch(copies)], epochs=6)
        assert len(result.history) == 6
        for path in copies:
            path.with_suffix(".gone").rename(path)
    with pytest.raises(FileNotFoundError, match="is missing"):  # the control: files were read
        fit(data, "none", callbacks=[GoneAfterFirstEpoch(copies)], epochs=6)
    gc.collect()  # the failed run's loader worker ends now, not when the session does


def test_a_resumed_run_with_the_cache_is_the_uninterrupted_run(photos, tmp_path):
    data = photo_set(photos)
    model_a, whole, _ = fit(data, "ram", out=tmp_path / "a")
    with pytest.raises(Killed):
        fit(data, "ram", out=tmp_path / "b", callbacks=[KilledAfter(2)])
    gc.collect()  # the killed run's loader worker ends now, not when the session does
    model_b, resumed, _ = fit(data, "ram", out=tmp_path / "b", resume=True)
    assert [r["loss"] for r in whole.history] == [r["loss"] for r in resumed.history]
    for a, b in zip(model_a.state_dict().values(), model_b.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_torchruns_processes_share_the_cpus_for_decoding(photos, monkeypatch):
    monkeypatch.setattr(loading, "available_cpus", lambda: 16)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # four training processes on this machine
    _, note = cache(views(photos)["training"], "ram")
    assert "on 4 thread(s)" in note
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "32")  # more processes than CPUs: one thread each
    _, note = cache(views(photos)["training"], "ram")
    assert "on 1 thread(s)" in note


class Terminal(io.StringIO):
    """Standard error as a terminal, whose bars redraw in place."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("setting", ["ram", "disk"])
def test_a_progress_bar_shows_while_decoding_on_a_terminal_only(photos, monkeypatch, setting):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    cache(views(photos)["training"], setting)  # progress off: no bar
    assert terminal.getvalue() == ""
    decoded_images(views(photos)["evaluation"], setting, workers=1, progress=True)
    assert "decoding images: 100%" in terminal.getvalue() and "8/8" in terminal.getvalue()
    redirected = io.StringIO()  # a log file: no bar
    monkeypatch.setattr(sys, "stderr", redirected)
    decoded_images(views(photos)["stretch"], setting, workers=1, progress=True)
    assert redirected.getvalue() == ""
