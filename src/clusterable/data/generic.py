"""The user's own data: a folder of images with one sub-folder per class, or a feature table.

Either may carry its own split (``train/`` and ``test/`` sub-folders; ``_train``/``_test`` arrays in
an ``.npz``; a ``split`` column in a ``.csv``). Without one, ``train`` and ``test`` are the seeded
stratified 70 % / 30 % split that ``digits`` uses, and ``all`` is everything; a zero-shot split is
one view away (:func:`clusterable.data.views.class_split`).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from clusterable.data.dataset import DEFAULT_IMAGE_SIZE, ImageFiles, LabelledDataset
from clusterable.data.splits import check_split, stratified_split

#: File extensions read as images in an image folder (lower case).
IMAGE_EXTENSIONS = frozenset(
    {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}
)


def _split_part(ds: LabelledDataset, split: str) -> LabelledDataset:
    if split == "all":
        return ds
    train, test = stratified_split(ds.labels)
    return ds.subset(train if split == "train" else test)


def _class_folders(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))


def _images_in(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.suffix.lower() in IMAGE_EXTENSIONS and not p.name.startswith(".")
    )


def load_image_folder(
    root: str | Path, split: str, image_size: int = DEFAULT_IMAGE_SIZE
) -> LabelledDataset:
    """Images in ``root/<class>/`` (or ``root/train/<class>/`` and ``root/test/<class>/``).

    Classes are the sub-folder names in sorted order (label 0 is the first); images are every file
    with an image extension under a class folder, sorted by path; all are read as RGB and resized
    to ``image_size`` square.
    """
    check_split(split, "an image folder")
    root = Path(root).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(
            f"image folder {root} does not exist; give a directory with one sub-folder of "
            "images per class"
        )
    own_split = (root / "train").is_dir()
    if own_split:
        parts = ["train", "test"] if split == "all" else [split]
        missing = [p for p in parts if not (root / p).is_dir()]
        if missing:
            raise FileNotFoundError(
                f"image folder {root} has a train/ sub-folder but no {missing[0]}/; add it, or "
                "put the class folders directly in the folder to have them split for you"
            )
        # Class numbers come from both parts, so a class has the same label in train and test.
        names = sorted(
            {
                f.name
                for p in ("train", "test")
                if (root / p).is_dir()
                for f in _class_folders(root / p)
            }
        )
        folders = [f for p in parts for f in _class_folders(root / p)]
    else:
        folders = _class_folders(root)
        names = [f.name for f in folders]
    files, labels = [], []
    for folder in folders:
        images = _images_in(folder)
        files += images
        labels += [names.index(folder.name)] * len(images)
    if not files:
        raise FileNotFoundError(
            f"image folder {root} holds no images in class sub-folders (looked for "
            f"{', '.join(sorted(IMAGE_EXTENSIONS))}); give a directory with one sub-folder of "
            "images per class"
        )
    ds = LabelledDataset(
        f"{root.name}/{split}", ImageFiles(files, image_size), labels, class_names=names
    )
    return ds if own_split else _split_part(ds, split)


def _encode_labels(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Integer labels >= -1 are kept (-1: distractor); any other values are numbered in sorted
    order."""
    try:
        as_int = values.astype(np.int64)
        if np.array_equal(as_int, values.astype(np.float64)) and as_int.min(initial=0) >= -1:
            return as_int, [str(c) for c in range(int(as_int.max(initial=-1)) + 1)]
    except ValueError:
        pass  # text labels: numbered below
    names, codes = np.unique(values.astype(str), return_inverse=True)
    return codes.astype(np.int64), [str(n) for n in names]


def _read_csv(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    with path.open(newline="", encoding="utf-8") as file:
        rows = list(csv.reader(file))
    if not rows or "label" not in rows[0]:
        raise ValueError(
            f"table {path} needs a header row with a 'label' column (found "
            f"{rows[0] if rows else 'an empty file'}); every other column is a feature, except an "
            "optional 'split' column of train/test"
        )
    header, body = rows[0], [row for row in rows[1:] if row]
    columns = {name: [row[i] for row in body] for i, name in enumerate(header)}
    features = [name for name in header if name not in ("label", "split")]
    try:
        x = np.array([columns[name] for name in features], dtype=np.float32).T.reshape(
            len(body), len(features)
        )
    except ValueError as error:
        raise ValueError(
            f"table {path}: a feature column holds a value that is not a number ({error}); "
            "only 'label' and 'split' may hold text"
        ) from error
    split = np.array(columns["split"]) if "split" in columns else None
    return x, np.array(columns["label"]), split


def _read_npz(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    with np.load(path, allow_pickle=False) as arrays:
        keys = set(arrays.files)
        if {"x_train", "y_train", "x_test", "y_test"} <= keys:
            parts = [(arrays[f"x_{p}"], arrays[f"y_{p}"], p) for p in ("train", "test")]
            x = np.concatenate([part[0] for part in parts])
            y = np.concatenate([part[1] for part in parts])
            split = np.concatenate([np.full(len(part[1]), part[2]) for part in parts])
            return x, y, split
        if {"x", "y"} <= keys:
            return arrays["x"], arrays["y"], None
    raise ValueError(
        f"table {path} holds arrays {sorted(keys)}; expected 'x' (n, d) and 'y' (n,), or "
        "x_train, y_train, x_test and y_test"
    )


def load_table(path: str | Path, split: str) -> LabelledDataset:
    """A feature table: items ``(d,)`` float32 as stored, one label each.

    Formats:

    - ``.npz`` with arrays ``x`` ``(n, d)`` and ``y`` ``(n,)``, or ``x_train``, ``y_train``,
      ``x_test``, ``y_test``;
    - ``.csv`` with a header row, a ``label`` column, an optional ``split`` column (``train`` /
      ``test``), every other column a number;
    - ``.npy`` features ``(n, d)`` with labels in ``<stem>_labels.npy`` beside it.

    Integer labels >= -1 are kept as they are (-1: distractor); other labels (text) are numbered in
    sorted order and named.
    """
    check_split(split, "a table")
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"table {path} does not exist; give a .npz (x, y), .csv (with a 'label' column) or "
            ".npy (with <stem>_labels.npy beside it) file"
        )
    suffix = path.suffix.lower()
    if suffix == ".npz":
        x, y, own_split = _read_npz(path)
    elif suffix == ".csv":
        x, y, own_split = _read_csv(path)
    elif suffix == ".npy":
        labels_path = path.with_name(f"{path.stem}_labels.npy")
        if not labels_path.is_file():
            raise FileNotFoundError(
                f"table {path}: its labels should be in {labels_path}, which does not exist; "
                "save the labels there with np.save"
            )
        x, y, own_split = np.load(path), np.load(labels_path), None
    else:
        raise ValueError(f"table {path}: unknown format {suffix!r}; use .npz, .csv or .npy")
    x = np.asarray(x, dtype=np.float32)
    if len(y) == 0:
        raise ValueError(f"table {path} has no rows")
    if x.ndim != 2 or len(x) != len(y):
        raise ValueError(
            f"table {path}: features have shape {x.shape} and labels {np.shape(y)}; expected "
            "(n, d) features and n labels"
        )
    labels, names = _encode_labels(np.asarray(y))
    ds = LabelledDataset(f"{path.stem}/{split}", x, labels, class_names=names)
    if own_split is None:
        return _split_part(ds, split)
    return ds if split == "all" else ds.subset(np.char.lower(np.char.strip(own_split)) == split)
