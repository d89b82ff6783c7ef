"""Atomic file writes: a temporary file beside the target, flushed to disk, renamed over it.

An interrupted write (Ctrl-C, a full disk) leaves the previous file, or none, never half of one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def atomic_write(target: Path, write: Callable[[BinaryIO], None]) -> Path:
    """Create ``target`` (and its folder) with the bytes ``write`` puts into a binary file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes it private; the target is not
        with os.fdopen(handle, "wb") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
