"""Fixtures shared by the data tests: IDX files, tiny images, a toy dataset."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clusterable.data import LabelledDataset
from clusterable.data import locate as locate_module

_IDX_CODES = {np.dtype(np.uint8): 0x08, np.dtype(np.int32): 0x0C, np.dtype(np.float32): 0x0D}


def idx_bytes(array: np.ndarray, code: int | None = None) -> bytes:
    """The IDX encoding of ``array`` (big-endian), with its data-type code or the one given."""
    array = np.asarray(array)
    code = _IDX_CODES[array.dtype] if code is None else code
    header = bytes([0, 0, code, array.ndim]) + np.array(array.shape, dtype=">u4").tobytes()
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


@pytest.fixture
def encode_idx() -> Callable[..., bytes]:
    return idx_bytes


@pytest.fixture
def write_idx() -> Callable[..., Path]:
    def write(path: Path, array: np.ndarray | bytes, gz: bool | None = None) -> Path:
        data = array if isinstance(array, bytes) else idx_bytes(array)
        if path.suffix == ".gz" if gz is None else gz:
            data = gzip.compress(data)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    return write


@pytest.fixture
def write_mnist_dir(write_idx) -> Callable[..., tuple[np.ndarray, ...]]:
    """Writes the four IDX files of a tiny MNIST-format set; returns the arrays written."""

    def write(
        directory: Path, n_train: int = 30, n_test: int = 20, gz: bool = True, sep: str = "-"
    ) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(0)
        arrays = []
        for prefix, n in (("train", n_train), ("t10k", n_test)):
            images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
            labels = (np.arange(n) % 10).astype(np.uint8)
            suffix = ".gz" if gz else ""
            write_idx(directory / f"{prefix}-images{sep}idx3-ubyte{suffix}", images)
            write_idx(directory / f"{prefix}-labels{sep}idx1-ubyte{suffix}", labels)
            arrays += [images, labels]
        return tuple(arrays)

    return write


def write_image(path: Path, color: tuple[int, int, int], size: tuple[int, int] = (12, 9)) -> Path:
    """A one-colour RGB image (width, height) at ``path``; the format follows the suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)
    return path


@pytest.fixture
def isolated(tmp_path, monkeypatch) -> Path:
    """Point the default places at empty folders under tmp_path; returns the cache root."""
    monkeypatch.setattr(locate_module, "SYSTEM_DATA_DIR", tmp_path / "system")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "clusterable"


@pytest.fixture
def image_writer() -> Callable[..., Path]:
    return write_image


def toy_dataset(labels: list[int]) -> LabelledDataset:
    """One 1-D item per label, item i holding the value i, classes named ``c0, c1, ...``."""
    x = np.arange(len(labels), dtype=np.float32)[:, None]
    names = [f"c{c}" for c in range(max(labels) + 1)]
    return LabelledDataset("toy", x, labels, class_names=names)


@pytest.fixture
def make_toy() -> Callable[[list[int]], LabelledDataset]:
    return toy_dataset
