"""One-file archives of named arrays with a checksummed manifest, written atomically.

What a user saves to use later (a search index, a fitted partition) is one ``.npz`` file: its
arrays, and a JSON manifest naming what the file is, its format version, the object's settings,
and the SHA-256 of every array. Reading checks all of it, so a truncated copy, an edited array or
another kind of file is refused with a message, never half-read. Nothing is pickled. Writing goes
to a temporary file beside the target, flushed to disk, then renamed over it: an interrupted save
leaves the previous file (or none), never half of one.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from clusterable._atomic import atomic_write

#: The archive member that holds the manifest.
MANIFEST = "manifest"


def save_archive(
    path: str | os.PathLike[str],
    archive_kind: str,
    version: int,
    arrays: dict[str, Any],
    /,
    **settings: Any,
) -> Path:
    """Write ``arrays`` and a manifest of ``archive_kind``, ``version`` and ``settings``.

    ``.npz`` is appended when ``path`` has another suffix; returns the path written.
    """
    target = Path(path)
    if target.suffix != ".npz":
        target = target.with_name(target.name + ".npz")
    arrays = {name: np.asarray(array) for name, array in arrays.items()}
    manifest = {
        "format": archive_kind,
        "version": version,
        **settings,
        "sha256": {name: _digest(array) for name, array in arrays.items()},
    }
    arrays[MANIFEST] = np.frombuffer(json.dumps(manifest).encode(), dtype=np.uint8)
    atomic_write(target, lambda out: np.savez(out, **arrays))
    return target


def load_archive(
    path: str | os.PathLike[str], kind: str, version: int, remedy: str
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read an archive of ``kind`` written by :func:`save_archive`: ``(arrays, manifest)``.

    Parameters
    ----------
    remedy : str
        What the user should do when the file cannot be used (e.g. "rebuild it with
        `clusterable index`"); ends every error message.

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    ValueError
        If the file is unreadable or truncated, is another kind of file or version, or an array
        does not match its checksum.
    """
    source = Path(path)
    if not source.is_file():
        raise FileNotFoundError(f"{source} does not exist: no {kind} file there; {remedy}")
    try:
        with np.load(source, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
        raise ValueError(
            f"{source} is not a readable {kind} file ({type(err).__name__}: {err}); it may be "
            f"truncated or another kind of file: {remedy}"
        ) from err
    try:
        manifest = json.loads(arrays.pop(MANIFEST).tobytes().decode())
    except (KeyError, ValueError) as err:
        raise ValueError(f"{source} has no {kind} manifest: it is another kind of file") from err
    if manifest.get("format") != kind:
        raise ValueError(f"{source} holds a {manifest.get('format')!r}, not a {kind}")
    if manifest.get("version") != version:
        raise ValueError(
            f"{source} uses {kind} format {manifest.get('version')}, this version of clusterable "
            f"reads {version}; {remedy}"
        )
    for name, expected in manifest["sha256"].items():
        if name not in arrays or _digest(arrays[name]) != expected:
            raise ValueError(
                f"{source} is damaged: its {name!r} array does not match the checksum written "
                f"with it (a truncated copy or an edited file); {remedy}"
            )
    return arrays, manifest


def _digest(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return hashlib.sha256(buffer.getvalue()).hexdigest()
