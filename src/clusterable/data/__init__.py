"""Datasets: bundled, on-disk and synthetic."""

from clusterable.data.synthetic import (
    SyntheticSet,
    crescents_and_gaussians,
    two_class_subclusters,
)

__all__ = ["SyntheticSet", "crescents_and_gaussians", "two_class_subclusters"]
