"""Datasets registered by their own modules: a new one is one decorated loader."""

from __future__ import annotations

import numpy as np
import pytest

from clusterable.data import LabelledDataset, available_datasets, load_dataset, registry


@pytest.fixture
def isolated_registry():
    with registry.DATASETS.scratch():
        yield


def toy(root, split, image_size, channels) -> LabelledDataset:
    x = np.arange(24, dtype=np.float32).reshape(12, 2)
    labels = np.repeat(np.arange(3), 4)
    return LabelledDataset(f"toy/{split}", x, labels, source=str(root))


def test_a_registered_loader_is_a_dataset_name():
    with registry.DATASETS.scratch():
        registry.register_dataset("toy", licence="CC0")(toy)
        assert "toy" in available_datasets()
        assert registry.DATASETS.metadata("toy")["licence"] == "CC0"
        ds = load_dataset("toy", split="test")
        assert ds.name == "toy/test" and ds.num_classes == 3
    assert "toy" not in available_datasets()


def test_a_path_prefix_names_the_users_files_and_needs_them(isolated_registry, tmp_path):
    registry.register_dataset("toy-files", path_prefix="toy")(toy)
    assert load_dataset(f"toy:{tmp_path}").source == str(tmp_path)
    with pytest.raises(ValueError, match="give root=PATH or the name 'toy:PATH'"):
        load_dataset("toy-files")
    with pytest.raises(ValueError, match="only folder:PATH, table:PATH, toy:PATH take a path"):
        load_dataset(f"toys:{tmp_path}")
    with pytest.raises(
        ValueError, match=r"available: .*toy-files, .*folder:PATH, table:PATH, toy:PATH"
    ):
        load_dataset("toyz")
    with pytest.raises(RuntimeError, match="path prefix 'toy' is taken by 'toy-files'"):
        registry.register_dataset("other-files", path_prefix="toy")


def test_every_built_in_set_is_registered_by_its_module():
    assert set(available_datasets()) == {
        "digits", "mnist", "fashion-mnist", "usps", "cub200", "cars196", "sop", "inshop",
        "image-folder", "table",
    }  # fmt: skip


def test_a_name_registered_twice_is_refused(isolated_registry):
    with pytest.raises(RuntimeError, match="'digits' is registered twice"):
        registry.register_dataset("digits")(toy)


def test_a_data_set_held_as_arrays_says_how_it_scaled_its_items():
    from sklearn.datasets import load_digits

    said = registry.dataset_items("digits")
    assert said is not None and "load_digits().images (pixel values 0..16) / 16" in said
    by_hand = (load_digits().images / 16).astype(np.float32)[:, None]
    np.testing.assert_array_equal(load_dataset("digits", split="all").x, by_hand)
    assert registry.dataset_items("folder:/photos") is None  # its files say it
    assert registry.dataset_items("cub200") is None
