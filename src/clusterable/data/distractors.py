"""Unlabelled distractor items, OPML's test of robustness to noise: a source of noisy digit images
and the view that appends any items to a dataset with label -1 (`UNLABELLED`).
"""

from __future__ import annotations

import numpy as np
from PIL import Image
from sklearn.datasets import load_digits

from clusterable.data.dataset import UNLABELLED, LabelledDataset, concatenate


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
    unlabelled = np.full(len(x), UNLABELLED, dtype=np.int64)
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
