"""The one check of embeddings and of labels, for every part of the package that takes them.

Evaluation (`clusterable.evaluate`), clustering (`clusterable.cluster`) and the search index
(`clusterable.index`) read their embeddings through :func:`as_embeddings` and their labels through
:func:`label_values` / :func:`as_labels`, once, at their edge: each accepts, converts and refuses
the same inputs with the same message. Only numpy is imported here, so any package may use it.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

#: The torch float types numpy can hold as they are; others (bfloat16, float8) go through float32.
_NUMPY_FLOATS = ("torch.float16", "torch.float32", "torch.float64")


def to_numpy(x: Any, name: str) -> np.ndarray:
    """A numpy view or copy of ``x``: a numpy array, a torch tensor (on any device, any float type:
    bfloat16 and float8, which numpy lacks, become float32, which holds them exactly), or a
    nested sequence."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor, without importing torch here
        x = x.detach().cpu()
        if x.is_floating_point() and str(x.dtype) not in _NUMPY_FLOATS:
            x = x.float()
        x = x.numpy()
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{name} could not be read as an array ({err}); pass a numpy array or a torch tensor."
        ) from err


def embedding_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype :func:`as_embeddings` gives embeddings of real ``dtype`` (see its rule)."""
    if dtype in (np.float32, np.float64):
        return np.dtype(dtype)
    promoted = np.promote_types(dtype, np.float32)
    return promoted if promoted in (np.float32, np.float64) else np.dtype(np.float64)


def as_embeddings(x: Any, name: str = "emb") -> np.ndarray:
    """Embeddings as a C-contiguous ``(n, d)`` float array with finite values.

    The rule, the same for evaluation, clustering and the search index:

    - **shape**: ``(n, d)`` with ``n, d >= 1``. A 1-D array is refused rather than guessed at:
      reshape it to ``(1, d)`` (one item) or ``(n, 1)`` (one feature).
    - **dtype**: float32 and float64 are kept as they are (no copy of a contiguous array; float64
      is never rounded to float32, so near-duplicate items keep their distinct distances). Every
      other real type is converted to the type numpy promotes it to with float32, which holds its
      values exactly: float16, bfloat16 (torch), int8/uint8 and int16/uint16 become float32;
      int32/uint32 and int64/uint64 become float64 (exact below 2^53); long double becomes
      float64. Booleans, complex numbers, strings and objects are refused.
    - **values**: rows holding NaN or inf are refused; the message counts them and names the
      first.

    Torch tensors are accepted on any device and are detached and copied to the host.

    Raises
    ------
    ValueError
        If ``x`` is not 2-D, is empty, is not real numbers, or has rows with NaN or inf.
    """
    arr = to_numpy(x, name)
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array (n items, d dimensions), got shape {arr.shape}; reshape "
            "it to (1, d) for one item or (n, 1) for one feature."
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(
            f"{name} is empty (shape {arr.shape}); pass at least one item and one dimension."
        )
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}.")
    arr = np.ascontiguousarray(arr, dtype=embedding_dtype(arr.dtype))
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)
        raise ValueError(
            f"{name} has {rows.size} row(s) with NaN or infinite values (first: row {rows[0]}); "
            "drop or fix those items."
        )
    return arr


def label_values(y: Any, n: int, name: str = "labels", what: str = "label") -> np.ndarray:
    """Labels (or ids) in one canonical form: ``(n,)`` int64, or ``(n,)`` unicode strings.

    Integers and booleans become int64, and so do floats that are whole numbers (``3.0`` is class
    3, the same class as ``3``); strings stay strings; an object array of one kind becomes that
    kind. Numbers and strings together are an error rather than a guess, since ``1`` and ``"1"``
    could be one class or two: convert every label to one type first.

    Parameters
    ----------
    y : array-like
        ``(n,)`` labels, numpy, torch or a sequence; ``(n, 1)`` is accepted too.
    n : int
        The number of items the labels must describe.
    name : str
        Argument name used in error messages.
    what : str
        What one entry is, in messages (``"label"``, ``"id"``).

    Raises
    ------
    ValueError
        If the labels have the wrong shape or length, are missing (NaN, inf, None), are
        non-integer floats, mix numbers and strings, or are of another type.
    """
    # A sequence is read item by item: numpy reads [1, "1"] as the strings "1" and "1", one class.
    arr = np.asarray(y, dtype=object) if isinstance(y, (list, tuple)) else to_numpy(y, name)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    nested = (
        arr.ndim == 1
        and arr.dtype == object
        and any(isinstance(v, (list, tuple, np.ndarray)) for v in arr)
    )
    if arr.ndim != 1 or nested:
        shape = "rows of several lengths" if nested else f"shape {arr.shape}"
        raise ValueError(f"{name} must be 1-D (one {what} per item), got {shape}.")
    if arr.shape[0] != n:
        raise ValueError(
            f"{name} has {arr.shape[0]} entries but there are {n} items; pass one {what} per "
            "embedding row."
        )
    if arr.dtype == object:
        arr = _typed(arr, name, what)
    if arr.dtype.kind in "biu":
        return arr.astype(np.int64)
    if arr.dtype.kind in "US":
        return arr.astype(str)
    if arr.dtype.kind == "f":
        missing = np.flatnonzero(~np.isfinite(arr))
        if missing.size:
            raise ValueError(_missing(name, what, missing))
        if not (arr == np.round(arr)).all():
            raise ValueError(f"{name} holds non-integer floats; pass integer {what}s or strings.")
        return arr.astype(np.int64)
    raise ValueError(f"{name} must hold integers or strings, got dtype {arr.dtype}.")


def label_kind(values: np.ndarray) -> str:
    """``"strings"`` or ``"numbers"``: the kind of labels (or ids) from :func:`label_values`.

    Two sets of labels compared or joined must be of one kind: numpy would turn numbers joined
    with strings into strings (label 1 and label ``"1"`` then one class, 1 and ``"a"`` never).
    """
    return "strings" if values.dtype.kind == "U" else "numbers"


def as_labels(y: Any, n: int, name: str = "labels") -> tuple[np.ndarray, np.ndarray]:
    """Labels as compact codes ``0 .. C-1``, after :func:`label_values`.

    Returns
    -------
    codes : numpy.ndarray
        ``(n,)`` int64, ``codes[i]`` is the rank of ``y[i]`` among the distinct labels.
    classes : numpy.ndarray
        ``(C,)`` the distinct labels, sorted, int64 or unicode; ``classes[codes]`` equals
        ``label_values(y, n)``.

    Raises
    ------
    ValueError
        As :func:`label_values`.
    """
    classes, codes = np.unique(label_values(y, n, name), return_inverse=True)
    return codes.reshape(-1).astype(np.int64), classes


def _typed(arr: np.ndarray, name: str, what: str) -> np.ndarray:
    """An object array of labels as an int64, float or unicode array."""
    values = arr.tolist()
    missing = np.flatnonzero(
        [v is None or (isinstance(v, numbers.Real) and not np.isfinite(float(v))) for v in values]
    )
    if missing.size:
        raise ValueError(_missing(name, what, missing))
    if all(isinstance(v, str) for v in values):
        return np.array(values, dtype=str)
    if all(isinstance(v, numbers.Integral) for v in values):
        return np.array([int(v) for v in values], dtype=np.int64)
    if all(isinstance(v, numbers.Real) for v in values):
        return np.array(values, dtype=np.float64)
    first_row_of_type: dict[type, int] = {}
    for row, value in enumerate(values):
        first_row_of_type.setdefault(type(value), row)
    examples = ", ".join(
        f"{type(values[row]).__name__} {values[row]!r} (row {row})"
        for row in sorted(first_row_of_type.values())
    )
    raise ValueError(
        f"{name} mixes {what} types that cannot be sorted together: {examples}; give every item "
        f"{_a(what)} of one type, e.g. labels.astype(str) or integer class ids."
    )


def _missing(name: str, what: str, rows: np.ndarray) -> str:
    return (
        f"{name} has {rows.size} missing {what}(s) (None, NaN or inf; first: row {rows[0]}); "
        f"every item needs {_a(what)}: drop those items or give them one."
    )


def _a(what: str) -> str:
    return f"{'an' if what[0] in 'aeiou' else 'a'} {what}"
