"""Decoded training images kept on disk between runs (``cache_images: disk``, issue 40).

A cache is a folder under :func:`cache_root` named by its key (:func:`cache_key`): a hash of
every file's absolute path, size and modification time, of the form the images are stored in
(:class:`~clusterable.data.stored_images.StoredForm`: channels, resolution, interpolation,
draft), of the decoder's name and version and of :data:`FORMAT_VERSION`. It holds

- ``pixels.npy``: one uint8 array, every stored image one after the other, read memory-mapped
  (the page cache holds what RAM can; forked loader workers share it);
- ``index.npz``: each image's ``offsets`` in it and stored ``shapes`` (height, width);
- ``meta.json``: what ``clusterable cache list`` shows.

A later run over the same files reuses it; a changed file (its size or time) gives another key,
so a new cache is built, and the old one stays until ``clusterable cache clear``. It is built in
a temporary folder beside it, renamed into place once complete, under an exclusive lock on
``KEY.lock`` (``fcntl.flock``): a second run building the same cache at once waits, then reads
the first run's.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clusterable.data.dataset import ImageFiles
from clusterable.data.stored_images import DecodedImages, named_read_errors

#: Changed whenever the files' layout or what the pixels are changes: older caches are not read.
FORMAT_VERSION = 2  # 2: 16-bit grayscale images scaled to 8 bits, no longer clipped white

#: The environment variable that names the folder caches are kept in.
CACHE_DIR_VARIABLE = "CLUSTERABLE_CACHE_DIR"


class CacheUnavailable(ValueError):
    """The cache's folder cannot be written, or has too little free space for the images."""


def cache_root() -> Path:
    """Where caches are kept: ``$CLUSTERABLE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/clusterable/decoded-images`` (``~/.cache`` without it)."""
    given = os.environ.get(CACHE_DIR_VARIABLE)
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "clusterable" / "decoded-images"


def check_cache_folder(root: Path | None = None) -> Path:
    """``root`` (default :func:`cache_root`) where it is, or can be made, a folder this process
    writes; nothing is created.

    Raises
    ------
    CacheUnavailable
        It cannot, named with what to do.
    """
    root = cache_root() if root is None else root
    existing = root
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    problem = None
    if not existing.is_dir():
        problem = f"{existing} is a file, not a folder"
    elif not os.access(existing, os.W_OK | os.X_OK):
        problem = f"{existing} is not writable"
    if problem is not None:
        raise CacheUnavailable(
            f"image cache folder {root}: {problem}; set {CACHE_DIR_VARIABLE} to a writable folder"
        )
    return root


def usable_root(root: Path) -> Path:
    """``root``, created if missing (:func:`check_cache_folder` first)."""
    check_cache_folder(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CacheUnavailable(
            f"image cache folder {root}: {error.strerror or error}; set {CACHE_DIR_VARIABLE} to a "
            "writable folder"
        ) from None
    return root


def cache_key(files: ImageFiles) -> str:
    """The key of ``files``' cache: a hash of what makes its pixels (see the module's text).

    Raises
    ------
    FileNotFoundError
        A file is missing, named as at access.
    """
    form = files.stored_form
    digest = hashlib.sha256(f"{FORMAT_VERSION}\n{form!r}\n{form.decoder}\n".encode())
    for path in files.paths:
        with named_read_errors(path):
            stat = path.stat()
        digest.update(f"{os.path.abspath(path)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:KEY_LENGTH]


#: Hex digits of a cache's key (:func:`cache_key`).
KEY_LENGTH = 24


def is_cache_key(name: str) -> bool:
    """Whether ``name`` is a cache's key: what names the caches, their locks and their builds'
    temporaries, and nothing else in the cache folder (which may hold other files)."""
    return len(name) == KEY_LENGTH and all(c in "0123456789abcdef" for c in name)


@contextmanager
def _locked(lock_file: Path, wait: bool = True) -> Iterator[bool]:
    """An exclusive lock on ``lock_file`` while inside: True once held; False at once when
    another process holds it and ``wait`` is false."""
    try:
        import fcntl  # POSIX: the only place disk caches need it
    except ImportError:
        raise CacheUnavailable(
            "cache_images disk needs POSIX file locks (fcntl), which this system lacks; "
            "choose cache_images ram or none"
        ) from None

    with open(lock_file, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(files: ImageFiles, folder: Path, threads: int, progress: bool) -> None:
    """Decode ``files`` into a temporary folder beside ``folder``, then rename it ``folder``."""
    for stale in folder.parent.glob(f".{folder.name}.*.tmp"):  # a build that was killed
        shutil.rmtree(stale, ignore_errors=True)
    building = folder.parent / f".{folder.name}.{os.getpid()}.tmp"
    building.mkdir()
    try:
        shapes = files.stored_shapes(threads)
        stored_bytes = int(shapes.prod(axis=1).sum()) * files.channels
        free = shutil.disk_usage(folder.parent).free
        if stored_bytes > free:
            raise CacheUnavailable(
                f"cache_images disk: the {len(files):,} images need {stored_bytes / 2**20:,.0f} "
                f"MiB and {folder.parent} has {free / 2**20:,.0f} MiB free; free some space "
                f"or set {CACHE_DIR_VARIABLE} to a folder on a larger disk"
            )
        pixels = np.lib.format.open_memmap(
            building / "pixels.npy", mode="w+", dtype=np.uint8, shape=(max(1, stored_bytes),)
        )
        decoded = DecodedImages.decode(
            files.paths, files.stored_form, shapes, threads, buffer=pixels, progress=progress
        )
        pixels.flush()
        del pixels
        np.savez(building / "index.npz", offsets=decoded.offsets, shapes=decoded.shapes)
        meta = {
            "format": FORMAT_VERSION,
            "items": len(files),
            "bytes": stored_bytes,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "source": os.path.commonpath([os.path.abspath(p.parent) for p in files.paths] or ["."]),
            "form": repr(files.stored_form),
            "decoder": files.stored_form.decoder,
        }
        (building / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        os.rename(building, folder)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise


def _opened(files: ImageFiles, folder: Path) -> ImageFiles:
    """``files`` reading their images from the cache in ``folder``."""
    with np.load(folder / "index.npz") as index:
        offsets, shapes = index["offsets"], index["shapes"]
    pixels = folder / "pixels.npy"
    decoded = DecodedImages(
        np.load(pixels, mmap_mode="r"), offsets, shapes, files.stored_form, pixels
    )
    return files.replace(decoded=decoded)


def disk_cached(
    files: ImageFiles, threads: int, progress: bool, root: Path | None = None
) -> tuple[ImageFiles, bool]:
    """``files`` reading their images from their disk cache, built here if there is none.

    Parameters
    ----------
    files : ImageFiles
        A training set's images.
    threads : int
        Decoding threads, where the cache is built.
    progress : bool
        A progress bar while it is built.
    root : Path, optional
        The folder of caches; default :func:`cache_root`.

    Returns
    -------
    files : ImageFiles
        A copy reading the memory-mapped cache.
    built : bool
        Whether this call built it (False: an earlier or concurrent run's was reused).

    Raises
    ------
    CacheUnavailable
        The folder cannot be written (:func:`check_cache_folder`) or has too little free space.
    FileNotFoundError, ValueError
        A file that is missing or cannot be decoded, named as at access.
    """
    root = usable_root(cache_root() if root is None else root)
    folder = root / cache_key(files)
    built = False
    if not folder.is_dir():
        with _locked(root / f"{folder.name}.lock"):
            if not folder.is_dir():  # not built by another run while this one waited
                _build(files, folder, threads, progress)
                built = True
    return _opened(files, folder), built


@dataclass(frozen=True)
class CacheEntry:
    """One cache, as ``meta.json`` describes it."""

    key: str
    folder: Path
    items: int
    bytes: int
    created: str
    source: str


def list_caches(root: Path | None = None) -> list[CacheEntry]:
    """The complete caches under ``root`` (default :func:`cache_root`), oldest first; a
    folder without a readable ``meta.json`` of this format is left out."""
    root = cache_root() if root is None else root
    if not root.is_dir():
        return []
    entries = []
    for folder in root.iterdir():
        if folder.name.startswith(".") or not folder.is_dir():
            continue
        try:
            meta = json.loads((folder / "meta.json").read_text())
        except (OSError, ValueError):
            continue
        if meta.get("format") != FORMAT_VERSION:
            continue
        entries.append(
            CacheEntry(
                folder.name, folder, meta["items"], meta["bytes"], meta["created"], meta["source"]
            )
        )
    return sorted(entries, key=lambda entry: entry.created)


def clear_caches(keys: list[str] | None, root: Path | None = None) -> tuple[list[str], list[str]]:
    """Delete the caches named by ``keys`` (None: every cache and every leftover of a killed
    build) under ``root`` (default :func:`cache_root`). Only what this module writes goes: a
    folder of a cache's key holding its ``meta.json`` (of any format version), the build
    temporaries ``.KEY.*.tmp`` and the locks ``KEY.lock``; anything else a user keeps in that
    folder stays.

    Returns
    -------
    cleared : list of str
        The keys deleted.
    busy : list of str
        The keys left alone because a run is building them now.

    Raises
    ------
    ValueError
        A key in ``keys`` names no cache, named with where to list them.
    """
    root = cache_root() if root is None else root
    present = (
        {
            path.name
            for path in root.iterdir()
            if is_cache_key(path.name) and (path / "meta.json").is_file()
        }
        if root.is_dir()
        else set()
    )
    if keys is not None:
        unknown = [key for key in keys if key not in present]
        if unknown:
            raise ValueError(
                f"no image cache {unknown[0]!r} in {root}; `clusterable cache list` shows them"
            )
        targets = sorted(set(keys))
    else:  # the caches, and what builds left: temporary folders and lock files
        locks = {p.name.removesuffix(".lock") for p in root.glob("*.lock")}
        building = {p.name.split(".")[1] for p in root.glob(".*.*.tmp")}
        targets = sorted(present | {key for key in locks | building if is_cache_key(key)})
    cleared, busy = [], []
    for key in targets:
        lock = root / f"{key}.lock"
        with _locked(lock, wait=False) as held:
            if not held:
                busy.append(key)
                continue
            shutil.rmtree(root / key, ignore_errors=True)
            for leftover in root.glob(f".{key}.*.tmp"):
                shutil.rmtree(leftover, ignore_errors=True)
            lock.unlink(missing_ok=True)
        cleared.append(key)
    return cleared, busy
