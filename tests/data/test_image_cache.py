"""Images stored at their working resolution (issue 40): JPEG draft decoding at the smallest DCT
scale at or above the evaluation resize, the evaluation view unchanged; and the disk cache: its
keys, reuse without decoding, rebuilds, two runs building at once, its pixels, pickling."""

from __future__ import annotations

import math
import multiprocessing
import os
import pickle
import sys
import time

import numpy as np
import pytest
from PIL import Image

from clusterable.data import ImageFiles
from clusterable.data import image_cache as cache_module
from clusterable.data.image_cache import (
    CacheUnavailable,
    cache_key,
    clear_caches,
    disk_cached,
    list_caches,
)
from clusterable.data.stored_images import StoredForm
from clusterable.data.transforms import Preprocessing, evaluation_view


def photo(path, width: int, height: int, seed: int = 0, mode: str = "RGB"):
    """A photo-like JPEG (smooth colour fields and mild noise) at quality 90."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width] / max(width, height)
    phase = rng.uniform(0.5, 2, 3)
    pixels = 128 + 80 * np.sin(7 * xx[..., None] * phase + 5 * yy[..., None] * phase[::-1])
    pixels += rng.normal(0, 6, pixels.shape)
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).convert(mode).save(path, quality=90)
    return path


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """1600 x 1200 and 400 x 300 JPEGs, a grayscale one, and a PNG."""
    folder = tmp_path_factory.mktemp("large")
    return [
        photo(folder / "a.jpg", 1600, 1200),
        photo(folder / "b.jpg", 400, 300, seed=1),
        photo(folder / "c.jpg", 900, 1300, seed=2, mode="L"),
        photo(folder / "d.png", 500, 260, seed=3),
    ]


@pytest.fixture
def photos(tmp_path):
    """Six small photos of their own, which a test may change."""
    folder = tmp_path / "photos"
    folder.mkdir()
    sizes = [(40, 30), (23, 37), (64, 48), (36, 27), (45, 33), (28, 40)]
    return [photo(folder / f"{i}.jpg", w, h, seed=i) for i, (w, h) in enumerate(sizes)]


def training(paths, size: int = 224, channels: int = 3) -> ImageFiles:
    return ImageFiles(paths, size, channels, preprocessing=Preprocessing(size=size), augment_seed=5)


def decoded_sizes(monkeypatch, form: StoredForm, path) -> list[tuple[int, int]]:
    """The sizes of what PIL decoded before resizing, reading ``path`` in ``form``."""
    sizes = []
    resize = Image.Image.resize
    monkeypatch.setattr(
        Image.Image,
        "resize",
        lambda self, *a, **k: sizes.append(self.size) or resize(self, *a, **k),
    )
    form.read(path)
    monkeypatch.undo()
    return sizes


@pytest.mark.parametrize(
    ("index", "full", "drafted"),
    [(0, (1600, 1200), (400, 300)), (1, (400, 300), (400, 300)), (2, (900, 1300), (450, 650))],
)
def test_draft_decodes_at_the_smallest_dct_scale_at_or_above_the_stored_size(
    large, monkeypatch, index, full, drafted
):
    form = training(large).stored_form
    assert form.draft and form.shorter_side == 256
    target = form.stored_size(*full)
    assert min(target) == 256
    assert decoded_sizes(monkeypatch, form, large[index]) == [drafted]
    scale = full[0] // drafted[0]
    assert all(d >= t for d, t in zip(drafted, target, strict=True))  # at or above
    if scale < 8:  # the next DCT scale would fall below the stored size
        assert any(math.ceil(f / (2 * scale)) < t for f, t in zip(full, target, strict=True))
    no_draft = StoredForm(3, 256)  # the evaluation view's: the whole image is decoded
    assert decoded_sizes(monkeypatch, no_draft, large[index]) == [full]
    assert np.asarray(form.read(large[index])).shape == (target[1], target[0], 3)


def test_a_png_is_resized_without_draft(large, monkeypatch):
    form = training(large).stored_form
    assert decoded_sizes(monkeypatch, form, large[3]) == [(500, 260)]
    assert form.read(large[3]).size == (492, 256)


def test_the_stored_shorter_side_is_the_evaluation_resize(large):
    for size in (224, 64):
        files = training(large, size)
        assert files.resize_size == Preprocessing(size=size).resize_size  # 256 for 224, 73
        shapes = files.stored_shapes(threads=2)
        assert shapes.min(axis=1).tolist() == [files.resize_size] * len(large)
        for path, (height, width) in zip(large, shapes, strict=True):
            stored = files.stored_form.read(path)
            assert stored.size == (width, height) and stored.mode == "RGB"
    assert training(large, channels=1).stored_form.read(large[0]).mode == "L"


def test_the_evaluation_view_is_the_whole_images_resize_and_centre_crop_as_before(large):
    """The evaluation view (what the test table embeds) reads the whole file, no draft."""
    evaluation = training(large).replace(augment_seed=None)
    assert not evaluation.stored_form.draft
    for index, path in enumerate(large):
        with Image.open(path) as image:
            before = evaluation_view(image.convert("RGB"), 224, 256, Image.Resampling.BILINEAR)
        np.testing.assert_array_equal(
            evaluation.pixels(index), np.asarray(before).transpose(2, 0, 1)
        )


def test_the_training_view_is_drawn_from_the_stored_image(large):
    files = training(large)
    assert files.pixels((0, 3)).shape == (3, 224, 224)
    cached = files.with_decoded(threads=2)
    for epoch in (0, 1):
        np.testing.assert_array_equal(cached.pixels((0, epoch)), files.pixels((0, epoch)))
    assert cached.decoded.nbytes == int(files.stored_shapes(2).prod(axis=1).sum()) * 3


# ------------------------------------------------------------------------------------------------
# the disk cache
def test_the_key_follows_the_paths_sizes_times_and_resolution(photos, tmp_path):
    files = training(photos, 16)
    key = cache_key(files)
    assert key == cache_key(training(list(photos), 16))  # the same files: the same key
    assert cache_key(training(photos, 24)) != key  # another resolution
    assert cache_key(training(photos, 16, channels=1)) != key
    assert cache_key(files.replace(augment_seed=None)) != key  # no draft
    assert cache_key(training(photos[::-1], 16)) != key  # another order
    stat = photos[0].stat()
    os.utime(photos[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    touched = cache_key(files)
    assert touched != key
    moved = tmp_path / "moved.jpg"
    photos[0].rename(moved)
    assert cache_key(training([moved, *photos[1:]], 16)) not in (key, touched)
    moved.rename(photos[0])
    os.utime(photos[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with photos[0].open("ab") as grown:  # one byte more, the same time
        grown.write(b"\0")
    os.utime(photos[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert cache_key(files) not in (key, touched)


def counting_reads(monkeypatch) -> list:
    """Patches :meth:`StoredForm.read` to record every file it decodes."""
    reads = []
    read = StoredForm.read
    monkeypatch.setattr(
        StoredForm, "read", lambda self, path: reads.append(path) or read(self, path)
    )
    return reads


def test_a_later_run_reuses_the_cache_without_decoding(photos, tmp_path, monkeypatch):
    files = training(photos, 16)
    reads = counting_reads(monkeypatch)
    first, built = disk_cached(files, threads=2, progress=False, root=tmp_path / "c")
    assert built and len(reads) == len(photos)
    again, built = disk_cached(training(photos, 16), threads=2, progress=False, root=tmp_path / "c")
    assert not built and len(reads) == len(photos)  # nothing decoded
    assert again.decoded.file == first.decoded.file
    in_ram = files.with_decoded(threads=2)
    assert isinstance(again.decoded.buffer, np.memmap)
    np.testing.assert_array_equal(
        again.decoded.buffer[: in_ram.decoded.nbytes], in_ram.decoded.buffer
    )
    np.testing.assert_array_equal(again.decoded.shapes, in_ram.decoded.shapes)
    for index in range(len(photos)):
        for epoch in (0, 2):
            np.testing.assert_array_equal(
                again.pixels((index, epoch)), files.pixels((index, epoch))
            )
    [entry] = list_caches(tmp_path / "c")
    assert (entry.key, entry.items) == (first.decoded.file.parent.name, len(photos))
    assert entry.bytes == in_ram.decoded.nbytes and entry.source == str(photos[0].parent)


def test_a_changed_file_builds_a_new_cache(photos, tmp_path):
    root = tmp_path / "c"
    first, _ = disk_cached(training(photos, 16), threads=1, progress=False, root=root)
    time.sleep(0.01)
    photo(photos[2], 50, 50, seed=9)  # replaced by another photo
    second, built = disk_cached(training(photos, 16), threads=1, progress=False, root=root)
    assert built and second.decoded.file != first.decoded.file
    assert second.decoded.image(2).shape == (18, 18, 3)  # the new photo's
    np.testing.assert_array_equal(second.pixels((2, 1)), training(photos, 16).pixels((2, 1)))
    assert len(list_caches(root)) == 2  # the old one stays until cleared


def test_a_subset_and_a_pickled_copy_read_the_same_mapped_file(photos, tmp_path):
    cached, _ = disk_cached(training(photos, 16), threads=1, progress=False, root=tmp_path / "c")
    shipped = pickle.dumps(cached)  # to a loader worker that is not forked
    assert len(shipped) < cached.decoded.nbytes  # the file's name, not its pixels
    copy = pickle.loads(shipped)
    assert isinstance(copy.decoded.buffer, np.memmap)
    subset = pickle.loads(pickle.dumps(cached[np.array([4, 1])]))
    np.testing.assert_array_equal(subset.pixels((1, 3)), cached.pixels((1, 3)))
    np.testing.assert_array_equal(copy.pixels((5, 2)), cached.pixels((5, 2)))


def build_in_turn(paths, root, first: bool, started, ready, queue) -> None:
    """One of two runs building the cache of ``paths`` at once (a process of its own): the
    first holds its build open until the second has started its own, and half a second more."""
    read = StoredForm.read

    def held_open(self, path):
        if not started.is_set():
            started.set()
            ready.wait(120)
            time.sleep(0.5)  # the second run reaches the cache meanwhile
        return read(self, path)

    if first:
        StoredForm.read = held_open
    else:
        started.wait(120)  # the first run is decoding
        ready.set()
    cached, built = disk_cached(training(paths, 16), threads=1, progress=False, root=root)
    queue.put((built, str(cached.decoded.file)))


def test_two_runs_building_at_once_make_one_cache(photos, tmp_path):
    root = tmp_path / "c"
    context = multiprocessing.get_context("spawn")
    queue, started, ready = context.Queue(), context.Event(), context.Event()
    runs = [
        context.Process(target=build_in_turn, args=(photos, root, first, started, ready, queue))
        for first in (True, False)
    ]
    for run in runs:
        run.start()
    results = sorted([queue.get(timeout=120), queue.get(timeout=120)], reverse=True)
    for run in runs:
        run.join(30)
    assert [built for built, _ in results] == [True, False]  # one built, the other waited
    assert results[0][1] == results[1][1]
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no temporary folder left
    assert len(list_caches(root)) == 1
    cached, built = disk_cached(training(photos, 16), threads=1, progress=False, root=root)
    assert not built
    np.testing.assert_array_equal(
        cached.decoded.buffer, training(photos, 16).with_decoded(threads=1).decoded.buffer
    )


def test_a_killed_build_leaves_nothing_a_later_run_reads(photos, tmp_path, monkeypatch):
    root = tmp_path / "c"
    read = StoredForm.read
    calls = []

    def killed(self, path):
        calls.append(path)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return read(self, path)

    monkeypatch.setattr(StoredForm, "read", killed)
    with pytest.raises(KeyboardInterrupt):
        disk_cached(training(photos, 16), threads=1, progress=False, root=root)
    assert list_caches(root) == [] and not list(root.glob(".*.tmp"))
    leftover = root / f".{cache_key(training(photos, 16))}.999.tmp"  # a build killed by SIGKILL
    leftover.mkdir()
    monkeypatch.undo()
    _, built = disk_cached(training(photos, 16), threads=1, progress=False, root=root)
    assert built and not leftover.exists()


def test_an_unusable_folder_or_full_disk_is_one_line_naming_what_to_do(
    photos, tmp_path, monkeypatch
):
    with pytest.raises(
        CacheUnavailable, match=r"^image cache folder .*0\.jpg: .*0\.jpg is a file, not a "
    ):
        disk_cached(training(photos, 16), threads=1, progress=False, root=photos[0])
    usage = type("usage", (), {"free": 100})
    monkeypatch.setattr(cache_module.shutil, "disk_usage", lambda path: usage)
    with pytest.raises(CacheUnavailable, match=r"the 6 images need 0 MiB and .* has 0 MiB free"):
        disk_cached(training(photos, 16), threads=1, progress=False, root=tmp_path / "c")
    assert list(tmp_path.joinpath("c").iterdir()) == [
        tmp_path / "c" / f"{cache_key(training(photos, 16))}.lock"
    ]


def test_a_system_without_file_locks_is_told_to_choose_another_setting(
    photos, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "fcntl", None)  # as on Windows
    with pytest.raises(
        CacheUnavailable, match=r"needs POSIX file locks .* choose cache_images ram"
    ):
        disk_cached(training(photos, 16), threads=1, progress=False, root=tmp_path / "c")


def test_the_cache_folder_is_the_variable_else_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("CLUSTERABLE_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_module.cache_root() == tmp_path / "mine"
    monkeypatch.delenv("CLUSTERABLE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_module.cache_root() == tmp_path / "xdg" / "clusterable" / "decoded-images"


def test_clear_deletes_the_named_caches_or_all_and_leaves_one_being_built(photos, tmp_path):
    root = tmp_path / "c"
    a, _ = disk_cached(training(photos, 16), threads=1, progress=False, root=root)
    b, _ = disk_cached(training(photos, 24), threads=1, progress=False, root=root)
    key_a, key_b = a.decoded.file.parent.name, b.decoded.file.parent.name
    with pytest.raises(ValueError, match=r"no image cache 'nope' in .*`clusterable cache list`"):
        clear_caches(["nope"], root)
    assert clear_caches([key_a], root) == ([key_a], [])
    assert [entry.key for entry in list_caches(root)] == [key_b]
    killed = "0123456789abcdef01234567"  # a cache's key
    (root / f".{killed}.12.tmp").mkdir()  # a killed build's
    with cache_module._locked(root / f"{key_b}.lock"):  # a run building key_b now
        assert clear_caches(None, root) == ([killed], [key_b])
    assert clear_caches(None, root) == ([key_b], [])
    assert list(root.iterdir()) == []


def test_clear_deletes_only_what_the_caches_are_made_of(photos, tmp_path):
    """The cache folder may hold a user's own files: `clear --all` and `clear NAME` leave every
    folder and file that is not a cache, a build's temporary or a lock of a cache's key."""
    root = tmp_path / "c"
    cache, _ = disk_cached(training(photos, 16), threads=1, progress=False, root=root)
    key = cache.decoded.file.parent.name
    mine = [root / "mystuff", root / ".mystuff.1.tmp", root / ("f" * 24)]  # the last: no meta
    for folder in mine:
        folder.mkdir()
        (folder / "notes.txt").write_text("mine")
    (root / "notes.lock").write_text("mine")
    with pytest.raises(ValueError, match=r"no image cache 'mystuff'"):
        clear_caches(["mystuff"], root)
    assert clear_caches(None, root) == ([key], [])
    assert sorted(root.iterdir()) == sorted([*mine, root / "notes.lock"])
    assert all((folder / "notes.txt").read_text() == "mine" for folder in mine)
