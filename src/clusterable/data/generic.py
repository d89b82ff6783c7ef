"""The user's own data: a folder of images with one sub-folder per class, or a feature table.

Either may carry its own split (``train/`` and ``test/`` sub-folders; ``_train``/``_test`` arrays in
an ``.npz``; a ``split`` column in a ``.csv``). Without one, ``train`` and ``test`` are the seeded
stratified 70 % / 30 % split that ``digits`` uses, and ``all`` is everything; a zero-shot split is
one view away (:func:`clusterable.data.views.class_split`).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from clusterable.data.dataset import (
    DEFAULT_IMAGE_SIZE,
    UNLABELLED,
    ImageFiles,
    LabelledDataset,
    labelled_mask,
)
from clusterable.data.registry import register_dataset
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


def _unlabelled_part(ds: LabelledDataset, split: str, what: str) -> LabelledDataset:
    """A set of unlabelled items (every label :data:`UNLABELLED`): all of it as the train (and
    all) split, which ``train --unsupervised`` trains on; no test split, which would have no
    classes to score."""
    if split != "test":
        return ds
    raise ValueError(
        f"{what} has no classes, so no test split to score: train --unsupervised trains on all of "
        "it without a test table (OPML on pseudo-labels), a trained run embeds and clusters its "
        "items (embed RUN --items PATH, cluster RUN), and classes make a test split"
    )


def _class_folders(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))


def images_in(folder: Path) -> list[Path]:
    """The image files below ``folder``, sorted, hidden files and the files of hidden folders
    (``.thumbnails/``, ``.AppleDouble/``) left out: how a folder data set lists its images, and
    how a trained run lists a folder it is given."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.suffix.lower() in IMAGE_EXTENSIONS
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def _grayscale(mode: str) -> bool:
    return mode in ("1", "L", "LA", "I", "I;16", "F")  # "P" (palette) may hold colours


#: A JPEG marker's second byte that stands alone, without a length: fill (``FF``), stuffing
#: (``00``), the restart markers ``D0``-``D7`` and ``TEM`` (``01``).
_STANDALONE_MARKERS = frozenset({0x00, 0x01, 0xFF, *range(0xD0, 0xD8)})
_END_OF_IMAGE, _START_OF_SCAN = 0xD9, 0xDA


def _jpeg_is_cut_short(path: Path) -> bool:
    """Whether a JPEG file ends before its image data does, what a copy or a download cut short
    leaves: PIL's ``verify`` checks nothing of a JPEG, and decoding such a file fails ("image
    file is truncated").

    A file whose last two bytes are the end-of-image marker (``FF D9``) is whole, read no
    further: an ``FF`` inside the image data is followed by ``00`` or a restart marker. Any
    other file (bytes after the end, as some cameras pad, or a phone's motion photo appends a
    video) is walked segment by segment from its start, through each scan's data, to its end
    marker (:func:`_jpeg_image_ends_at`), so that what follows the image is never read as part
    of it, as PIL does not.
    """
    with path.open("rb") as file:
        file.seek(0, os.SEEK_END)
        if file.tell() >= 4:
            file.seek(-2, os.SEEK_END)
            if file.read(2) == b"\xff\xd9":
                return False
        file.seek(0)
        return _jpeg_image_ends_at(file.read()) is None


def _jpeg_image_ends_at(data: bytes) -> int | None:
    """The offset just past a JPEG's end-of-image marker, walking its segments (each marker's
    length) and the entropy-coded data after each start of scan (up to the first marker that is
    no stuffing or restart); None where the data ends first."""
    position = 2  # after the start-of-image marker, which PIL has read
    while position + 1 < len(data):
        if data[position] != 0xFF:  # not a marker: damaged; PIL decodes what it can
            return position
        marker = data[position + 1]
        if marker == _END_OF_IMAGE:
            return position + 2
        if marker in _STANDALONE_MARKERS:
            position += 1 if marker == 0xFF else 2
            continue
        position += 2 + int.from_bytes(data[position + 2 : position + 4], "big")
        if marker != _START_OF_SCAN:
            continue
        while True:  # the scan's data: to the next marker that is no stuffing or restart
            position = data.find(b"\xff", position)
            if position < 0 or position + 1 >= len(data):
                return None
            following = data[position + 1]
            if following == 0xFF:  # fill before a marker
                position += 1
            elif following in _STANDALONE_MARKERS:
                position += 2
            else:
                break
    return None


#: Undecodable image files a refused load names; more are counted.
_UNDECODABLE_NAMED = 5


def _check_images(files: list[Path]) -> tuple[set[tuple[int, int]], bool]:
    """Open and verify every image once (chunk structure and checksums, a JPEG's end marker, no
    pixel decoding), so a corrupt file fails the load, not a run that already trained for hours;
    every such file is found before the load is refused, so that one pass names them all.

    Returns the (width, height) sizes found and whether every image is grayscale.
    """
    sizes: set[tuple[int, int]] = set()
    gray = True
    undecodable: list[str] = []
    for path in files:
        try:
            with Image.open(path) as image:
                size, mode, jpeg = image.size, image.mode, image.format == "JPEG"
                image.verify()
            if jpeg and _jpeg_is_cut_short(path):
                raise OSError("image file is truncated: it ends before its image data does")
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
            undecodable.append(f"{path} ({error})")
            continue
        sizes.add(size)
        gray = gray and _grayscale(mode)
    if len(undecodable) == 1:
        raise ValueError(f"cannot decode image file {undecodable[0]}; replace or delete the file")
    if undecodable:
        named = "; ".join(undecodable[:_UNDECODABLE_NAMED])
        more = len(undecodable) - _UNDECODABLE_NAMED
        raise ValueError(
            f"cannot decode {len(undecodable)} image files: {named}"
            + (f"; and {more} more" if more > 0 else "")
            + "; replace or delete them"
        )
    return sizes, gray


@register_dataset("image-folder", path_prefix="folder")
def load_image_folder(
    root: str | Path,
    split: str,
    image_size: int | None = None,
    channels: int | None = None,
) -> LabelledDataset:
    """Images in ``root/<class>/`` (or ``root/train/<class>/`` and ``root/test/<class>/``, or
    ``root/train/<class>/``, ``root/query/<class>/`` and ``root/gallery/<class>/``).

    Classes are the sub-folder names in sorted order (label 0 is the first); images are every file
    with an image extension under a class folder, sorted by path. Every file is opened and
    verified once here, so a corrupt image is reported before any training.

    Parameters
    ----------
    root : str or Path
        The folder.
    split : {"train", "test", "all"}
        Without ``train/`` and ``test/`` sub-folders, ``train`` and ``test`` are a seeded
        stratified 70 % / 30 % split of the images. With ``query/`` and ``gallery/`` in place of
        ``test/``, the test split is the query images, then the gallery images, flagged by
        ``is_query``: each query ranks the gallery when evaluated.
    image_size : int, optional
        Resize every image to this square. By default, images of one size no larger than
        :data:`~clusterable.data.DEFAULT_IMAGE_SIZE` (64) pixels a side keep their size; photos
        (larger, or of several sizes) are resized to 64 x 64, which keeps CPU training of the small
        models practical. A run with an image backbone (``timm:``, ``torchvision:``) asks for the
        backbone's input size instead (:meth:`clusterable.recipe.RunSpec.load`).
    channels : {1, 3}, optional
        1 reads grayscale, 3 RGB. By default 1 when every image is grayscale, else 3.
    """
    check_split(split, "an image folder")
    root = Path(root).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(
            f"image folder {root} does not exist; give a directory with one sub-folder of "
            "images per class"
        )
    own_split = (root / "train").is_dir()
    test_parts = _test_parts(root) if own_split else ["test"]
    if own_split:
        parts = {"train": ["train"], "test": test_parts, "all": ["train", *test_parts]}[split]
        missing = [p for p in parts if not (root / p).is_dir()]
        if missing:
            raise FileNotFoundError(
                f"image folder {root} has a train/ sub-folder but no {missing[0]}/; add it, or "
                "put the class folders directly in the folder to have them split for you"
            )
        # Every part decides the class numbers, the image size and the channels, so a class has
        # one label, and an image one view, in train and test.
        every = [
            (p, f)
            for p in ("train", *test_parts)
            if (root / p).is_dir()
            for f in _class_folders(root / p)
        ]
        names = sorted({f.name for _, f in every})
        folders = [(p, f) for p, f in every if p in parts]
    else:
        every = folders = [("", f) for f in _class_folders(root)]
        names = [f.name for _, f in folders]
    images = {folder: images_in(folder) for _, folder in every}
    files, labels, is_query = [], [], []
    for part, folder in folders:
        files += images[folder]
        labels += [names.index(folder.name)] * len(images[folder])
        is_query += [part == "query"] * len(images[folder])
    loose = images_in(root) if not own_split and not folders else []  # no class folders
    if loose:
        return _unlabelled_folder(root, loose, split, image_size, channels)
    if not files:
        raise FileNotFoundError(
            f"image folder {root} holds no images in class sub-folders (looked for "
            f"{', '.join(sorted(IMAGE_EXTENSIONS))}); give a directory with one sub-folder of "
            "images per class"
        )
    # A class is a folder name; one without an image in any part would be a class of no items.
    imageless = {f.name for _, f in every} - {f.name for _, f in every if images[f]}
    if imageless:
        folder = next(f for _, f in every if f.name == min(imageless))
        raise FileNotFoundError(
            f"class folder {folder} holds no images (looked for "
            f"{', '.join(sorted(IMAGE_EXTENSIONS))}); add its images, or move the folder out "
            f"of {root}"
        )
    every_file = [path for folder_images in images.values() for path in folder_images]
    size, channels = _image_view(every_file, image_size, channels)
    ds = LabelledDataset(
        f"{root.name}/{split}",
        ImageFiles(files, size, channels),
        labels,
        class_names=names,
        source=f"{len(every_file)} images in {root}",
        is_query=is_query if split == "test" and test_parts == ["query", "gallery"] else None,
    )
    return ds if own_split else _split_part(ds, split)


def _unlabelled_folder(
    root: Path, files: list[Path], split: str, image_size: int | None, channels: int | None
) -> LabelledDataset:
    """The images ``files`` of a folder ``root`` without class sub-folders, unlabelled: a train
    split of every image (:func:`_unlabelled_part`)."""
    size, channels = _image_view(files, image_size, channels)
    ds = LabelledDataset(
        f"{root.name}/{split}",
        ImageFiles(files, size, channels),
        np.full(len(files), UNLABELLED, dtype=np.int64),
        class_names=[],
        source=f"{len(files)} unlabelled images in {root}",
    )
    return _unlabelled_part(ds, split, f"image folder {root} (its images lie directly in it)")


def _image_view(
    files: list[Path], image_size: int | None, channels: int | None
) -> tuple[int | tuple[int, int], int]:
    """The size and channels ``files`` are read at, every file checked first: ``image_size``,
    or their own size where they share one of at most 64 pixels a side, else 64; ``channels``,
    or 1 where every image is grayscale, else 3."""
    sizes, gray = _check_images(files)
    if image_size is None:
        width, height = next(iter(sizes))
        photos = len(sizes) > 1 or max(width, height) > DEFAULT_IMAGE_SIZE
        size: int | tuple[int, int] = DEFAULT_IMAGE_SIZE if photos else (height, width)
    else:
        size = image_size
    return size, (1 if gray else 3) if channels is None else channels


def _test_parts(root: Path) -> list[str]:
    """The sub-folders of a folder's own test split: ``test/``, or ``query/`` and ``gallery/``
    (each query image then ranks the gallery images, as In-Shop's protocol does)."""
    roles = [p for p in ("query", "gallery") if (root / p).is_dir()]
    if not roles:
        return ["test"]
    if (root / "test").is_dir() or len(roles) == 1:
        raise FileNotFoundError(
            f"image folder {root} has {' and '.join(roles)}/ sub-folders"
            + (" and a test/ one" if (root / "test").is_dir() else "")
            + ": the test split is either test/ or both query/ and gallery/; keep one of the two"
        )
    return ["query", "gallery"]


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


def _column_named(header: list[str], name: str) -> int | None:
    """Index of the column called ``name`` in any letter case, or None."""
    found = [i for i, column in enumerate(header) if column.strip().lower() == name]
    return found[0] if found else None


def _raise_at_first_bad_cell(
    path: Path, header: list[str], feature_at: list[int], body: list[tuple[int, list[str]]]
) -> None:
    for line, row in body:
        for i in feature_at:
            text = row[i].strip()
            try:
                with np.errstate(over="ignore"):
                    finite = bool(np.isfinite(np.float32(float(text))))
                problem = f"holds {text!r}, which is NaN or beyond the float32 range"
            except ValueError:
                finite = False
                problem = f"holds {text!r}, which is not a number" if text else "is empty"
            if not finite:
                raise ValueError(
                    f"table {path}, line {line}, column {header[i]!r} {problem}; every feature "
                    "must be a number (only 'label' and 'split' may hold text)"
                )


def _read_csv(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    with path.open(newline="", encoding="utf-8") as file:
        rows = list(csv.reader(file))
    header = rows[0] if rows else []
    label_at = _column_named(header, "label")
    if label_at is None:
        shown = ", ".join(repr(c) for c in header[:5]) + (", ..." if len(header) > 5 else "")
        raise ValueError(
            f"table {path} needs a header row with a 'label' column (its first row holds "
            f"{len(header)} columns: {shown or 'an empty file'}); every other column is a "
            "feature, except an optional 'split' column of train/test"
        )
    split_at = _column_named(header, "split")
    feature_at = [i for i in range(len(header)) if i not in (label_at, split_at)]
    body = [(line, row) for line, row in enumerate(rows[1:], start=2) if row]
    for line, row in body:
        if len(row) != len(header):
            raise ValueError(
                f"table {path}, line {line}: {len(row)} values but the header has "
                f"{len(header)} columns; give every row one value per column"
            )
        if not row[label_at].strip():
            raise ValueError(f"table {path}, line {line}: the label is empty; give every row one")
    try:
        x = np.array([[row[i] for i in feature_at] for _, row in body], dtype=np.float32)
        x = x.reshape(len(body), len(feature_at))  # (n, d)
        clean = bool(np.isfinite(x).all())
    except ValueError:
        clean = False
    if not clean:
        _raise_at_first_bad_cell(path, header, feature_at, body)
    labels = np.array([row[label_at].strip() for _, row in body])
    split = np.array([row[split_at] for _, row in body]) if split_at is not None else None
    return x, labels, split


def _read_npz(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    with np.load(path, allow_pickle=False) as arrays:
        by_name = {key.lower(): key for key in arrays.files}  # X and x alike
        if {"x_train", "y_train", "x_test", "y_test"} <= by_name.keys():
            parts = [
                (arrays[by_name[f"x_{p}"]], arrays[by_name[f"y_{p}"]], p) for p in ("train", "test")
            ]
            x = np.concatenate([part[0] for part in parts])
            y = np.concatenate([part[1] for part in parts])
            split = np.concatenate([np.full(len(part[1]), part[2]) for part in parts])
            return x, y, split
        if {"x", "y"} <= by_name.keys():
            return arrays[by_name["x"]], arrays[by_name["y"]], None
        if by_name.keys() == {"x"}:  # unlabelled items
            x = arrays[by_name["x"]]
            return x, np.full(len(x), UNLABELLED, dtype=np.int64), None
        keys = sorted(arrays.files)
    raise ValueError(
        f"table {path} holds arrays {keys}; expected 'x' (n, d) and 'y' (n,), 'x' alone "
        "(unlabelled items), or x_train, y_train, x_test and y_test (any letter case)"
    )


def _check_finite(path: Path, x: np.ndarray) -> None:
    bad = np.argwhere(~np.isfinite(x))
    if len(bad):
        row, column = (int(i) for i in bad[0])
        raise ValueError(
            f"table {path}: {len(bad)} feature value(s) are NaN or infinite (first: row {row}, "
            f"column {column}, counting from 0); fill or drop them before training"
        )


def load_table(path: str | Path, split: str) -> LabelledDataset:
    """A feature table: items ``(d,)`` float32 as stored, one label each.

    Formats:

    - ``.npz`` with arrays ``x`` ``(n, d)`` and ``y`` ``(n,)``, or ``x_train``, ``y_train``,
      ``x_test``, ``y_test`` (names in any letter case);
    - ``.csv`` with a header row, a ``label`` column, an optional ``split`` column (``train`` /
      ``test``) (both in any letter case), every other column a number;
    - ``.npy`` features ``(n, d)`` with labels in ``<stem>_labels.npy`` beside it.

    Integer labels >= -1 are kept as they are (-1: distractor); other labels (text) are numbered in
    sorted order and named. Items without labels (``x`` alone, a ``.npy`` without its labels
    file, or every label -1) are unlabelled: their train split is every item, and they have no
    test split (``train --unsupervised`` trains on them). A NaN or infinite feature, an empty
    cell or a short row is an error naming its row and column.
    """
    check_split(split, "a table")
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"table {path} does not exist; give a .npz (x, y), .csv (with a 'label' column) or "
            ".npy (with <stem>_labels.npy beside it) file"
        )
    suffix = path.suffix.lower()
    unlabelled = f"table {path} (its items have no labels)"
    if suffix == ".npz":
        x, y, own_split = _read_npz(path)
    elif suffix == ".csv":
        x, y, own_split = _read_csv(path)
    elif suffix == ".npy":
        labels_path = path.with_name(f"{path.stem}_labels.npy")
        x, own_split = np.load(path), None
        y = np.load(labels_path) if labels_path.is_file() else np.full(len(x), UNLABELLED)
        unlabelled = f"table {path} (its labels file {labels_path.name} does not exist)"
    else:
        raise ValueError(f"table {path}: unknown format {suffix!r}; use .npz, .csv or .npy")
    try:
        x = np.asarray(x, dtype=np.float32)
    except (ValueError, TypeError) as error:
        raise ValueError(f"table {path}: the features are not numbers ({error})") from None
    if len(y) == 0:
        raise ValueError(f"table {path} has no rows")
    if x.ndim != 2 or len(x) != len(y):
        raise ValueError(
            f"table {path}: features have shape {x.shape} and labels {np.shape(y)}; expected "
            "(n, d) features and n labels"
        )
    _check_finite(path, x)
    labels, names = _encode_labels(np.asarray(y))
    ds = LabelledDataset(f"{path.stem}/{split}", x, labels, class_names=names, source=str(path))
    if own_split is None and not labelled_mask(labels).any():
        return _unlabelled_part(ds, split, unlabelled)
    if own_split is None:
        return _split_part(ds, split)
    return ds if split == "all" else ds.subset(np.char.lower(np.char.strip(own_split)) == split)


@register_dataset("table", path_prefix="table")
def _table(root: Path, split: str, image_size: int | None, channels: int | None) -> LabelledDataset:
    return load_table(root, split)
