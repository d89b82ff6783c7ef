"""Evaluation of a set held in shards by the processes of a `torch.distributed` group.

Under ``torchrun`` each rank embeds a shard of the test set. `gather_shards` puts the shards
together on every rank, in rank order; the leave-one-out kNN search, the quadratic part of the
table, is then split: query chunk ``i`` (of the fixed chunking `neighbors.iter_knn` uses) is
searched by rank ``i % world_size``, and `combine_rows` hands every rank every query's scores.
A query's neighbours do not depend on which process searched it (near-ties are re-scored exactly,
see `clusterable.evaluate.neighbors`), so the table is exactly the single-process one. The
partition is computed on every rank from the same gathered array with the same seed, so it is the
same on every rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clusterable.evaluate._inputs import to_numpy


def group_shape(group: Any) -> tuple[int, int]:
    """``(rank, world_size)`` of this process in ``group`` (``True``: the default group)."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise ValueError(
            "process_group was given but torch.distributed is not initialised; call "
            "torch.distributed.init_process_group (torchrun does it for you) or pass "
            "process_group=None to evaluate this process's embeddings alone."
        )
    handle = None if group is True else group
    return dist.get_rank(handle), dist.get_world_size(handle)


def gather_shards(emb: Any, labels: Any, group: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every rank's ``(n_r, d)`` embeddings and ``(n_r,)`` labels, concatenated in rank order.

    Shards may differ in length (the last rank of a sampler often holds fewer items).
    """
    import torch.distributed as dist

    handle = None if group is True else group
    _, world = group_shape(group)
    parts: list[Any] = [None] * world
    dist.all_gather_object(parts, (to_numpy(emb, "emb"), to_numpy(labels, "labels")), handle)
    dims = {np.asarray(p[0]).shape[1:] for p in parts}
    if len(dims) != 1:
        raise ValueError(
            f"the ranks hold embeddings of different shapes {sorted(dims)}; every rank must "
            "embed its shard with the same model."
        )
    return (
        np.concatenate([np.asarray(p[0]) for p in parts]),
        np.concatenate([np.asarray(p[1]).reshape(-1) for p in parts]),
    )


def combine_rows(per_query: dict[str, np.ndarray], owned: np.ndarray, group: Any) -> None:
    """Fill, in place, the rows this rank did not compute with the values of the rank that did.

    ``owned`` is the ``(n,)`` boolean mask of this rank's rows; the masks of all ranks partition
    the rows.
    """
    import torch.distributed as dist

    handle = None if group is True else group
    _, world = group_shape(group)
    mine = {name: values[owned] for name, values in per_query.items()}
    parts: list[Any] = [None] * world
    dist.all_gather_object(parts, (np.flatnonzero(owned), mine), handle)
    for rows, values in parts:
        for name, part in values.items():
            per_query[name][rows] = part
