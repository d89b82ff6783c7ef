"""Two gloo processes, each holding a shard, get exactly the single-process table."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from clusterable.evaluate import evaluate_embeddings
from clusterable.evaluate.neighbors import shard_rows
from clusterable.train import end_distributed

#: More than two query chunks of the faiss search, so that both ranks search, one of them twice.
N = 9_000
#: Rank 0 holds fewer items than rank 1: shards need not be equal.
SPLIT = 4_000


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 150, N)
    centres = rng.standard_normal((150, 16)).astype(np.float32)
    emb = centres[labels] + 0.8 * rng.standard_normal((N, 16)).astype(np.float32)
    return emb, labels


#: Query flags of the whole set, for the query/gallery table every rank computes whole.
QUERIES = np.arange(N) % 3 == 0


def table(**kwargs) -> dict:
    emb, labels = data()
    part = slice(None)
    if kwargs.get("process_group"):
        part = slice(0, SPLIT) if dist.get_rank() == 0 else slice(SPLIT, None)
    return evaluate_embeddings(emb[part], labels[part], ks=(1, 10), per_class=True, **kwargs)


def _worker(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        with open(f"{out}.{rank}", "wb") as f:
            pickle.dump([table(process_group=True), table(process_group=True, queries=QUERIES)], f)
    finally:
        end_distributed()  # both ranks done before the group goes: no abort at exit


def test_two_shards_give_exactly_the_single_process_table(tmp_path, free_port):
    # Leave-one-out, and queries ranking a gallery (the flags are the whole set's).
    expected = [table(), table(queries=QUERIES)]
    assert expected[0]["map@r"] != expected[1]["map@r"]
    out = str(tmp_path / "table")
    mp.spawn(_worker, args=(2, free_port(), out), nprocs=2, join=True)
    for rank in range(2):
        with open(f"{out}.{rank}", "rb") as f:
            tables = pickle.load(f)
        for got, want in zip(tables, expected, strict=True):
            per_class, want_per_class = got.pop("per_class"), dict(want)["per_class"]
            assert got == {k: v for k, v in want.items() if k != "per_class"}
            for name, values in want_per_class.items():
                np.testing.assert_array_equal(per_class[name], values)


def test_the_shards_split_the_queries():
    # Every query is searched by exactly one rank, and each rank searches some.
    # Chunks named: the default's on a GPU (2^28 distances) hold all 9,000 queries in one.
    masks = [shard_rows(N, N, (rank, 2), chunk_size=N // 4) for rank in range(2)]
    assert all(mask.any() for mask in masks)
    np.testing.assert_array_equal(masks[0] ^ masks[1], np.ones(N, dtype=bool))


def test_a_process_group_without_torch_distributed_is_a_clear_error():
    emb, labels = data()
    with pytest.raises(ValueError, match="not initialised"):
        evaluate_embeddings(emb[:100], labels[:100], ks=(1,), process_group=True)
