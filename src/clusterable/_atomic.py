"""Atomic file writes: a temporary file beside the target, flushed to disk, renamed over it.

An interrupted or failed write (Ctrl-C, a full disk, a writer that raises) leaves the previous
file, or none, never half of one, and no temporary file behind. Every file the package saves for
later goes through :func:`replacing`: archives (index, partition), checkpoints, exports, reports
and the run folder's records.

Example
-------
>>> import pathlib, tempfile
>>> target = pathlib.Path(tempfile.mkdtemp()) / "note.txt"
>>> _ = atomic_write_text(target, "kept")
>>> try:
...     with replacing(target) as temporary:
...         _ = temporary.write_text("half")
...         raise RuntimeError("the writer failed")
... except RuntimeError:
...     pass
>>> target.read_text(), [p.name for p in target.parent.iterdir()]
('kept', ['note.txt'])
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


@contextmanager
def replacing(target: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``target`` for a writer to fill (its folder is created).

    When the block ends normally, the file at that path is flushed to disk and renamed over
    ``target``, and the rename is flushed too; when it raises (any exception, Ctrl-C included), the
    temporary file is removed and ``target`` is left as it was. A writer that takes a path (torch,
    safetensors, ONNX) writes there; :func:`atomic_write` gives one a binary stream instead.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes it private; the target is not
        _flush_to_disk(temporary)
        os.replace(temporary, target)
        _flush_to_disk(target.parent)
    finally:
        temporary.unlink(missing_ok=True)


def atomic_write(target: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> Path:
    """Create ``target`` (and its folder) with the bytes ``write`` puts into a binary file."""
    with replacing(target) as temporary, open(temporary, "wb") as out:
        write(out)
    return Path(target)


def atomic_write_text(target: str | os.PathLike[str], text: str) -> Path:
    """Create ``target`` (and its folder) holding ``text``, UTF-8."""
    return atomic_write(target, lambda out: out.write(text.encode("utf-8")))


def _flush_to_disk(path: Path) -> None:
    """fsync a file, or a folder (its entries: a rename); file systems and platforms that cannot
    sync a folder (Windows) are left as they are."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        if path.is_dir():
            return
        raise
    try:
        os.fsync(descriptor)
    except OSError:
        if not path.is_dir():
            raise
    finally:
        os.close(descriptor)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
