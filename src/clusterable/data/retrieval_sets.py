"""The zero-shot retrieval sets of the lifted-structure and DSCL papers, in their official layouts.

Training and test classes are disjoint: CUB-200-2011 classes 1-100 / 101-200, CARS196 1-98 /
99-196 (the first half of the classes), Stanford Online Products as its Ebay_train.txt /
Ebay_test.txt lists say (11,318 / 11,316 classes). Labels are the official class ids minus one,
so the test split's labels start where the training split's end and ``class_names`` lists every
class. Images are read lazily (:class:`ImageFiles`), RGB, resized to ``image_size``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from clusterable.data.dataset import DEFAULT_IMAGE_SIZE, ImageFiles, LabelledDataset
from clusterable.data.locate import find_dir
from clusterable.data.registry import register_dataset
from clusterable.data.splits import check_split


def _read_table(path: Path, columns: int, header: bool = False) -> list[list[str]]:
    """Rows of a whitespace-separated list file, checked to have ``columns`` fields each."""
    lines = path.read_text(encoding="utf-8").splitlines()[1 if header else 0 :]
    rows = [line.split(maxsplit=columns - 1) for line in lines if line.strip()]
    for number, row in enumerate(rows, start=2 if header else 1):
        if len(row) != columns:
            raise ValueError(
                f"{path}, line {number}: expected {columns} fields, found {len(row)} ({row}); "
                "the file is damaged or not the official one"
            )
    return rows


def _half_split(class_ids: np.ndarray, n_classes: int, split: str) -> np.ndarray:
    """Mask of items in the split: train has classes 1..n/2, test the rest (1-based ids)."""
    if split == "all":
        return np.ones(len(class_ids), dtype=bool)
    is_train = class_ids <= n_classes // 2
    return is_train if split == "train" else ~is_train


def _half_of(
    name: str,
    split: str,
    files: list[Path],
    image_size: int,
    class_ids: np.ndarray,
    class_names: list[str],
    directory: Path,
) -> LabelledDataset:
    """The images with 1-based ``class_ids``, restricted to ``split`` by `_half_split`."""
    ds = LabelledDataset(
        f"{name}/{split}",
        ImageFiles(files, image_size),
        class_ids - 1,
        class_names=class_names,
        source=str(directory),
    )
    return ds.subset(_half_split(class_ids, len(class_names), split))


def _check_first_image(paths: list[Path], listing: Path) -> None:
    # Checking one file catches a wrong root or an unextracted image archive at load time,
    # without a stat of every file of a large set.
    if paths and not paths[0].is_file():
        raise FileNotFoundError(
            f"{listing} lists {paths[0]}, which does not exist; extract the images archive "
            "next to the list files, keeping its folder layout"
        )


@register_dataset("cub200", resized=True, recall_ks=(1, 2, 4, 8))
def load_cub200(
    root: str | Path | None, split: str, image_size: int = DEFAULT_IMAGE_SIZE
) -> LabelledDataset:
    """CUB-200-2011 (11,788 bird images, 200 classes) from the ``CUB_200_2011`` folder layout.

    Reads ``images.txt`` (``id path``), ``image_class_labels.txt`` (``id class``), optional
    ``classes.txt`` (``class name``) and ``images/<path>``. ``root`` may be the ``CUB_200_2011``
    folder or its parent.
    """
    check_split(split, "cub200")
    directory = find_dir(
        "cub200",
        root,
        lambda d: (d / "images.txt").is_file() and (d / "image_class_labels.txt").is_file(),
        "images.txt and image_class_labels.txt (with images/ beside them)",
        "Extract CUB_200_2011.tgz (Caltech-UCSD Birds-200-2011) and pass root=the CUB_200_2011 "
        "folder or its parent (`--root DIR` on the command line).",
        subdirs=["CUB_200_2011"],
    )
    paths = dict(_read_table(directory / "images.txt", 2))
    classes = dict(_read_table(directory / "image_class_labels.txt", 2))
    if paths.keys() != classes.keys():
        raise ValueError(
            f"{directory}: images.txt and image_class_labels.txt list different image ids "
            f"({len(paths)} and {len(classes)} ids); the files come from different releases"
        )
    ids = sorted(paths, key=int)
    class_ids = np.array([int(classes[i]) for i in ids], dtype=np.int64)
    if (directory / "classes.txt").is_file():
        names = dict(_read_table(directory / "classes.txt", 2))
        class_names = [names[str(c)] for c in sorted(map(int, names))]
    else:
        folders = {int(classes[i]): paths[i].split("/")[0] for i in ids}
        class_names = [folders.get(c, str(c)) for c in range(1, class_ids.max() + 1)]
    files = [directory / "images" / paths[i] for i in ids]
    _check_first_image(files, directory / "images.txt")
    return _half_of("cub200", split, files, image_size, class_ids, class_names, directory)


@register_dataset("cars196", resized=True, recall_ks=(1, 2, 4, 8))
def load_cars196(
    root: str | Path | None, split: str, image_size: int = DEFAULT_IMAGE_SIZE
) -> LabelledDataset:
    """CARS196 (16,185 car images, 196 classes) from ``cars_annos.mat`` and ``car_ims/``.

    Each annotation gives ``relative_im_path`` (``car_ims/000001.jpg``, relative to the folder of
    the ``.mat`` file) and ``class`` (1-196); ``class_names`` names the classes. The dataset's own
    ``test`` flag is ignored: metric learning uses the class split.
    """
    check_split(split, "cars196")
    from scipy.io import loadmat  # only this loader needs scipy.io

    directory = find_dir(
        "cars196",
        root,
        lambda d: (d / "cars_annos.mat").is_file(),
        "cars_annos.mat (with car_ims/ beside it)",
        "Extract car_ims.tgz and put cars_annos.mat beside car_ims/ (Stanford Cars, "
        "CARS196), then pass root=that folder (`--root DIR` on the command line).",
        subdirs=["cars196", "CARS196", "stanford_cars"],
    )
    path = directory / "cars_annos.mat"
    try:
        mat = loadmat(path, simplify_cells=True)
        annotations = mat["annotations"]
        if isinstance(annotations, dict):  # a single annotation is not wrapped in a list
            annotations = [annotations]
        files = [directory / str(a["relative_im_path"]) for a in annotations]
        class_ids = np.array([int(a["class"]) for a in annotations], dtype=np.int64)
        class_names = [str(n) for n in np.atleast_1d(mat["class_names"])]
    except (KeyError, TypeError, ValueError, OSError) as error:
        raise ValueError(
            f"{path}: not the CARS196 annotation file ({type(error).__name__}: {error}); expected "
            "a struct array 'annotations' with relative_im_path and class, and 'class_names'"
        ) from error
    _check_first_image(files, path)
    return _half_of("cars196", split, files, image_size, class_ids, class_names, directory)


@register_dataset("sop", resized=True, recall_ks=(1, 10, 100, 1000))
def load_sop(
    root: str | Path | None, split: str, image_size: int = DEFAULT_IMAGE_SIZE
) -> LabelledDataset:
    """Stanford Online Products (120,053 images, 22,634 classes) from ``Ebay_train.txt`` and
    ``Ebay_test.txt`` (header ``image_id class_id super_class_id path``; paths relative to the
    ``Stanford_Online_Products`` folder, which ``root`` may be or contain).

    Classes are named ``<super class folder>/<class id>``, e.g. ``bicycle_final/1``.
    """
    check_split(split, "sop")
    listings = {"train": ["Ebay_train.txt"], "test": ["Ebay_test.txt"]}.get(
        split, ["Ebay_train.txt", "Ebay_test.txt"]
    )
    directory = find_dir(
        "sop",
        root,
        lambda d: all((d / listing).is_file() for listing in listings),
        " and ".join(listings),
        "Extract Stanford_Online_Products.zip and pass root=the Stanford_Online_Products folder "
        "or its parent (`--root DIR` on the command line).",
        subdirs=["Stanford_Online_Products"],
    )
    rows = [row for listing in listings for row in _read_table(directory / listing, 4, header=True)]
    class_ids = np.array([int(row[1]) for row in rows], dtype=np.int64)
    files = [directory / row[3] for row in rows]
    _check_first_image(files, directory / listings[0])
    names = {int(row[1]): f"{row[3].split('/')[0]}/{row[1]}" for row in rows}
    class_names = [names.get(c, str(c)) for c in range(1, int(class_ids.max(initial=0)) + 1)]
    return LabelledDataset(
        f"sop/{split}",
        ImageFiles(files, image_size),
        class_ids - 1,
        class_names=class_names,
        source=str(directory),
    )


#: In-Shop's list of every image: ``image_name item_id evaluation_status``, after a count line and
#: a header line; the status is ``train``, ``query`` or ``gallery``.
INSHOP_LISTING = "list_eval_partition.txt"


def _inshop_images(directory: Path, first: str) -> Path:
    """The folder that In-Shop's image names (``img/WOMEN/...``) are relative to: ``Img/`` beside
    the listing's ``Eval/`` folder in the official release, or the listing's own folder (or its
    ``Img/``) in repacked copies."""
    bases = [directory / "Img", directory, directory.parent / "Img", directory.parent]
    for base in bases:
        if (base / first).is_file():
            return base
    raise FileNotFoundError(
        f"{directory / INSHOP_LISTING} lists {first}, found under none of "
        f"{', '.join(str(b) for b in bases)}; extract Img/img.zip so that img/ sits in Img/ "
        "beside Eval/ (the official layout) or beside the listing"
    )


@register_dataset("inshop", resized=True, recall_ks=(1, 10, 20, 30, 40, 50))
def load_inshop(
    root: str | Path | None, split: str, image_size: int = DEFAULT_IMAGE_SIZE
) -> LabelledDataset:
    """In-Shop Clothes Retrieval (DeepFashion, Liu et al., CVPR 2016: 52,712 images of 7,982
    clothing items) from ``Eval/list_eval_partition.txt`` and the images of ``Img/img``.

    The classes are the items (``id_00000001`` ...), numbered in id order, so the 3,997 training
    items (25,882 images) and the 3,985 test items are disjoint. The test split holds the 14,218
    query images, then the 12,612 gallery images, flagged by ``is_query``: each query ranks the
    gallery (the standard Recall@1/10/20/30/40/50). ``all`` is every image, without roles.
    ``root`` may be the ``In-shop Clothes Retrieval Benchmark`` folder, its ``Eval`` folder, or
    a folder holding the listing beside ``img/``.
    """
    check_split(split, "inshop")
    directory = find_dir(
        "inshop",
        root,
        lambda d: (d / INSHOP_LISTING).is_file(),
        INSHOP_LISTING,
        "Download the In-shop Clothes Retrieval Benchmark of DeepFashion, extract Img/img.zip, "
        "and pass root=its folder (`--root DIR` on the command line).",
        subdirs=["Eval", "In-shop Clothes Retrieval Benchmark/Eval", "inshop"],
    )
    listing = directory / INSHOP_LISTING
    rows = _read_table(listing, 3, header=True)[1:]  # after the count line and the header
    if not rows:
        raise ValueError(f"{listing} lists no image; the file is damaged or not the official one")
    statuses = np.array([row[2] for row in rows])
    unknown = set(statuses.tolist()) - {"train", "query", "gallery"}
    if unknown:
        raise ValueError(
            f"{listing}: evaluation status {sorted(unknown)} is not train, query or gallery; "
            "the file is damaged or not the official one"
        )
    items, labels = np.unique([row[1] for row in rows], return_inverse=True)
    base = _inshop_images(directory, rows[0][0])
    files = [base / row[0] for row in rows]
    ds = LabelledDataset(
        f"inshop/{split}",
        ImageFiles(files, image_size),
        labels,
        class_names=items.tolist(),
        source=str(directory),
    )
    if split == "all":
        return ds
    if split == "train":
        return ds.subset(statuses == "train")
    order = np.concatenate(
        [np.flatnonzero(statuses == "query"), np.flatnonzero(statuses == "gallery")]
    )
    return ds.replace(is_query=statuses == "query").subset(order)
