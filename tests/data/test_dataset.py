"""LabelledDataset in its two storage forms, subsets, arrays of its items, concatenation; the
unlabelled (-1) convention."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from clusterable.data import UNLABELLED, ImageFiles, LabelledDataset, concatenate, labelled_mask


def _toy(n: int = 6) -> LabelledDataset:
    x = np.arange(n * 4, dtype=np.float64).reshape(n, 4) / (n * 4)
    labels = [0, 1, 2, 0, 1, -1][:n]
    return LabelledDataset("toy", x, labels, class_names=["a", "b", "c"])


def test_array_items_are_float32_tensors_with_int_labels():
    ds = _toy()
    x, label = ds[1]
    assert isinstance(x, torch.Tensor)
    assert x.dtype == torch.float32
    assert tuple(x.shape) == ds.input_shape == (4,)
    assert isinstance(label, int)
    assert label == 1
    assert len(ds) == 6


def test_attributes_and_defaults():
    ds = _toy()
    assert ds.labels.dtype == np.int64
    assert ds.fine_labels.tolist() == ds.labels.tolist()
    assert ds.num_classes == 3  # -1 is not a class
    assert ds.class_names == ["a", "b", "c"]
    assert ds.fine_class_names == ["a", "b", "c"]
    assert "n=6" in repr(ds)
    unnamed = LabelledDataset("u", np.zeros((2, 1)), [0, 3])
    assert unnamed.class_names == ["0", "1", "2", "3"]


def test_length_mismatch_is_refused():
    with pytest.raises(ValueError, match="3 items but 2 labels"):
        LabelledDataset("bad", np.zeros((3, 2)), [0, 1])


def test_subset_by_indices_and_mask():
    ds = _toy()
    sub = ds.subset([4, 0])
    assert isinstance(sub, LabelledDataset)
    assert sub.labels.tolist() == [1, 0]
    np.testing.assert_array_equal(sub.x, ds.x[[4, 0]])
    masked = ds.subset(ds.labels == 0)
    assert masked.labels.tolist() == [0, 0]
    assert masked.class_names == ds.class_names
    assert masked.name == ds.name


def test_dataloader_collates_batches():
    batch_x, batch_y = next(iter(DataLoader(_toy(), batch_size=4)))
    assert batch_x.shape == (4, 4)
    assert batch_x.dtype == torch.float32
    assert batch_y.dtype == torch.int64


def test_image_files_are_resized_chw_in_unit_range(tmp_path, image_writer):
    red = image_writer(tmp_path / "red.png", (255, 0, 0), size=(30, 10))
    gray = tmp_path / "gray.png"
    Image.new("L", (5, 7), 128).save(gray)
    files = ImageFiles([red, gray], size=16)
    assert files.shape == (2, 3, 16, 16)
    first = files[0]
    assert first.shape == (3, 16, 16)
    assert first.dtype == np.float32
    np.testing.assert_allclose(first[:, 8, 8], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(files[1], 128 / 255, atol=1e-6)  # grayscale turned RGB
    assert ImageFiles([red], size=8, channels=1)[0].shape == (1, 8, 8)


def test_image_dataset_subsets_stay_lazy(tmp_path, image_writer):
    paths = [image_writer(tmp_path / f"{i}.png", (i * 40, 0, 0)) for i in range(4)]
    ds = LabelledDataset("imgs", ImageFiles(paths, size=8), [0, 0, 1, 1])
    assert ds.input_shape == (3, 8, 8)
    sub = ds.subset([3, 1])
    assert isinstance(sub.x, ImageFiles)
    assert sub.x.paths == [paths[3], paths[1]]
    x, label = sub[0]
    assert x.shape == (3, 8, 8)
    assert label == 1
    assert x[0, 0, 0].item() == pytest.approx(120 / 255)


def test_unreadable_image_names_the_file(tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    with pytest.raises(ValueError, match=re.escape("bad.jpg")):
        ImageFiles([bad])[0]
    with pytest.raises(FileNotFoundError, match=re.escape("gone.png")):
        ImageFiles([tmp_path / "gone.png"])[0]


def test_concatenate_arrays_and_files(tmp_path, image_writer):
    ds = _toy()
    both = concatenate(ds, ds.subset([0]))
    assert len(both) == 7
    assert both.labels[-1] == 0
    assert both.name == "toy"
    paths = [image_writer(tmp_path / f"{i}.png", (0, 0, 0)) for i in range(2)]
    a = LabelledDataset("a", ImageFiles(paths[:1], 8), [0])
    b = LabelledDataset("b", ImageFiles(paths[1:], 8), [1])
    joined = concatenate(a, b)
    assert isinstance(joined.x, ImageFiles)
    assert joined.labels.tolist() == [0, 1]


def test_concatenate_refuses_mismatches(tmp_path, image_writer):
    ds = _toy()
    with pytest.raises(ValueError, match="shape"):
        concatenate(ds, LabelledDataset("other", np.zeros((1, 5)), [0]))
    path = image_writer(tmp_path / "x.png", (0, 0, 0))
    images = LabelledDataset("imgs", ImageFiles([path], 2), [0])
    arrays = LabelledDataset("arr", np.zeros((1, 3, 2, 2)), [0])
    with pytest.raises(TypeError, match="in-memory arrays with image files"):
        concatenate(arrays, images)


def test_features_of_an_array_dataset_are_its_items_and_labels():
    ds = LabelledDataset("cubes", np.arange(24).reshape(3, 2, 2, 2), [2, -1, 0])
    x, labels = ds.features()
    assert x.shape == (3, 2, 2, 2) and x.dtype == np.float32
    np.testing.assert_array_equal(x, np.arange(24).reshape(3, 2, 2, 2))
    assert labels.tolist() == [2, -1, 0]
    flat, _ = ds.features(flat=True)
    np.testing.assert_array_equal(flat, np.arange(24, dtype=np.float32).reshape(3, 8))


def test_features_of_image_files_decode_every_item(tmp_path, image_writer):
    paths = [image_writer(tmp_path / f"{i}.png", (i * 40, 0, 0)) for i in range(3)]
    ds = LabelledDataset("imgs", ImageFiles(paths, size=4), [0, 1, -1])
    x, labels = ds.features()
    assert x.shape == (3, 3, 4, 4) and x.dtype == np.float32
    np.testing.assert_array_equal(x, np.stack([ds[i][0].numpy() for i in range(3)]))
    assert ds.features(flat=True)[0].shape == (3, 48)
    assert labels.tolist() == [0, 1, -1]
    assert ds.subset(np.zeros(0, dtype=int)).features()[0].shape == (0, 3, 4, 4)


def test_labelled_drops_the_unlabelled_items_in_order():
    ds = _toy()
    kept = ds.labelled()
    assert kept.labels.tolist() == [0, 1, 2, 0, 1]
    np.testing.assert_array_equal(kept.x, ds.x[:5])
    assert kept.class_names == ds.class_names


def test_labelled_mask_for_arrays_and_tensors():
    labels = np.array([3, UNLABELLED, 0, UNLABELLED])
    assert UNLABELLED == -1
    assert labelled_mask(labels).tolist() == [True, False, True, False]
    mask = labelled_mask(torch.from_numpy(labels))
    assert isinstance(mask, torch.Tensor) and mask.tolist() == [True, False, True, False]
