"""In-Shop Clothes Retrieval from its official list file: the train split, and the test split as
queries then gallery, flagged for query-versus-gallery evaluation."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from clusterable.data import concatenate, load_dataset
from clusterable.data.registry import standard_recall_ks

#: (item id, status) of each listed image, in file order: items 1-2 train, 3-5 test.
ROWS = [
    ("id_00000001", "train"),
    ("id_00000002", "train"),
    ("id_00000001", "train"),
    ("id_00000003", "query"),
    ("id_00000003", "gallery"),
    ("id_00000004", "gallery"),
    ("id_00000005", "query"),
    ("id_00000004", "query"),
    ("id_00000005", "gallery"),
]


def write_inshop(base: Path, image_writer, official: bool = True) -> Path:
    """The benchmark's folder: ``Eval/list_eval_partition.txt`` and ``Img/img/...`` (official),
    or the listing beside ``img/`` (a repacked copy); returns the folder."""
    root = base / "In-shop Clothes Retrieval Benchmark"
    listing_dir, image_dir = (root / "Eval", root / "Img") if official else (root, root)
    lines = [str(len(ROWS)), "image_name item_id evaluation_status"]
    for number, (item, status) in enumerate(ROWS):
        name = f"img/WOMEN/Dresses/{item}/{number:02d}_1_front.jpg"
        image_writer(image_dir / name, (number * 25, 0, 0))
        lines.append(f"{name} {item} {status}")
    listing_dir.mkdir(parents=True, exist_ok=True)
    (listing_dir / "list_eval_partition.txt").write_text("\n".join(lines) + "\n")
    return root


def red(ds, i):
    """The red value of item i's top-left pixel, 0-255 (the row number times 25 when written)."""
    return round(float(ds[i][0][0, 0, 0]) * 255)


def test_splits_roles_and_labels(tmp_path, isolated, image_writer):
    root = write_inshop(tmp_path, image_writer)
    train = load_dataset("inshop", root=root)
    test = load_dataset("inshop", root=root, split="test")
    assert train.labels.tolist() == [0, 1, 0] and train.is_query is None
    # Queries first, then the gallery, each in file order (rows 3, 6, 7 then 4, 5, 8).
    assert test.labels.tolist() == [2, 4, 3, 2, 3, 4]
    assert test.is_query.tolist() == [True, True, True, False, False, False]
    assert [red(test, i) for i in range(6)] == pytest.approx([75, 150, 175, 100, 125, 200], abs=3)
    assert test.class_names[2] == "id_00000003" and len(test.class_names) == 5
    everything = load_dataset("inshop", root=root, split="all")
    assert len(everything) == len(ROWS) and everything.is_query is None
    assert test.input_shape == (3, 64, 64)
    assert standard_recall_ks("inshop") == (1, 10, 20, 30, 40, 50)
    assert standard_recall_ks("folder:photos") is None


@pytest.mark.parametrize("where", ["benchmark", "parent", "eval"])
def test_root_may_be_the_benchmark_its_parent_or_eval(tmp_path, isolated, image_writer, where):
    root = write_inshop(tmp_path, image_writer)
    given = {"benchmark": root, "parent": tmp_path, "eval": root / "Eval"}[where]
    assert len(load_dataset("inshop", root=given, split="test")) == 6


def test_a_repacked_copy_with_the_listing_beside_img(tmp_path, isolated, image_writer):
    root = write_inshop(tmp_path, image_writer, official=False)
    test = load_dataset("inshop", root=root, split="test")
    assert [red(test, i) for i in range(3)] == pytest.approx([75, 150, 175], abs=3)


def test_roles_follow_subsets_and_concatenation(tmp_path, isolated, image_writer):
    test = load_dataset("inshop", root=write_inshop(tmp_path, image_writer), split="test")
    assert test.subset([5, 0]).is_query.tolist() == [False, True]
    assert concatenate(test, test).is_query.tolist() == test.is_query.tolist() * 2
    train = load_dataset("inshop", root=tmp_path / "In-shop Clothes Retrieval Benchmark")
    with pytest.raises(ValueError, match="query/gallery roles"):
        concatenate(test, train)


def test_damaged_listings_and_missing_images(tmp_path, isolated, image_writer):
    root = write_inshop(tmp_path, image_writer)
    listing = root / "Eval" / "list_eval_partition.txt"
    text = listing.read_text()
    listing.write_text(text.replace("gallery", "galery", 1))
    with pytest.raises(ValueError, match=re.escape("['galery'] is not train, query or gallery")):
        load_dataset("inshop", root=root)
    listing.write_text(text.replace("id_00000001 train", "id_00000001", 1))
    with pytest.raises(ValueError, match="expected 3 fields"):
        load_dataset("inshop", root=root)
    listing.write_text(text)
    (root / "Img").rename(root / "Images")
    with pytest.raises(FileNotFoundError, match=re.escape("extract Img/img.zip")):
        load_dataset("inshop", root=root)
    listing.unlink()
    with pytest.raises(FileNotFoundError, match=re.escape("list_eval_partition.txt")):
        load_dataset("inshop", root=root)


def test_roles_must_be_one_per_item():
    from clusterable.data import LabelledDataset

    with pytest.raises(ValueError, match="one is_query flag per item"):
        LabelledDataset("toy", np.zeros((3, 2)), [0, 0, 1], is_query=[True, False])
