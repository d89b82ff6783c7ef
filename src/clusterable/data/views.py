"""Label views of the papers' protocols: each takes a dataset and returns a new one.

- :func:`coarse_labels`: train on merged classes, keep the originals as ``fine_labels`` (MsDNN).
- :func:`class_split`: keep some classes only (zero-shot splits of lifted structure and DSCL).
- :func:`first_per_class`: the first n items of each class in file order (OPML).

Unlabelled distractor items (OPML) are added by `clusterable.data.distractors`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from clusterable.data.dataset import UNLABELLED, LabelledDataset, labelled_classes

#: MsDNN's coarse labels for 10-class sets (MNIST, USPS, Fashion-MNIST): 0-4 -> 0, 5-9 -> 1.
MSDNN_COARSE: dict[int, int] = {c: c // 5 for c in range(10)}


def coarse_labels(
    ds: LabelledDataset, mapping: dict[int, int] | Callable[[int], int]
) -> LabelledDataset:
    """Merge classes: ``labels`` become ``mapping(label)``; ``fine_labels`` are kept.

    Distractors (-1) stay -1. Each coarse class is named after the classes merged into it.

    Parameters
    ----------
    ds : LabelledDataset
        The dataset whose current ``labels`` are mapped.
    mapping : dict or callable
        Coarse label of each label; a dict must cover every label present.

    Examples
    --------
    >>> ds = LabelledDataset("toy", np.zeros((4, 1), np.float32), [0, 4, 5, 9])
    >>> coarse_labels(ds, MSDNN_COARSE).labels.tolist()
    [0, 0, 1, 1]
    """
    present = [int(c) for c in labelled_classes(ds.labels)]
    if isinstance(mapping, dict):
        missing = [c for c in present if c not in mapping]
        if missing:
            raise ValueError(
                f"the coarse mapping has no entry for label(s) {missing} of {ds.name!r}; "
                "give a coarse label for every class present"
            )
        table = {c: int(mapping[c]) for c in present}
    else:
        table = {c: int(mapping(c)) for c in present}
    if any(coarse < 0 for coarse in table.values()):
        raise ValueError("coarse labels must be >= 0; -1 is reserved for distractors")
    # The last slot is read by label -1 (UNLABELLED) and keeps it.
    lookup = np.full(max(present, default=-1) + 2, UNLABELLED, dtype=np.int64)
    for fine, coarse in table.items():
        lookup[fine] = coarse
    members: dict[int, list[str]] = {}
    for fine, coarse in sorted(table.items()):
        name = ds.class_names[fine] if fine < len(ds.class_names) else str(fine)
        members.setdefault(coarse, []).append(name)
    names = [
        " | ".join(members.get(c, [str(c)])) for c in range(max(table.values(), default=-1) + 1)
    ]
    return ds.replace(labels=lookup[ds.labels], class_names=names)


def class_split(
    ds: LabelledDataset, classes: Iterable[int], *, relabel: bool = False
) -> LabelledDataset:
    """Keep only the items whose label is one of ``classes`` (a zero-shot split), in file order.

    Parameters
    ----------
    ds : LabelledDataset
        The dataset to filter on its ``labels``.
    classes : iterable of int
        Labels to keep.
    relabel : bool
        If true, labels become ``0..k-1`` in the order of ``classes`` (what a classification head
        needs); by default they keep their numbers, so two splits never share a label.

    Examples
    --------
    >>> ds = LabelledDataset("toy", np.zeros((4, 1), np.float32), [0, 1, 2, 3])
    >>> class_split(ds, [2, 3], relabel=True).labels.tolist()
    [0, 1]
    """
    classes = [int(c) for c in classes]
    kept = ds.subset(np.isin(ds.labels, classes))
    if not relabel:
        return kept
    order = {c: i for i, c in enumerate(classes)}
    names = [ds.class_names[c] if c < len(ds.class_names) else str(c) for c in classes]
    return kept.replace(
        labels=np.array([order[int(c)] for c in kept.labels], dtype=np.int64), class_names=names
    )


def first_per_class(ds: LabelledDataset, n: int, start: int = 0) -> LabelledDataset:
    """Items ``start`` to ``start + n - 1`` of each label, counted in file order (OPML protocol).

    OPML trains on the first 200 of each Fashion-MNIST class and validates on the next 200
    (``start=200``). Distractors (-1) count as one more group. A class with fewer items gives
    what it has. The result keeps file order.

    Examples
    --------
    >>> ds = LabelledDataset("toy", np.zeros((5, 1), np.float32), [0, 1, 0, 0, 1])
    >>> first_per_class(ds, 2).labels.tolist()
    [0, 1, 0, 1]
    """
    if n < 0 or start < 0:
        raise ValueError(f"n and start must be >= 0, got n={n}, start={start}")
    # Rank of each item within its label: a stable sort keeps file order inside each label.
    order = np.argsort(ds.labels, kind="stable")
    sorted_labels = ds.labels[order]
    group_start = np.searchsorted(sorted_labels, sorted_labels, side="left")
    rank = np.empty(len(ds), dtype=np.int64)
    rank[order] = np.arange(len(ds)) - group_start
    return ds.subset((rank >= start) & (rank < start + n))
