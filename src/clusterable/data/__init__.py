"""Datasets: bundled, on-disk and synthetic, and the label views of the papers' protocols.

Every loader returns a :class:`LabelledDataset`; :func:`load_dataset` finds one by name.
"""

from clusterable.data import generic, retrieval_sets, small_images  # noqa: F401  (registration)
from clusterable.data.dataset import (
    DEFAULT_IMAGE_SIZE,
    UNLABELLED,
    ImageFiles,
    LabelledDataset,
    concatenate,
    labelled_classes,
    labelled_mask,
)
from clusterable.data.distractors import noisy_digit_distractors, with_distractors
from clusterable.data.idx import read_idx, read_idx_images_labels
from clusterable.data.registry import available_datasets, load_dataset
from clusterable.data.splits import stratified_split
from clusterable.data.synthetic import (
    SyntheticSet,
    crescents_and_gaussians,
    two_class_subclusters,
)
from clusterable.data.views import MSDNN_COARSE, class_split, coarse_labels, first_per_class

__all__ = [
    "DEFAULT_IMAGE_SIZE",
    "MSDNN_COARSE",
    "UNLABELLED",
    "ImageFiles",
    "LabelledDataset",
    "SyntheticSet",
    "available_datasets",
    "class_split",
    "coarse_labels",
    "concatenate",
    "crescents_and_gaussians",
    "first_per_class",
    "labelled_classes",
    "labelled_mask",
    "load_dataset",
    "noisy_digit_distractors",
    "read_idx",
    "read_idx_images_labels",
    "stratified_split",
    "two_class_subclusters",
    "with_distractors",
]
