"""Reading IDX files, the format of MNIST and Fashion-MNIST, gzipped or raw.

An IDX file is a 4-byte magic number (two zero bytes, a data-type code, the number of dimensions),
one big-endian uint32 per dimension, then the values in C order, big-endian. Every way a file can
be wrong raises ValueError naming the file and the problem, so a bad download is diagnosed at once.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

#: Data-type codes of the IDX format (third byte of the magic number); values are big-endian.
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
    raw = path.read_bytes()
    # Judge compression by content, not name: mirrors ship gunzipped files that kept ".gz".
    if not raw.startswith(_GZIP_MAGIC):
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as error:
        raise ValueError(
            f"IDX file {path}: corrupt or truncated gzip data ({error}); download the file again"
        ) from error


def read_idx(path: str | Path) -> np.ndarray:
    """Read one IDX file into an array of its stored shape and type (native byte order).

    Parameters
    ----------
    path : str or Path
        An IDX file, gzip-compressed or not (detected from its first bytes).

    Returns
    -------
    np.ndarray
        E.g. ``(60000, 28, 28)`` uint8 for ``train-images-idx3-ubyte``, ``(60000,)`` for labels.

    Raises
    ------
    ValueError
        Bad magic number, unknown data-type code, truncated file, or bytes left over after the data.
    """
    path = Path(path)
    data = _read_bytes(path)
    if len(data) < 4:
        raise ValueError(
            f"IDX file {path}: truncated, only {len(data)} bytes, not even the 4-byte magic number"
        )
    if data[0] != 0 or data[1] != 0:
        raise ValueError(
            f"IDX file {path}: bad magic number 0x{data[:4].hex()} (an IDX file starts with two "
            "zero bytes); this is not an IDX file, or it is damaged: download it again"
        )
    code, ndim = data[2], data[3]
    if code not in IDX_DTYPES:
        known = ", ".join(f"0x{c:02X}" for c in IDX_DTYPES)
        raise ValueError(
            f"IDX file {path}: unknown data-type code 0x{code:02X} in the magic number "
            f"(known: {known}); the file is damaged: download it again"
        )
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(
            f"IDX file {path}: truncated inside the header ({len(data)} bytes, the {ndim} "
            f"dimension sizes need {header}); download the file again"
        )
    shape = tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_DTYPES[code]
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) < expected:
        raise ValueError(
            f"IDX file {path}: truncated, the header promises shape {shape} of {dtype.name} "
            f"({expected} bytes) but the file has {len(data)}; download the file again"
        )
    if len(data) > expected:
        raise ValueError(
            f"IDX file {path}: {len(data) - expected} unexpected bytes after the data of shape "
            f"{shape}; the file is damaged or not the one its name says: download it again"
        )
    values = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return values.astype(dtype.newbyteorder("="))


def read_idx_images_labels(
    images_path: str | Path, labels_path: str | Path
) -> tuple[np.ndarray, np.ndarray]:
    """Read a matching pair of IDX files: ``(n, h, w)`` uint8 images and ``(n,)`` int64 labels.

    Raises
    ------
    ValueError
        Either file is corrupt (see :func:`read_idx`), has the wrong data type or number of
        dimensions, or the two files disagree on the number of items.
    """
    images = read_idx(images_path)
    labels = read_idx(labels_path)
    if images.dtype != np.uint8 or images.ndim != 3:
        raise ValueError(
            f"IDX file {images_path}: expected (n, height, width) unsigned bytes (code 0x08) for "
            f"images, found {images.dtype.name} of shape {images.shape}; is it a labels file?"
        )
    if labels.dtype.kind not in "iu" or labels.ndim != 1:
        raise ValueError(
            f"IDX file {labels_path}: expected a 1-D integer array of labels, found "
            f"{labels.dtype.name} of shape {labels.shape}; is it an images file?"
        )
    if len(images) != len(labels):
        raise ValueError(
            f"IDX files {images_path} and {labels_path} disagree: {len(images)} images but "
            f"{len(labels)} labels; they come from different splits or one is damaged"
        )
    return images, labels.astype(np.int64)
