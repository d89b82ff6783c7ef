"""Small grayscale image sets held in memory: digits, MNIST, Fashion-MNIST, USPS.

Each loader returns a :class:`LabelledDataset` of float32 ``(n, 1, h, w)`` images in [0, 1] with
the set's fine labels; ``split`` is ``"train"``, ``"test"`` or ``"all"`` (both, train first).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits as _sklearn_digits

from clusterable._optional import require
from clusterable.data.dataset import LabelledDataset, concatenate
from clusterable.data.idx import read_idx_images_labels
from clusterable.data.locate import SYSTEM_DATA_DIR, cache_dir, find_dir
from clusterable.data.registry import register_dataset
from clusterable.data.splits import SPLIT_SEED, TRAIN_FRACTION, check_split, stratified_split

FASHION_MNIST_CLASSES = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
]
DIGIT_CLASSES = [str(d) for d in range(10)]

#: File-name prefix of each split in the IDX distributions.
_IDX_PREFIX = {"train": "train", "test": "t10k"}


def load_digits(split: str = "train") -> LabelledDataset:
    """scikit-learn's bundled 8x8 digits (1,797 images, 10 classes), ``(1, 8, 8)`` in [0, 1].

    The set has no official split: ``train`` and ``test`` are the seeded stratified 70 % / 30 %
    split of :func:`clusterable.data.splits.stratified_split` (seed 0; 1,258 / 539 images, each
    part in file order).
    """
    check_split(split, "digits")
    digits = _sklearn_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]  # pixel values are 0..16
    ds = LabelledDataset(
        f"digits/{split}",
        x,
        digits.target,
        class_names=DIGIT_CLASSES,
        source="scikit-learn's bundled digits",
    )
    if split == "all":
        return ds
    train, test = stratified_split(ds.labels, TRAIN_FRACTION, SPLIT_SEED)
    return ds.subset(train if split == "train" else test)


def _idx_file(directory: Path, prefix: str, kind: str) -> Path | None:
    # Official names use "-ubyte"; some mirrors write "images.idx3-ubyte"; either may be gzipped.
    for stem in (f"{prefix}-{kind}-ubyte", f"{prefix}-{kind.replace('-', '.')}-ubyte"):
        for candidate in (directory / f"{stem}.gz", directory / stem):
            if candidate.is_file():
                return candidate
    return None


def _idx_how_to_get(name: str) -> str:
    files = "{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz"
    if name == "fashion-mnist":
        source = (
            "Install Debian's package (`apt-get install dataset-fashion-mnist`, as root), which "
            f"puts them in {SYSTEM_DATA_DIR / name}, or copy the four IDX files"
        )
    else:
        source = "Copy the four IDX files of the MNIST distribution"
    return (
        f"{source} ({files}, gzipped or not) into a directory DIR and pass root=DIR "
        f"(`--root DIR` on the command line), or into {cache_dir() / name}."
    )


def load_idx_dataset(
    name: str, class_names: list[str], root: str | Path | None, split: str
) -> LabelledDataset:
    """MNIST-format images from IDX files: ``(1, 28, 28)`` in [0, 1], 60,000 train / 10,000 test.

    Parameters
    ----------
    name : str
        ``"mnist"`` or ``"fashion-mnist"``: names the default directories and the messages.
    class_names : list of str
        Name of each label 0..9.
    root : str or Path, optional
        Directory with the IDX files, searched before the default places.
    split : str
        ``"train"``, ``"test"`` or ``"all"``.
    """
    check_split(split, name)
    if split == "all":
        parts = [load_idx_dataset(name, class_names, root, s) for s in ("train", "test")]
        return concatenate(*parts).replace(name=f"{name}/all")
    prefix = _IDX_PREFIX[split]
    directory = find_dir(
        name,
        root,
        lambda d: all(_idx_file(d, prefix, k) for k in ("images-idx3", "labels-idx1")),
        f"{prefix}-images-idx3-ubyte[.gz] and {prefix}-labels-idx1-ubyte[.gz]",
        _idx_how_to_get(name),
        subdirs=[name],
    )
    images_file = _idx_file(directory, prefix, "images-idx3")
    labels_file = _idx_file(directory, prefix, "labels-idx1")
    images, labels = read_idx_images_labels(images_file, labels_file)  # type: ignore[arg-type]
    x = (images.astype(np.float32) / 255.0)[:, None]  # (n, 1, h, w)
    return LabelledDataset(
        f"{name}/{split}",
        x,
        labels,
        class_names=class_names,
        source=f"{images_file}, {labels_file}",
    )


def load_usps(root: str | Path | None, split: str) -> LabelledDataset:
    """USPS from the usual ``usps.h5``: groups ``train`` (7,291) and ``test`` (2,007), each with
    ``data`` ``(n, 256)`` in [0, 1] and ``target``; images ``(1, 16, 16)``.

    ``root`` may be the ``.h5`` file itself or a directory holding ``usps.h5``.
    """
    check_split(split, "usps")
    if split == "all":
        parts = [load_usps(root, s) for s in ("train", "test")]
        return concatenate(*parts).replace(name="usps/all")
    h5py = require("h5py", "USPS (it ships as HDF5)")
    if root is not None and Path(root).is_file():
        path = Path(root)
    else:
        path = (
            find_dir(
                "usps",
                root,
                lambda d: (d / "usps.h5").is_file(),
                "usps.h5",
                "Copy the usual usps.h5 (groups train/test with datasets data and target) into a "
                "directory DIR and pass root=DIR, or pass the file itself as root.",
                subdirs=["usps"],
            )
            / "usps.h5"
        )
    try:
        with h5py.File(path, "r") as file:
            data = np.asarray(file[split]["data"], dtype=np.float32)
            target = np.asarray(file[split]["target"], dtype=np.int64)
    except (OSError, KeyError) as error:
        raise ValueError(
            f"USPS file {path}: cannot read {split}/data and {split}/target ({error}); expected "
            "groups train and test, each with datasets data (n, 256) and target (n,)"
        ) from error
    if data.ndim != 2 or data.shape[1] != 256 or len(data) != len(target):
        raise ValueError(
            f"USPS file {path}: {split}/data has shape {data.shape} and {split}/target "
            f"{target.shape}; expected (n, 256) 16x16 images and n labels"
        )
    if data.size and (data.min() < 0.0 or data.max() > 1.0):
        raise ValueError(
            f"USPS file {path}: pixel values span [{data.min():g}, {data.max():g}], expected "
            "[0, 1]; this is another USPS edition: rescale it to [0, 1] and save it as usps.h5"
        )
    return LabelledDataset(
        f"usps/{split}",
        data.reshape(-1, 1, 16, 16),
        target,
        class_names=DIGIT_CLASSES,
        source=str(path),
    )


# The registry's uniform signature (root, split, image_size, channels); these sets are held in
# memory at their own size, so load_dataset refuses image_size and channels for them.
@register_dataset(
    "digits",
    items="scikit-learn's load_digits().images (pixel values 0..16) / 16, float32 (1, 8, 8)",
)
def _digits(
    root: Path | None, split: str, image_size: int | None, channels: int | None
) -> LabelledDataset:
    return load_digits(split)


@register_dataset("mnist", items="the IDX files' uint8 pixels / 255, float32 (1, 28, 28)")
def _mnist(
    root: Path | None, split: str, image_size: int | None, channels: int | None
) -> LabelledDataset:
    return load_idx_dataset("mnist", DIGIT_CLASSES, root, split)


@register_dataset("fashion-mnist", items="the IDX files' uint8 pixels / 255, float32 (1, 28, 28)")
def _fashion_mnist(
    root: Path | None, split: str, image_size: int | None, channels: int | None
) -> LabelledDataset:
    return load_idx_dataset("fashion-mnist", FASHION_MNIST_CLASSES, root, split)


@register_dataset("usps", items="usps.h5's data rows (already in [0, 1]) as float32 (1, 16, 16)")
def _usps(
    root: Path | None, split: str, image_size: int | None, channels: int | None
) -> LabelledDataset:
    return load_usps(root, split)
