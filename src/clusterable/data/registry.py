"""``load_dataset(name, ...)``: every dataset by name, with its split and label view.

Names: ``digits``, ``mnist``, ``fashion-mnist``, ``usps``, ``cub200``, ``cars196``, ``sop``,
``inshop``, ``image-folder`` (root = the folder; or ``folder:PATH``) and ``table`` (root = the
file; or ``table:PATH``). Each is registered by its loader's module with
:func:`register_dataset`: a new dataset is one module (imported in
``clusterable/data/__init__.py``) and its test.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterable._register import Registry
from clusterable.data.dataset import DEFAULT_IMAGE_SIZE, ImageFiles, LabelledDataset
from clusterable.data.views import MSDNN_COARSE, coarse_labels

#: ``loader(root, split, image_size, channels)`` -> the dataset with its fine labels; None for
#: image size and channels means "as the files are".
Loader = Callable[[Path | None, str, int | None, int | None], LabelledDataset]

#: Every dataset by name: its :data:`Loader`, with ``path_prefix`` and ``resized`` (and any other
#: metadata) as given at registration.
DATASETS: Registry[Loader] = Registry("dataset")


def register_dataset(
    name: str, *, path_prefix: str | None = None, resized: bool = False, **metadata: Any
) -> Callable[[Callable[..., LabelledDataset]], Callable[..., LabelledDataset]]:
    """Function decorator: make a loader available as ``load_dataset(name)``.

    Parameters
    ----------
    name : str
        The registry name.
    path_prefix : str, optional
        The dataset reads the user's own files: ``load_dataset("PREFIX:PATH")`` means
        ``load_dataset(name, root=PATH)``, and a call without a root is refused.
    resized : bool
        The loader takes ``(root, split, image_size)`` and reads RGB image files, resized to
        ``DEFAULT_IMAGE_SIZE`` unless told otherwise (CUB, Cars, SOP); otherwise it takes
        ``(root, split, image_size, channels)``.
    **metadata
        Anything else to keep with the entry (``DATASETS.metadata(name)``).
    """
    if path_prefix is not None and path_prefix in _path_prefixes():
        taken = _path_prefixes()[path_prefix]
        raise RuntimeError(f"dataset path prefix {path_prefix!r} is taken by {taken!r}")

    def add(load: Callable[..., LabelledDataset]) -> Callable[..., LabelledDataset]:
        loader: Loader = _sized(load) if resized else load
        if path_prefix is not None:
            loader = _needs_root(name, path_prefix, loader)
        DATASETS.add(name, loader, path_prefix=path_prefix, resized=resized, **metadata)
        return load

    return add


def _path_prefixes() -> dict[str, str]:
    """``PREFIX:PATH`` names: each prefix and the dataset it means."""
    prefixes = {name: DATASETS.metadata(name).get("path_prefix") for name in DATASETS}
    return {prefix: name for name, prefix in prefixes.items() if prefix is not None}


def names_a_path(name: str) -> bool:
    """Whether ``name`` is ``PREFIX:PATH`` with a known prefix (``folder:``, ``table:``): a data
    set of one's own files, rather than a file's own path."""
    key, sep, path = name.partition(":")
    return bool(sep and path) and key.strip().lower() in _path_prefixes()


def _needs_root(name: str, prefix: str, load: Loader) -> Loader:
    def load_from_root(
        root: Path | None, split: str, image_size: int | None, channels: int | None
    ) -> LabelledDataset:
        if root is None:
            raise ValueError(
                f"dataset {name!r} reads your own files: give root=PATH or the name '{prefix}:PATH'"
            )
        return load(root, split, image_size, channels)

    return load_from_root


def _sized(load: Callable[[Path | None, str, int], LabelledDataset]) -> Loader:
    """A loader of RGB image files resized to DEFAULT_IMAGE_SIZE unless told otherwise."""

    def load_sized(
        root: Path | None, split: str, image_size: int | None, channels: int | None
    ) -> LabelledDataset:
        ds = load(root, split, image_size or DEFAULT_IMAGE_SIZE)
        if channels is None:
            return ds
        return ds.replace(x=ImageFiles(ds.x.paths, ds.x.size, channels))  # type: ignore[union-attr]

    return load_sized


def standard_recall_ks(name: str) -> tuple[int, ...] | None:
    """The Recall@K a dataset's papers report (registered as ``recall_ks``; In-Shop: 1, 10, 20,
    30, 40, 50), None for a set without a standard (a user's folder or table)."""
    key = name.partition(":")[0].strip().lower()
    if ":" in name or key not in DATASETS:
        return None
    ks = DATASETS.metadata(key).get("recall_ks")
    return None if ks is None else tuple(ks)


def dataset_items(name: str) -> str | None:
    """How a data set held as arrays scaled its items, for a deployer who prepares them without
    this library (registered as ``items``: digits are scikit-learn's 0..16 pixels / 16); None for
    a set read from image files or a table, which the files' own view describes."""
    key = name.partition(":")[0].strip().lower()
    if ":" in name or key not in DATASETS:
        return None
    return DATASETS.metadata(key).get("items")


def available_datasets() -> list[str]:
    """Names :func:`load_dataset` accepts (``folder:PATH`` and ``table:PATH`` besides)."""
    return DATASETS.names()


def check_dataset_name(name: str) -> None:
    """Refuse a name :func:`load_dataset` does not know, before any file is read: a registered
    name, or ``PREFIX:PATH`` with a known prefix (``folder:``, ``table:``).

    Raises
    ------
    ValueError
        Naming the datasets, the ``PREFIX:PATH`` forms and the closest name.
    """
    key, sep, path = name.partition(":")
    key = key.strip().lower()
    prefixes = _path_prefixes()
    with_path = ", ".join(f"{p}:PATH" for p in prefixes)
    if sep and path:
        if key not in prefixes:
            raise ValueError(f"unknown dataset {name!r}: only {with_path} take a path in the name")
        return
    if key not in DATASETS:
        close = difflib.get_close_matches(key, available_datasets(), n=1, cutoff=0.7)
        hint = f"; did you mean {close[0]}?" if close else ""
        path_like = any(c in name for c in "/\\") or name.startswith((".", "~"))
        if path_like and not Path(name).expanduser().exists():
            raise FileNotFoundError(
                f"no folder or file {name!r} exists, and no dataset has that name (those are "
                f"{', '.join(available_datasets())})"
            )
        if Path(name).expanduser().is_dir():
            hint = f"; for the folder of that name give folder:{name}"
        raise ValueError(
            f"unknown dataset {name!r}; available: {', '.join(available_datasets())}, "
            f"{with_path}{hint}"
        )


def load_dataset(
    name: str,
    root: str | Path | None = None,
    split: str = "train",
    labels: str = "fine",
    *,
    image_size: int | None = None,
    channels: int | None = None,
) -> LabelledDataset:
    """Load a dataset by name, with one of its splits and a label view.

    Parameters
    ----------
    name : str
        One of :func:`available_datasets`, or ``folder:PATH`` / ``table:PATH``.
    root : str or Path, optional
        Where the files are. For the named benchmark sets it is searched first, then
        ``/usr/share/datasets/<name>`` and ``~/.cache/clusterable/<name>``; ``digits`` needs none
        (scikit-learn ships it); ``image-folder`` and ``table`` need it (the folder, the file).
    split : {"train", "test", "all"}
        The set's official split where it has one: IDX and USPS train/test files; zero-shot class
        halves for ``cub200`` (classes 1-100 / 101-200) and ``cars196`` (1-98 / 99-196); SOP's
        ``Ebay_train.txt`` / ``Ebay_test.txt``; In-Shop's ``train`` images, and its ``query``
        then ``gallery`` images as the test split (flagged by ``is_query``). Sets without one
        (``digits``, a folder or table without its own split) get a seeded stratified 70 % /
        30 % split.
    labels : {"fine", "coarse"}
        ``"coarse"`` trains on MsDNN's merged classes (0-4 -> 0, 5-9 -> 1) of a 10-class set;
        the original classes stay in ``fine_labels`` for sub-class evaluation.
    image_size : int, optional
        Side of the square that image files are resized to. By default a folder's images keep
        their own size and CUB, Cars, SOP and In-Shop get 64. Sets held in memory (digits,
        MNIST, ...) have a fixed size and refuse this setting.
    channels : {1, 3}, optional
        Image files read as grayscale (1) or RGB (3). By default a folder's images as they are
        (1 when all are grayscale), CUB, Cars, SOP and In-Shop RGB.

    Returns
    -------
    LabelledDataset

    Raises
    ------
    FileNotFoundError
        The files are in none of the places searched; the message lists them and how to get
        the files.
    ValueError
        Unknown name, split or label view, or a corrupt file (the message names it).

    Examples
    --------
    >>> from clusterable.data import load_dataset
    >>> train = load_dataset("digits", split="train", labels="coarse")
    >>> train.input_shape, train.num_classes, len(set(train.fine_labels))
    ((1, 8, 8), 2, 10)
    >>> test = load_dataset("fashion-mnist", split="test")  # doctest: +SKIP
    >>> birds = load_dataset("cub200", root="~/data", image_size=128)  # doctest: +SKIP
    """
    check_dataset_name(name)
    key, _, path = name.partition(":")
    key = key.strip().lower()
    if path:
        key, root = _path_prefixes()[key], path
    if labels not in ("fine", "coarse"):
        raise ValueError(f"labels must be 'fine' or 'coarse', got {labels!r}")
    ds = DATASETS[key](None if root is None else Path(root), split, image_size, channels)
    if (image_size is not None or channels is not None) and not isinstance(ds.x, ImageFiles):
        raise ValueError(
            f"dataset {name!r} is held in memory as items of shape {ds.input_shape}: image "
            "size and channels apply to image files only; leave them out"
        )
    if labels == "fine":
        return ds
    if len(ds.fine_class_names) != 10:
        raise ValueError(
            f"labels='coarse' means MsDNN's 0-4 / 5-9 classes, defined for 10-class sets; "
            f"{name!r} has {len(ds.fine_class_names)} classes: use "
            "clusterable.data.coarse_labels(ds, mapping) with your own mapping"
        )
    return coarse_labels(ds, MSDNN_COARSE)
