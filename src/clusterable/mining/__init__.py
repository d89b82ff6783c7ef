"""Choosing what a loss looks at: in-batch triplet mining (and, later, batch samplers)."""

from clusterable.mining.triplets import (
    all_triplets,
    batch_hard_triplets,
    mine_triplets,
    positive_pairs,
    semi_hard_triplets,
)

__all__ = [
    "all_triplets",
    "batch_hard_triplets",
    "mine_triplets",
    "positive_pairs",
    "semi_hard_triplets",
]
