"""Choosing what a loss looks at: in-batch triplet mining and batch samplers."""

from clusterable.mining.hard_negatives import PairsWithHardNegativesSampler  # registers it
from clusterable.mining.samplers import (  # the registry and the plain samplers first
    SAMPLERS,
    ClassBalancedBatchSampler,
    DistributedBatchSampler,
    RandomBatchSampler,
    SamplerSettings,
    available_samplers,
    build_sampler,
    check_sampler_args,
    register_sampler,
)
from clusterable.mining.triplets import (
    all_triplets,
    batch_hard_triplets,
    mine_triplets,
    positive_pairs,
    semi_hard_triplets,
)

__all__ = [
    "SAMPLERS",
    "ClassBalancedBatchSampler",
    "DistributedBatchSampler",
    "PairsWithHardNegativesSampler",
    "RandomBatchSampler",
    "SamplerSettings",
    "all_triplets",
    "available_samplers",
    "batch_hard_triplets",
    "build_sampler",
    "check_sampler_args",
    "mine_triplets",
    "positive_pairs",
    "register_sampler",
    "semi_hard_triplets",
]
