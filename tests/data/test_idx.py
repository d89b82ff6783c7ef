"""IDX reading: round trips, gzip detection, and every kind of damage named in the error."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from clusterable.data import read_idx, read_idx_images_labels


@pytest.mark.parametrize("name", ["a-ubyte", "a-ubyte.gz"])
@pytest.mark.parametrize(
    "array",
    [
        np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4),
        np.array([7, 0, 255], dtype=np.uint8),
        np.array([[-5, 70000], [3, 1]], dtype=np.int32),
        np.array([0.5, -1.25], dtype=np.float32),
    ],
)
def test_round_trip_raw_and_gz(tmp_path, write_idx, name, array):
    result = read_idx(write_idx(tmp_path / name, array))
    assert result.shape == array.shape
    assert result.dtype == array.dtype
    assert result.dtype.isnative
    np.testing.assert_array_equal(result, array)


def test_compression_is_detected_from_content_not_name(tmp_path, write_idx):
    array = np.arange(6, dtype=np.uint8)
    gz_without_suffix = write_idx(tmp_path / "x-ubyte", array, gz=True)
    raw_with_suffix = write_idx(tmp_path / "y-ubyte.gz", array, gz=False)
    np.testing.assert_array_equal(read_idx(gz_without_suffix), array)
    np.testing.assert_array_equal(read_idx(raw_with_suffix), array)


def _error(path) -> str:
    with pytest.raises(ValueError) as info:
        read_idx(path)
    message = str(info.value)
    assert str(path) in message
    return message


def test_bad_magic_number(tmp_path):
    path = tmp_path / "bad-magic"
    path.write_bytes(b"\x01\x02\x08\x01" + bytes(8))
    assert "bad magic number 0x01020801" in _error(path)


def test_text_file_has_bad_magic(tmp_path):
    path = tmp_path / "page.gz"
    path.write_bytes(b"<html>404 not found</html>")
    assert "bad magic number" in _error(path)


def test_unknown_dtype_code(tmp_path, write_idx, encode_idx):
    path = write_idx(tmp_path / "code", encode_idx(np.zeros(3, np.uint8), code=0x07))
    assert "unknown data-type code 0x07" in _error(path)


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_data(tmp_path, write_idx, encode_idx, gz):
    data = encode_idx(np.zeros((4, 5, 5), np.uint8))[:-10]
    message = _error(write_idx(tmp_path / "short", data, gz=gz))
    assert "truncated" in message
    assert "(4, 5, 5)" in message


def test_truncated_header(tmp_path, write_idx, encode_idx):
    data = encode_idx(np.zeros((4, 5, 5), np.uint8))[:9]
    assert "truncated inside the header" in _error(write_idx(tmp_path / "head", data))


def test_too_short_for_magic(tmp_path):
    path = tmp_path / "tiny"
    path.write_bytes(b"\x00\x00")
    assert "truncated" in _error(path)


def test_truncated_gzip_stream(tmp_path, encode_idx):
    path = tmp_path / "cut.gz"
    images = np.random.default_rng(0).integers(0, 256, (50, 28, 28), dtype=np.uint8)
    path.write_bytes(gzip.compress(encode_idx(images))[:2000])
    assert "corrupt or truncated gzip" in _error(path)


def test_trailing_bytes(tmp_path, write_idx, encode_idx):
    data = encode_idx(np.zeros(3, np.uint8)) + b"junk"
    assert "4 unexpected bytes" in _error(write_idx(tmp_path / "long", data))


def test_images_labels_pair(tmp_path, write_idx):
    images = np.zeros((3, 2, 2), np.uint8)
    labels = np.array([1, 2, 3], np.uint8)
    x, y = read_idx_images_labels(
        write_idx(tmp_path / "i.gz", images), write_idx(tmp_path / "l.gz", labels)
    )
    assert x.shape == (3, 2, 2)
    assert y.dtype == np.int64
    assert y.tolist() == [1, 2, 3]


def test_pair_count_mismatch_names_both_files(tmp_path, write_idx):
    images = write_idx(tmp_path / "i", np.zeros((3, 2, 2), np.uint8))
    labels = write_idx(tmp_path / "l", np.zeros(4, np.uint8))
    with pytest.raises(ValueError, match="3 images but 4 labels") as info:
        read_idx_images_labels(images, labels)
    assert str(images) in str(info.value)
    assert str(labels) in str(info.value)


def test_pair_swapped_files(tmp_path, write_idx):
    images = write_idx(tmp_path / "i", np.zeros((3, 2, 2), np.uint8))
    labels = write_idx(tmp_path / "l", np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="is it a labels file"):
        read_idx_images_labels(labels, images)


def test_pair_wrong_image_dtype(tmp_path, write_idx):
    images = write_idx(tmp_path / "i", np.zeros((3, 2, 2), np.float32))
    labels = write_idx(tmp_path / "l", np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="float32"):
        read_idx_images_labels(images, labels)
