"""One-file archives of named arrays with a checksummed manifest, written atomically.

What a user saves to use later (a search index, a fitted partition) is one ``.npz`` file (a zip of
``.npy`` members), at exactly the path given: its arrays, a JSON manifest naming what the file
is, its format version, the object's settings and the SHA-256 of every array, and the SHA-256 of
the manifest itself. Reading checks all of it, so a truncated copy, a damaged byte anywhere (the
zip's directory included), an edited array or manifest, or another kind of file is refused with
a ValueError that names the file, never half-read. Nothing is pickled. Writing goes to a
temporary file beside the target, flushed to disk, then renamed over it: an interrupted save
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

#: The archive members that hold the manifest and its SHA-256.
MANIFEST, MANIFEST_DIGEST = "manifest", "manifest_sha256"


def save_archive(
    path: str | os.PathLike[str],
    archive_kind: str,
    version: int,
    arrays: dict[str, Any],
    /,
    **settings: Any,
) -> Path:
    """Write ``arrays`` and a manifest of ``archive_kind``, ``version`` and ``settings`` to
    ``path`` (whatever its suffix: the path given is the path written, and the one to load);
    returns it."""
    target = Path(path)
    arrays = {name: np.asarray(array) for name, array in arrays.items()}
    manifest = {
        "format": archive_kind,
        "version": version,
        **settings,
        "sha256": {name: _digest(array) for name, array in arrays.items()},
    }
    text = json.dumps(manifest).encode()
    arrays[MANIFEST] = np.frombuffer(text, dtype=np.uint8)
    arrays[MANIFEST_DIGEST] = np.frombuffer(hashlib.sha256(text).hexdigest().encode(), np.uint8)
    atomic_write(target, lambda out: np.savez(out, **arrays))
    return target


def load_archive(
    path: str | os.PathLike[str], kind: str, version: int, remedy: str
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read an archive of ``kind`` written by :func:`save_archive`: ``(arrays, manifest)``.

    Parameters
    ----------
    path : str or os.PathLike
        The archive file.
    kind : str
        The ``archive_kind`` it must have been saved with (its manifest's ``format``).
    version : int
        The format version this installation reads; another version is refused.
    remedy : str
        What the user should do when the file cannot be used (e.g. "rebuild it with
        ``clusterable index``"); ends every error message.

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
    arrays = _read_members(source, kind, remedy)
    text = arrays.pop(MANIFEST, None)
    digest = arrays.pop(MANIFEST_DIGEST, None)
    if text is None:
        raise ValueError(f"{source} has no {kind} manifest: it is another kind of file; {remedy}")
    if digest is None:
        raise ValueError(
            f"{source} has no checksum of its manifest: it was written by an older clusterable "
            f"(or damaged); {remedy}"
        )
    if hashlib.sha256(text.tobytes()).hexdigest().encode() != digest.tobytes():
        raise ValueError(
            f"{source} is damaged: its manifest does not match the checksum written with it (an "
            f"edited or damaged file); {remedy}"
        )
    try:
        manifest = json.loads(text.tobytes().decode())
    except ValueError as err:  # checksummed, so only a writer's fault can get here
        raise ValueError(f"{source} holds an unreadable manifest ({err}); {remedy}") from err
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


def _read_members(source: Path, kind: str, remedy: str) -> dict[str, np.ndarray]:
    """Every ``.npy`` member of the zip ``source``, each read to its end (so zipfile checks its
    CRC-32), none unpickled."""
    try:
        with zipfile.ZipFile(source) as archive:
            arrays = {}
            for name in archive.namelist():
                with archive.open(name) as member:
                    array = np.lib.format.read_array(member, allow_pickle=False)
                    member.read()  # to the member's end, where zipfile checks its CRC-32
                arrays[name.removesuffix(".npy")] = array
            return arrays
    # A damaged byte makes zipfile and numpy raise a dozen kinds of error (BadZipFile,
    # NotImplementedError for an unknown compression method, RuntimeError for the encryption
    # flag, zlib.error, EOFError, OSError, ValueError, ...), and nothing else runs here.
    except Exception as err:
        raise ValueError(
            f"{source} is not a readable {kind} file ({type(err).__name__}: {err}); it may be "
            f"truncated, damaged or another kind of file: {remedy}"
        ) from err


def _digest(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return hashlib.sha256(buffer.getvalue()).hexdigest()
