"""Finding a dataset's files: the user's directory first, then the standard places.

Nothing is downloaded: a dataset that is nowhere raises FileNotFoundError listing every place
looked and how to get the files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

#: Where Debian's dataset packages put their files (``dataset-fashion-mnist`` installs
#: ``/usr/share/datasets/fashion-mnist``).
SYSTEM_DATA_DIR = Path("/usr/share/datasets")


def cache_dir() -> Path:
    """Where users may copy datasets: ``$XDG_CACHE_HOME/clusterable`` (``~/.cache/clusterable``)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "clusterable"


def search_dirs(name: str, root: str | Path | None, subdirs: Iterable[str] = ()) -> list[Path]:
    """Directories to look in: ``root`` alone when one is given (an explicit root that lacks the
    files is an error, never a silent fall-back to another copy), else
    ``/usr/share/datasets/<name>`` then ``~/.cache/clusterable/<name>``; each followed by its
    ``subdirs`` (the folder an official archive extracts to, so that root may be the archive's
    parent or the folder itself)."""
    if root is not None:
        bases = [Path(root).expanduser()]
    else:
        bases = [SYSTEM_DATA_DIR / name, cache_dir() / name]
    subdirs = list(subdirs)
    return [path for base in bases for path in (base, *(base / sub for sub in subdirs))]


def find_dir(
    name: str,
    root: str | Path | None,
    has_files: Callable[[Path], bool],
    wanted: str,
    how_to_get: str,
    subdirs: Iterable[str] = (),
) -> Path:
    """The first of :func:`search_dirs` where ``has_files(dir)`` holds.

    Parameters
    ----------
    name : str
        Dataset name, used in the standard paths and the message.
    root : str or Path, optional
        The user's directory; when given, the only place searched.
    has_files : callable
        Whether a directory holds the files needed.
    wanted : str
        The files needed, for the message, e.g. ``"images.txt and image_class_labels.txt"``.
    how_to_get : str
        How to obtain the files, for the message.
    subdirs : iterable of str
        Sub-folders of each place that are searched too.

    Raises
    ------
    FileNotFoundError
        No place has the files; the message lists every place and ``how_to_get``.
    """
    tried = search_dirs(name, root, subdirs)
    for directory in tried:
        if directory.is_dir() and has_files(directory):
            return directory
    places = ", ".join(str(directory) for directory in tried)
    if root is not None:
        state = "does not exist" if not Path(root).expanduser().is_dir() else "lacks them"
        raise FileNotFoundError(
            f"dataset {name!r}: the root you gave, {Path(root).expanduser()}, {state}; it should "
            f"hold {wanted} (looked in {places}). Give the folder that holds them, or leave out "
            f"the root to use {SYSTEM_DATA_DIR / name} or {cache_dir() / name}. {how_to_get}"
        )
    raise FileNotFoundError(
        f"dataset {name!r} not found: looked for {wanted} in {places}. {how_to_get} "
        "(clusterable never downloads data)."
    )
