"""load_dataset on every source: fixture files written by the tests, and real Fashion-MNIST."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from scipy.io import savemat

from clusterable.data import (
    UNLABELLED,
    ImageFiles,
    available_datasets,
    load_dataset,
    stratified_split,
)

REAL_FASHION = Path("/usr/share/datasets/fashion-mnist")


def test_available_datasets():
    names = available_datasets()
    assert names == sorted(names)
    for name in ["digits", "mnist", "fashion-mnist", "usps", "cub200", "cars196", "sop", "inshop"]:
        assert name in names
    assert {"image-folder", "table"} <= set(names)


def test_unknown_name_split_and_view():
    with pytest.raises(ValueError, match=r"available: .*digits"):
        load_dataset("imagenet")
    with pytest.raises(ValueError, match="split='val'"):
        load_dataset("digits", split="val")
    with pytest.raises(ValueError, match="'fine' or 'coarse'"):
        load_dataset("digits", labels="sub")
    with pytest.raises(ValueError, match="folder:PATH"):
        load_dataset("cub200:/tmp")


# --- digits -----------------------------------------------------------------------------------


def test_digits_split_is_deterministic_stratified_and_disjoint():
    train = load_dataset("digits", split="train")
    test = load_dataset("digits", split="test")
    everything = load_dataset("digits", split="all")
    assert train.input_shape == (1, 8, 8)
    assert (len(train), len(test), len(everything)) == (1258, 539, 1797)
    np.testing.assert_array_equal(train.x, load_dataset("digits", split="train").x)
    per_class = np.bincount(everything.labels)
    np.testing.assert_allclose(np.bincount(train.labels), 0.7 * per_class, atol=0.5)
    assert np.bincount(test.labels).tolist() == (per_class - np.bincount(train.labels)).tolist()
    train_index, test_index = stratified_split(everything.labels)
    assert np.intersect1d(train_index, test_index).size == 0
    np.testing.assert_array_equal(train.x, everything.x[train_index])  # file order kept
    assert 0.0 <= everything.x.min() and everything.x.max() == 1.0


def test_stratified_split_puts_every_class_on_both_sides():
    train, test = stratified_split(np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2]))
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2])
    assert set(labels[train]) == set(labels[test]) == {0, 1, 2}


def test_digits_coarse_labels():
    ds = load_dataset("digits", labels="coarse")
    assert ds.num_classes == 2
    assert np.array_equal(ds.labels, ds.fine_labels // 5)
    assert len(np.unique(ds.fine_labels)) == 10


# --- IDX: mnist and fashion-mnist -----------------------------------------------------------


@pytest.mark.parametrize(("gz", "sep"), [(True, "-"), (False, "-"), (True, "."), (False, ".")])
def test_mnist_from_root(tmp_path, isolated, write_mnist_dir, gz, sep):
    train_images, train_labels, test_images, _ = write_mnist_dir(tmp_path / "m", gz=gz, sep=sep)
    train = load_dataset("mnist", root=tmp_path / "m")
    assert train.name == "mnist/train"
    assert len(train) == 30
    assert train.input_shape == (1, 28, 28)
    assert train.x.dtype == np.float32
    np.testing.assert_allclose(train.x[:, 0] * 255, train_images, atol=1e-3)
    assert train.labels.tolist() == train_labels.tolist()
    test = load_dataset("mnist", root=str(tmp_path / "m"), split="test")
    assert len(test) == 20
    both = load_dataset("mnist", root=tmp_path / "m", split="all")
    assert len(both) == 50
    np.testing.assert_allclose(both.x[30:, 0] * 255, test_images, atol=1e-3)


def test_root_may_be_the_parent_folder(tmp_path, isolated, write_mnist_dir):
    write_mnist_dir(tmp_path / "data" / "fashion-mnist")
    ds = load_dataset("fashion-mnist", root=tmp_path / "data", split="test")
    assert len(ds) == 20
    assert ds.class_names[9] == "Ankle boot"


def test_default_cache_folder_is_searched(isolated, write_mnist_dir):
    write_mnist_dir(isolated / "mnist")
    assert len(load_dataset("mnist")) == 30


def test_given_root_comes_first(tmp_path, isolated, write_mnist_dir):
    write_mnist_dir(isolated / "mnist", n_train=10)
    write_mnist_dir(tmp_path / "mine", n_train=40)
    assert len(load_dataset("mnist", root=tmp_path / "mine")) == 40


def test_idx_coarse_labels(tmp_path, isolated, write_mnist_dir):
    write_mnist_dir(tmp_path)
    ds = load_dataset("fashion-mnist", root=tmp_path, labels="coarse")
    assert ds.labels.tolist() == [c // 5 for c in ds.fine_labels]
    assert ds.class_names[0].startswith("T-shirt/top | Trouser")


def test_missing_fashion_mnist_says_where_and_how(tmp_path, isolated):
    with pytest.raises(FileNotFoundError) as info:
        load_dataset("fashion-mnist", root=tmp_path / "nowhere")
    message = str(info.value)
    assert str(tmp_path / "nowhere") in message
    assert str(tmp_path / "system" / "fashion-mnist") in message
    assert str(isolated / "fashion-mnist") in message
    assert "train-images-idx3-ubyte" in message
    assert "apt-get install dataset-fashion-mnist" in message
    assert "--root DIR" in message


def test_missing_test_files_only(tmp_path, isolated, write_mnist_dir):
    write_mnist_dir(tmp_path)
    for path in tmp_path.glob("t10k-*"):
        path.unlink()
    assert len(load_dataset("mnist", root=tmp_path)) == 30
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte"):
        load_dataset("mnist", root=tmp_path, split="test")


def test_corrupt_idx_through_the_loader(tmp_path, isolated, write_mnist_dir):
    write_mnist_dir(tmp_path, gz=False)
    images = tmp_path / "train-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:-100])
    with pytest.raises(ValueError, match="truncated") as info:
        load_dataset("mnist", root=tmp_path)
    assert str(images) in str(info.value)
    images.write_bytes(b"\x08\x03" + images.read_bytes()[2:])
    with pytest.raises(ValueError, match="bad magic number"):
        load_dataset("mnist", root=tmp_path)


@pytest.mark.skipif(
    not REAL_FASHION.is_dir(),
    reason="Fashion-MNIST not installed: `apt-get install dataset-fashion-mnist` (as root)",
)
def test_real_fashion_mnist():
    train = load_dataset("fashion-mnist")  # found in /usr/share/datasets without a root
    assert train.x.shape == (60000, 1, 28, 28)
    assert np.bincount(train.labels).tolist() == [6000] * 10
    test = load_dataset("fashion-mnist", split="test", labels="coarse")
    assert test.x.shape == (10000, 1, 28, 28)
    assert np.bincount(test.fine_labels).tolist() == [1000] * 10
    assert np.bincount(test.labels).tolist() == [5000, 5000]
    assert test.x.dtype == np.float32
    assert test.x.min() == 0.0
    assert test.x.max() == 1.0


# --- USPS --------------------------------------------------------------------------------------


def _write_usps(path: Path, n_train: int = 12, n_test: int = 5, scale: float = 1.0) -> Path:
    rng = np.random.default_rng(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as file:
        for split, n in (("train", n_train), ("test", n_test)):
            group = file.create_group(split)
            group["data"] = rng.uniform(0, scale, (n, 256))
            group["target"] = np.arange(n) % 10
    return path


def test_usps_from_file_and_directory(tmp_path, isolated):
    path = _write_usps(tmp_path / "usps.h5")
    train = load_dataset("usps", root=path)
    assert train.input_shape == (1, 16, 16)
    assert len(train) == 12
    assert train.labels.tolist() == [i % 10 for i in range(12)]
    assert len(load_dataset("usps", root=tmp_path, split="test")) == 5
    assert len(load_dataset("usps", root=tmp_path, split="all")) == 17
    assert load_dataset("usps", root=tmp_path, labels="coarse").num_classes == 2


def test_usps_wrong_layout_and_range(tmp_path, isolated):
    bad = tmp_path / "other.h5"
    with h5py.File(bad, "w") as file:
        file["images"] = np.zeros((3, 256))
    with pytest.raises(ValueError, match=r"other\.h5.*train/data"):
        load_dataset("usps", root=bad)
    with pytest.raises(ValueError, match=re.escape("expected [0, 1]")):
        load_dataset("usps", root=_write_usps(tmp_path / "x" / "usps.h5", scale=255.0))
    not_hdf5 = tmp_path / "y" / "usps.h5"
    not_hdf5.parent.mkdir()
    not_hdf5.write_bytes(b"garbage")
    with pytest.raises(ValueError, match=re.escape("usps.h5")):
        load_dataset("usps", root=not_hdf5)


def test_usps_missing(tmp_path, isolated):
    with pytest.raises(FileNotFoundError, match=re.escape("usps.h5")) as info:
        load_dataset("usps", root=tmp_path)
    assert str(isolated / "usps") in str(info.value)


def test_usps_without_h5py(tmp_path, isolated, monkeypatch):
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(ImportError, match=r"h5py.*pip install 'clusterable\[usps\]'"):
        load_dataset("usps", root=tmp_path)


# --- CUB-200-2011, CARS196, Stanford Online Products ------------------------------------------


def _write_cub(base: Path, image_writer, n_classes: int = 4, per_class: int = 2) -> Path:
    root = base / "CUB_200_2011"
    images, labels, classes = [], [], []
    for c in range(1, n_classes + 1):
        folder = f"{c:03d}.Bird_{c}"
        classes.append(f"{c} {folder}")
        for k in range(per_class):
            image_id = len(images) + 1
            relative = f"{folder}/Bird_{c}_{k}.png"
            image_writer(root / "images" / relative, (c * 50, k * 100, 0))
            images.append(f"{image_id} {relative}")
            labels.append(f"{image_id} {c}")
    (root / "images.txt").write_text("\n".join(images) + "\n")
    (root / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    (root / "classes.txt").write_text("\n".join(classes) + "\n")
    return root


def test_cub200_zero_shot_split(tmp_path, isolated, image_writer):
    root = _write_cub(tmp_path, image_writer)
    train = load_dataset("cub200", root=tmp_path)  # the parent of CUB_200_2011 works too
    test = load_dataset("cub200", root=root, split="test", image_size=16)
    assert train.labels.tolist() == [0, 0, 1, 1]
    assert test.labels.tolist() == [2, 2, 3, 3]
    assert train.class_names == test.class_names
    assert test.class_names[2] == "003.Bird_3"
    assert isinstance(train.x, ImageFiles)
    assert train.input_shape == (3, 64, 64)
    x, label = test[1]
    assert tuple(x.shape) == (3, 16, 16)
    assert label == 2
    assert x[0, 0, 0].item() == pytest.approx(150 / 255)
    assert x[1, 0, 0].item() == pytest.approx(100 / 255)
    assert len(load_dataset("cub200", root=root, split="all")) == 8


def test_cub200_damaged_layouts(tmp_path, isolated, image_writer):
    root = _write_cub(tmp_path, image_writer)
    (root / "images" / "001.Bird_1" / "Bird_1_0.png").unlink()
    with pytest.raises(FileNotFoundError, match="extract the images archive"):
        load_dataset("cub200", root=root)
    (root / "image_class_labels.txt").write_text("1 1\n")
    with pytest.raises(ValueError, match="different image ids"):
        load_dataset("cub200", root=root)
    (root / "images.txt").write_text("1\n")
    with pytest.raises(ValueError, match=re.escape("images.txt, line 1: expected 2 fields")):
        load_dataset("cub200", root=root)


def test_cub200_missing(tmp_path, isolated):
    with pytest.raises(FileNotFoundError, match="CUB_200_2011") as info:
        load_dataset("cub200", root=tmp_path)
    assert str(tmp_path / "CUB_200_2011") in str(info.value)
    assert "images.txt" in str(info.value)


def _write_cars(root: Path, image_writer, n_classes: int = 4, per_class: int = 3) -> Path:
    annotations = np.zeros(
        (1, n_classes * per_class), dtype=[("relative_im_path", "O"), ("class", "O"), ("test", "O")]
    )
    for i in range(n_classes * per_class):
        relative = f"car_ims/{i + 1:06d}.png"
        image_writer(root / relative, (0, 0, 10 * i))
        annotations[0, i] = (relative, i // per_class + 1, i % 2)
    names = np.array([f"Car {c}" for c in range(1, n_classes + 1)], dtype=object)
    savemat(root / "cars_annos.mat", {"annotations": annotations, "class_names": names})
    return root


def test_cars196_zero_shot_split(tmp_path, isolated, image_writer):
    root = _write_cars(tmp_path, image_writer)
    train = load_dataset("cars196", root=root, image_size=8)
    test = load_dataset("cars196", root=root, split="test")
    assert train.labels.tolist() == [0, 0, 0, 1, 1, 1]
    assert test.labels.tolist() == [2, 2, 2, 3, 3, 3]
    assert train.class_names == ["Car 1", "Car 2", "Car 3", "Car 4"]
    assert test.x.paths[0] == root / "car_ims" / "000007.png"
    x, _ = train[2]
    assert x.shape == (3, 8, 8)
    assert x[2, 0, 0].item() == pytest.approx(20 / 255)


def test_cars196_wrong_mat_file(tmp_path, isolated):
    savemat(tmp_path / "cars_annos.mat", {"something": np.zeros(3)})
    with pytest.raises(ValueError, match="not the CARS196 annotation file"):
        load_dataset("cars196", root=tmp_path)


def _write_sop(base: Path, image_writer) -> Path:
    root = base / "Stanford_Online_Products"
    header = "image_id class_id super_class_id path"
    train = [(1, 1, "bicycle_final"), (2, 1, "bicycle_final"), (3, 2, "chair_final")]
    test = [(4, 3, "chair_final"), (5, 3, "chair_final"), (6, 4, "mug_final")]
    super_ids = {"bicycle_final": 1, "chair_final": 2, "mug_final": 3}
    for listing, rows in (("Ebay_train.txt", train), ("Ebay_test.txt", test)):
        lines = [header]
        for image_id, class_id, folder in rows:
            relative = f"{folder}/{class_id}_{image_id}.JPG"
            image_writer(root / relative, (image_id * 40, 0, 0))  # a JPEG, as in SOP
            lines.append(f"{image_id} {class_id} {super_ids[folder]} {relative}")
        (root / listing).write_text("\n".join(lines) + "\n")
    return root


def test_sop_lists(tmp_path, isolated, image_writer):
    root = _write_sop(tmp_path, image_writer)
    train = load_dataset("sop", root=tmp_path)
    test = load_dataset("sop", root=root, split="test")
    assert train.labels.tolist() == [0, 0, 1]
    assert test.labels.tolist() == [2, 2, 3]
    assert test.class_names[2] == "chair_final/3"
    assert train.num_classes == test.num_classes == 2
    everything = load_dataset("sop", root=root, split="all")
    assert everything.labels.tolist() == [0, 0, 1, 2, 2, 3]
    assert everything.class_names[1] == "chair_final/2"
    x, label = test[2]
    assert label == 3
    assert x[0, 0, 0].item() == pytest.approx(240 / 255, abs=3 / 255)  # JPEG rounding


def test_sop_missing_list(tmp_path, isolated, image_writer):
    root = _write_sop(tmp_path, image_writer)
    (root / "Ebay_test.txt").unlink()
    assert len(load_dataset("sop", root=root)) == 3
    with pytest.raises(FileNotFoundError, match=re.escape("Ebay_test.txt")):
        load_dataset("sop", root=root, split="test")


# --- image folders -------------------------------------------------------------------------------


def test_image_folder_without_split_gets_stratified_split(tmp_path, image_writer):
    for c, name in enumerate(["cat", "ant", "bee"]):
        for k in range(10):
            image_writer(tmp_path / "imgs" / name / f"{k}.png", (c * 100, 0, 0))
    (tmp_path / "imgs" / "ant" / "notes.txt").write_text("not an image")
    train = load_dataset(f"folder:{tmp_path / 'imgs'}", image_size=4)
    test = load_dataset("image-folder", root=tmp_path / "imgs", split="test")
    everything = load_dataset("image-folder", root=tmp_path / "imgs", split="all")
    assert train.class_names == ["ant", "bee", "cat"]
    assert np.bincount(train.labels).tolist() == [7, 7, 7]
    assert np.bincount(test.labels).tolist() == [3, 3, 3]
    assert len(everything) == 30
    assert set(train.x.paths).isdisjoint(test.x.paths)
    assert train.input_shape == (3, 4, 4)
    x, label = train[len(train) - 1]
    assert label == 2
    assert x[0].mean().item() == pytest.approx(0.0)  # "cat" images are black (colour 0)


def test_image_folder_with_its_own_split(tmp_path, image_writer):
    for split, classes in (("train", ["a", "b"]), ("test", ["b", "c"])):
        for name in classes:
            image_writer(tmp_path / split / name / "0.jpg", (0, 0, 0))
    train = load_dataset("image-folder", root=tmp_path)
    test = load_dataset("image-folder", root=tmp_path, split="test")
    assert train.class_names == test.class_names == ["a", "b", "c"]
    assert train.labels.tolist() == [0, 1]
    assert test.labels.tolist() == [1, 2]
    assert len(load_dataset("image-folder", root=tmp_path, split="all")) == 4


def test_image_folder_with_query_and_gallery(tmp_path, image_writer):
    for part, cls, name, red in [
        ("train", "a", "0", 10),
        ("train", "b", "0", 20),
        ("gallery", "c", "0", 30),
        ("gallery", "d", "0", 40),
        ("query", "d", "1", 50),
        ("query", "c", "1", 60),
    ]:
        image_writer(tmp_path / part / cls / f"{name}.png", (red, 0, 0))
    test = load_dataset(f"folder:{tmp_path}", split="test")
    assert test.class_names == ["a", "b", "c", "d"]
    assert test.labels.tolist() == [2, 3, 2, 3]  # queries (c, d), then the gallery (c, d)
    assert test.is_query.tolist() == [True, True, False, False]
    assert [round(float(test[i][0][0, 0, 0]) * 255) for i in range(4)] == [60, 50, 30, 40]
    assert load_dataset(f"folder:{tmp_path}").is_query is None
    everything = load_dataset(f"folder:{tmp_path}", split="all")
    assert len(everything) == 6 and everything.is_query is None
    image_writer(tmp_path / "test" / "c" / "2.png", (0, 0, 0))
    with pytest.raises(FileNotFoundError, match="either test/ or both query/ and gallery/"):
        load_dataset(f"folder:{tmp_path}", split="test")
    (tmp_path / "test" / "c" / "2.png").unlink()
    for path in (tmp_path / "gallery").rglob("*.png"):
        path.unlink()
    for folder in sorted((tmp_path / "gallery").rglob("*"), reverse=True) + [tmp_path / "gallery"]:
        folder.rmdir()
    with pytest.raises(FileNotFoundError, match="has query/ sub-folders"):
        load_dataset(f"folder:{tmp_path}", split="test")


def test_image_folder_errors(tmp_path, image_writer):
    with pytest.raises(ValueError, match="folder:PATH"):
        load_dataset("image-folder")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_dataset(f"folder:{tmp_path / 'missing'}")
    (tmp_path / "empty" / "class").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no images") as empty:
        load_dataset(f"folder:{tmp_path / 'empty'}")
    assert "--items" not in str(empty.value)
    image_writer(tmp_path / "half" / "train" / "a" / "0.png", (0, 0, 0))
    with pytest.raises(FileNotFoundError, match="no test/"):
        load_dataset(f"folder:{tmp_path / 'half'}", split="test")


def test_a_folder_without_class_folders_is_unlabelled_items_with_no_test_split(
    tmp_path, image_writer
):
    """Photos lying directly in a folder are items without classes: its train (and all) split
    is every photo, which `train --unsupervised` trains on; a test split would have nothing to
    score, and is refused saying what the photos can do (they were refused whole)."""
    flat = tmp_path / "flat"
    for i in range(5):
        image_writer(flat / f"{i}.png", (40 * i, 0, 0))
    for split in ("train", "all"):
        ds = load_dataset(f"folder:{flat}", split=split)
        assert len(ds) == 5 and (ds.labels == UNLABELLED).all() and ds.num_classes == 0
        assert [Path(p).name for p in ds.x.paths] == [f"{i}.png" for i in range(5)]
    message = re.escape(f"image folder {flat} (its images lie directly in it) has no classes")
    with pytest.raises(ValueError, match=f"{message}.*train --unsupervised.*embed RUN --items"):
        load_dataset(f"folder:{flat}", split="test")


@pytest.mark.parametrize("form", ["npz x alone", "npy without labels", "every label -1"])
def test_a_table_without_labels_is_unlabelled_items_with_no_test_split(tmp_path, form):
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    path = tmp_path / ("t.npy" if form == "npy without labels" else "t.npz")
    if form == "npz x alone":
        np.savez(path, x=x)
    elif form == "npy without labels":
        np.save(path, x)
    else:
        np.savez(path, x=x, y=np.full(20, -1))
    train = load_dataset(f"table:{path}", split="train")
    assert len(train) == 20 and (train.labels == UNLABELLED).all()
    np.testing.assert_array_equal(train.x, x)
    with pytest.raises(ValueError, match="has no classes, so no test split"):
        load_dataset(f"table:{path}", split="test")


# --- feature tables ------------------------------------------------------------------------------


def test_table_npz_without_split(tmp_path):
    x = np.arange(40, dtype=np.float64).reshape(20, 2)
    y = np.repeat([0, 1], 10)
    np.savez(tmp_path / "t.npz", x=x, y=y)
    train = load_dataset(f"table:{tmp_path / 't.npz'}")
    test = load_dataset("table", root=tmp_path / "t.npz", split="test")
    assert train.input_shape == (2,)
    assert train.x.dtype == np.float32
    assert np.bincount(train.labels).tolist() == [7, 7]
    assert np.bincount(test.labels).tolist() == [3, 3]
    assert len(load_dataset("table", root=tmp_path / "t.npz", split="all")) == 20


def test_table_npz_with_split_and_text_labels(tmp_path):
    np.savez(
        tmp_path / "t.npz",
        x_train=np.zeros((3, 5)),
        y_train=np.array(["dog", "cat", "dog"]),
        x_test=np.ones((2, 5)),
        y_test=np.array(["emu", "cat"]),
    )
    train = load_dataset("table", root=tmp_path / "t.npz")
    test = load_dataset("table", root=tmp_path / "t.npz", split="test")
    assert train.class_names == test.class_names == ["cat", "dog", "emu"]
    assert train.labels.tolist() == [1, 0, 1]
    assert test.labels.tolist() == [2, 0]
    assert test.x.min() == 1.0


def test_table_csv(tmp_path):
    lines = ["f1,label,f2,split"] + [
        f"{i},{i % 3},{-i},{'test' if i % 4 == 0 else 'train'}" for i in range(12)
    ]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    train = load_dataset(f"table:{tmp_path / 't.csv'}")
    test = load_dataset(f"table:{tmp_path / 't.csv'}", split="test")
    assert test.x.tolist() == [[0, 0], [4, -4], [8, -8]]
    assert test.labels.tolist() == [0, 1, 2]
    assert len(train) == 9
    assert train.class_names == ["0", "1", "2"]


def test_table_csv_keeps_distractor_labels(tmp_path):
    lines = ["a,label"] + [f"{i},{[-1, 0, 1][i % 3]}" for i in range(9)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    ds = load_dataset(f"table:{tmp_path / 't.csv'}", split="all")
    assert ds.labels.tolist() == [-1, 0, 1] * 3
    assert ds.num_classes == 2


def test_table_npy_with_labels_file(tmp_path):
    np.save(tmp_path / "feat.npy", np.zeros((10, 3)))
    with pytest.raises(ValueError, match=r"labels file feat_labels\.npy does not exist\) has no"):
        load_dataset(f"table:{tmp_path / 'feat.npy'}", split="test")  # unlabelled items
    np.save(tmp_path / "feat_labels.npy", np.arange(10) % 2)
    assert len(load_dataset(f"table:{tmp_path / 'feat.npy'}", split="all")) == 10


def test_table_errors(tmp_path):
    (tmp_path / "nolabel.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="'label' column"):
        load_dataset(f"table:{tmp_path / 'nolabel.csv'}")
    (tmp_path / "text.csv").write_text("a,label\n1,0\nx,1\n")
    with pytest.raises(ValueError, match="not a number"):
        load_dataset(f"table:{tmp_path / 'text.csv'}")
    np.savez(tmp_path / "keys.npz", features=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="expected 'x'"):
        load_dataset(f"table:{tmp_path / 'keys.npz'}")
    np.savez(tmp_path / "len.npz", x=np.zeros((3, 2)), y=np.zeros(2))
    with pytest.raises(ValueError, match="n labels"):
        load_dataset(f"table:{tmp_path / 'len.npz'}")
    (tmp_path / "t.parquet").write_bytes(b"")
    with pytest.raises(ValueError, match="unknown format"):
        load_dataset(f"table:{tmp_path / 't.parquet'}")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_dataset(f"table:{tmp_path / 'none.npz'}")


def test_coarse_needs_ten_classes(tmp_path):
    np.savez(tmp_path / "t.npz", x=np.zeros((6, 2)), y=np.arange(6) % 3)
    with pytest.raises(ValueError, match="coarse_labels"):
        load_dataset(f"table:{tmp_path / 't.npz'}", labels="coarse")
