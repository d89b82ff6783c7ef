"""Label views of the papers' protocols: each takes a dataset and returns a new one.

- :func:`coarse_labels`: train on merged classes, keep the originals as ``fine_labels`` (MsDNN).
- :func:`class_split`: keep some classes only (zero-shot splits of lifted structure and DSCL).
- :func:`first_per_class`: the first n items of each class in file order (OPML).
- :func:`with_distractors` and :func:`noisy_digit_distractors`: unlabelled noise items (OPML).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from PIL import Image
from sklearn.datasets import load_digits

from clusterable.data.dataset import LabelledDataset, concatenate

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
    present = [int(c) for c in np.unique(ds.labels) if c >= 0]
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
    lookup = np.full(max(present, default=-1) + 2, -1, dtype=np.int64)  # last slot: label -1
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
    """Items ``start .. start + n - 1`` of each label, counted in file order (OPML protocol).

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


def with_distractors(
    ds: LabelledDataset, distractor_x: np.ndarray | LabelledDataset
) -> LabelledDataset:
    """Append unlabelled items (label and fine label -1) that evaluation can include or drop.

    Parameters
    ----------
    ds : LabelledDataset
        The labelled items, kept first.
    distractor_x : np.ndarray or LabelledDataset
        ``(m, *ds.input_shape)`` items, e.g. :func:`noisy_digit_distractors`, or a dataset whose
        items are used and whose labels are dropped.

    Examples
    --------
    >>> ds = LabelledDataset("toy", np.zeros((2, 1, 28, 28), np.float32), [0, 1])
    >>> with_distractors(ds, noisy_digit_distractors(n_per_class=3)).labels.shape
    (32,)
    """
    x = distractor_x.x if isinstance(distractor_x, LabelledDataset) else distractor_x
    if isinstance(x, np.ndarray) and x.shape[1:] != ds.input_shape:
        raise ValueError(
            f"distractors have items of shape {x.shape[1:]} but {ds.name!r} has "
            f"{ds.input_shape}; make them the same shape (noisy_digit_distractors has a size= "
            "argument)"
        )
    unlabelled = np.full(len(x), -1, dtype=np.int64)
    noise = LabelledDataset("distractors", x, unlabelled, class_names=[])
    return concatenate(ds, noise)


def noisy_digit_distractors(
    n_per_class: int = 150, size: int = 28, noise: float = 0.25, seed: int = 0
) -> np.ndarray:
    """Noisy digit images, the distractors of OPML's Fashion-MNIST experiment.

    The paper adds "the first 150 digit images from each class of MNIST" with random noise on every
    pixel. MNIST cannot be fetched here, so this stands in with scikit-learn's bundled 8x8 digits
    (the first ``n_per_class`` of each class in file order; up to 174 exist for every class)
    upscaled bilinearly to ``size x size``, plus Gaussian pixel noise of standard deviation
    ``noise`` (the paper does not say its noise), clipped to [0, 1].

    Returns
    -------
    np.ndarray
        ``(10 * n_per_class, 1, size, size)`` float32 in [0, 1], in the digits file's order.
    """
    digits = load_digits()
    counts = np.bincount(digits.target)
    if n_per_class > counts.min():
        raise ValueError(
            f"n_per_class={n_per_class} but scikit-learn's digits have only {counts.min()} images "
            f"of their rarest class; ask for at most {counts.min()}"
        )
    keep = np.zeros(len(digits.target), dtype=bool)
    for label in range(10):
        keep[np.flatnonzero(digits.target == label)[:n_per_class]] = True
    small = digits.images[keep].astype(np.float32) / 16.0  # pixel values of load_digits are 0..16
    large = np.stack(
        [
            np.asarray(Image.fromarray(img).resize((size, size), Image.Resampling.BILINEAR))
            for img in small
        ]
    )
    rng = np.random.default_rng(seed)
    noisy = large + noise * rng.standard_normal(large.shape, dtype=np.float32)
    return np.clip(noisy, 0.0, 1.0)[:, None].astype(np.float32)
