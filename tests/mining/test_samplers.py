"""Batch samplers: batch composition, seeding, per-epoch reshuffling, DDP slices, and the lifted
paper's hard negatives checked against a brute-force search."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from clusterable.mining import (
    SAMPLERS,
    ClassBalancedBatchSampler,
    PairsWithHardNegativesSampler,
    RandomBatchSampler,
    SamplerSettings,
    available_samplers,
    build_sampler,
    register_sampler,
)

# 7 classes of uneven sizes (class 6 has 2 items, fewer than m below), and 5 unlabelled items.
LABELS = np.concatenate([np.repeat(np.arange(6), [30, 25, 20, 12, 9, 40]), [6, 6], [-1] * 5])
N = len(LABELS)


def random_sampler(**kwargs: object) -> RandomBatchSampler:
    return RandomBatchSampler(N, batch_size=16, seed=3, **kwargs)


def balanced_sampler(**kwargs: object) -> ClassBalancedBatchSampler:
    return ClassBalancedBatchSampler(
        LABELS, classes_per_batch=4, items_per_class=4, seed=3, **kwargs
    )


def pairs_sampler(**kwargs: object) -> PairsWithHardNegativesSampler:
    kwargs = {"batch_size": 16, "pool_size": 40, **kwargs}
    return PairsWithHardNegativesSampler(LABELS, seed=3, **kwargs)


def pairs_sampler_with_embeddings(**kwargs: object) -> PairsWithHardNegativesSampler:
    sampler = pairs_sampler(**kwargs)
    sampler.update_embeddings(np.random.default_rng(0).normal(size=(N, 3)))
    return sampler


FACTORIES = [random_sampler, balanced_sampler, pairs_sampler, pairs_sampler_with_embeddings]


def flatten(batches: list[list[int]]) -> list[int]:
    return list(itertools.chain.from_iterable(batches))


def epoch(sampler: object, number: int = 0) -> list[list[int]]:
    sampler.set_epoch(number)
    return [list(batch) for batch in sampler]


@pytest.mark.parametrize("factory", FACTORIES)
def test_indices_in_range_and_length(factory) -> None:
    sampler = factory()
    batches = epoch(sampler)
    assert len(batches) == len(sampler) >= 1
    for batch in batches:
        assert all(isinstance(i, int) and 0 <= i < N for i in batch)


@pytest.mark.parametrize("factory", FACTORIES)
def test_seeded_and_reshuffled_per_epoch(factory) -> None:
    assert epoch(factory(), 2) == epoch(factory(), 2)
    assert epoch(factory(), 0) != epoch(factory(), 1)
    sampler = factory()
    assert epoch(sampler, 0) == epoch(sampler, 0)  # iterating again repeats the epoch


@pytest.mark.parametrize("factory", [balanced_sampler, pairs_sampler_with_embeddings])
def test_label_aware_samplers_skip_unlabelled_items(factory) -> None:
    for batch in epoch(factory()):
        assert (LABELS[batch] >= 0).all()


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("replicas", [2, 4])
def test_ddp_slices_are_disjoint_and_make_the_global_batch(factory, replicas: int) -> None:
    single = epoch(factory(num_replicas=1, rank=0), 1)
    ranks = [epoch(factory(num_replicas=replicas, rank=r), 1) for r in range(replicas)]
    assert all(len(batches) == len(single) for batches in ranks)
    for step, batch in enumerate(single):
        slices = [batches[step] for batches in ranks]
        assert len({len(s) for s in slices}) == 1  # all_gather needs equal sizes
        # Rank order concatenation is the single-process batch, so the slices are disjoint
        # positions of it (items repeat only where the single-process batch repeats them);
        # only a random last batch may be padded, by fewer than `replicas` items.
        union = flatten(slices)
        assert union[: len(batch)] == batch
        assert len(union) - len(batch) < replicas


def test_defaults_to_one_replica_without_torch_distributed() -> None:
    sampler = random_sampler()
    assert (sampler.num_replicas, sampler.rank) == (1, 0)


def test_batch_size_must_split_across_replicas() -> None:
    with pytest.raises(ValueError, match="divisible by num_replicas=3"):
        RandomBatchSampler(N, batch_size=16, num_replicas=3, rank=0)
    with pytest.raises(ValueError, match="rank"):
        RandomBatchSampler(N, batch_size=16, num_replicas=2, rank=2)


def test_random_batches_cover_the_items_once() -> None:
    batches = epoch(random_sampler())
    assert [len(b) for b in batches] == [16] * (N // 16) + [N % 16]
    assert sorted(flatten(batches)) == list(range(N))
    assert len(epoch(random_sampler(drop_last=True))) == N // 16


def test_random_batches_from_given_indices() -> None:
    labelled = np.flatnonzero(LABELS >= 0)
    batches = epoch(RandomBatchSampler(labelled, batch_size=16, seed=0))
    assert sorted(flatten(batches)) == labelled.tolist()


def test_random_tail_is_padded_to_split_evenly() -> None:
    # 143 items: the last batch has 15, padded to 16 for 2 ranks with the epoch's first item.
    sampler = RandomBatchSampler(N, batch_size=16, seed=0, num_replicas=2, rank=0)
    batches = list(sampler.global_batches())
    assert len(batches[-1]) == 16 and batches[-1][-1] == batches[0][0]


def test_class_balanced_composition() -> None:
    sampler = balanced_sampler()
    assert len(sampler) == (N - 5) // 16
    for batch in epoch(sampler):
        labels = LABELS[batch]
        counts = Counter(labels.tolist())
        assert len(counts) == 4 and set(counts.values()) == {4}
        # Laid out class by class.
        assert all(len(set(labels[i : i + 4])) == 1 for i in range(0, 16, 4))
        for label in counts:
            items = [i for i in batch if LABELS[i] == label]
            if label == 6:  # 2 items for m = 4: both, then drawn with replacement
                assert set(items) == {N - 7, N - 6}
            else:
                assert len(set(items)) == 4


def test_class_balanced_visits_the_items_of_a_class_evenly() -> None:
    labels = np.repeat(np.arange(2), 8)
    sampler = ClassBalancedBatchSampler(labels, 2, 4, seed=0, batches_per_epoch=4)
    counts = Counter(flatten(epoch(sampler)))
    assert set(counts.values()) == {2}  # 4 batches x 4 items of a class of 8: each item twice


def test_class_balanced_rejects_too_many_classes() -> None:
    with pytest.raises(ValueError, match="only 7 classes"):
        ClassBalancedBatchSampler(LABELS, classes_per_batch=8, items_per_class=2)


def test_works_as_a_dataloader_batch_sampler() -> None:
    dataset = TensorDataset(torch.arange(N), torch.as_tensor(LABELS))
    loader = DataLoader(dataset, batch_sampler=balanced_sampler())
    items, labels = next(iter(loader))
    assert items.shape == (16,) and (labels == torch.as_tensor(LABELS)[items]).all()


def test_pairs_batch_layout() -> None:
    for batch in epoch(pairs_sampler_with_embeddings()):
        groups = np.asarray(batch).reshape(-1, 4)  # [anchor, positive, neg(anchor), neg(pos)]
        labels = LABELS[groups]
        assert len(set(batch)) == len(batch) == 16
        assert (labels[:, 0] == labels[:, 1]).all()
        assert (labels[:, 2] != labels[:, 0]).all() and (labels[:, 3] != labels[:, 1]).all()


def nearest_negatives_brute_force(
    batch: list[int], embeddings: np.ndarray, labels: np.ndarray
) -> list[int]:
    """The documented rule with pool = every labelled item, by loops."""
    groups = np.asarray(batch).reshape(-1, 4)
    members = groups[:, :2].ravel().tolist()  # a1, p1, a2, p2, ...
    taken = set(members)
    expected = []
    for x in members:
        best, best_distance = None, np.inf
        for j in range(len(labels)):
            if labels[j] < 0 or labels[j] == labels[x] or j in taken:
                continue
            distance = np.linalg.norm(embeddings[j] - embeddings[x])
            if distance < best_distance:
                best, best_distance = j, distance
        taken.add(best)
        expected.append(best)
    return expected


@pytest.mark.parametrize("seed", range(3))
def test_hard_negatives_are_the_nearest_negatives(seed: int) -> None:
    rng = np.random.default_rng(seed)
    embeddings = rng.normal(size=(N, 5))
    sampler = PairsWithHardNegativesSampler(LABELS, batch_size=32, seed=seed, pool_size=None)
    sampler.update_embeddings(torch.as_tensor(embeddings))
    for batch in epoch(sampler):
        groups = np.asarray(batch).reshape(-1, 4)
        mined = groups[:, 2:].ravel().tolist()  # neg(a1), neg(p1), neg(a2), ...
        assert mined == nearest_negatives_brute_force(batch, embeddings, LABELS)


def test_hard_negatives_come_from_the_pool_and_beat_random_ones() -> None:
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(N, 4))
    hard = pairs_sampler()
    hard.update_embeddings(embeddings)
    random = pairs_sampler()

    def mean_gap(sampler: PairsWithHardNegativesSampler) -> float:
        gaps = []
        for batch in epoch(sampler):
            groups = np.asarray(batch).reshape(-1, 4)
            for member, negative in [(0, 2), (1, 3)]:
                diff = embeddings[groups[:, member]] - embeddings[groups[:, negative]]
                gaps.extend(np.linalg.norm(diff, axis=1))
        return float(np.mean(gaps))

    assert mean_gap(hard) < 0.6 * mean_gap(random)


def test_embeddings_must_cover_the_dataset() -> None:
    sampler = pairs_sampler()
    with pytest.raises(ValueError, match=f"n={N}"):
        sampler.update_embeddings(np.zeros((N - 1, 3)))
    with pytest.raises(ValueError, match="NaN"):
        sampler.update_embeddings(np.full((N, 3), np.nan))
    assert sampler.requires_embeddings and not random_sampler().requires_embeddings


def test_pairs_sampler_needs_enough_pairs() -> None:
    with pytest.raises(ValueError, match="multiple of 4"):
        PairsWithHardNegativesSampler(LABELS, batch_size=18)
    with pytest.raises(ValueError, match="disjoint positive pairs"):
        PairsWithHardNegativesSampler(np.array([0, 0, 1, 1, 2]), batch_size=16)


def test_registry_builds_each_sampler_by_name() -> None:
    assert set(SAMPLERS) == {"random", "class-balanced", "pairs-hard-negatives"}
    settings = SamplerSettings(batch_size=16, items_per_class=4, seed=3, num_replicas=1, rank=0)
    random = build_sampler("random", LABELS, settings)
    assert isinstance(random, RandomBatchSampler)
    assert (LABELS[np.concatenate(list(random))] >= 0).all()  # unlabelled items left out
    balanced = build_sampler("class-balanced", LABELS, settings)
    assert (balanced.classes_per_batch, balanced.items_per_class) == (4, 4)
    pairs = build_sampler("pairs-hard-negatives", LABELS, settings)
    assert isinstance(pairs, PairsWithHardNegativesSampler) and pairs.batch_size == 16
    with pytest.raises(ValueError, match="choose one of: random, class-balanced"):
        build_sampler("hard", LABELS, settings)


def test_class_balanced_fills_the_batch_when_classes_are_few() -> None:
    """Three classes and batch 24 with m = 4: p = 3 classes of m = 8 items."""
    labels = np.repeat(np.arange(3), 20)
    settings = SamplerSettings(batch_size=24, items_per_class=4, seed=0)
    sampler = build_sampler("class-balanced", labels, settings)
    assert (sampler.classes_per_batch, sampler.items_per_class) == (3, 8)


def test_only_samplers_that_mine_declare_they_need_embeddings() -> None:
    assert [name for name in available_samplers() if SAMPLERS[name].requires_embeddings] == [
        "pairs-hard-negatives"
    ]


def test_a_name_registered_twice_is_refused() -> None:
    with pytest.raises(RuntimeError, match="registered twice"):
        register_sampler("random")(RandomBatchSampler)


SETTINGS = SamplerSettings(batch_size=16, items_per_class=4, seed=3, num_replicas=1, rank=0)


def test_samplers_are_listed_plain_to_mining() -> None:
    assert available_samplers() == ["random", "class-balanced", "pairs-hard-negatives"]


def test_sampler_args_reach_the_sampler() -> None:
    assert build_sampler("pairs-hard-negatives", LABELS, SETTINGS).pool_size == 1024
    pairs = build_sampler("pairs-hard-negatives", LABELS, SETTINGS, pool_size=24)
    assert pairs.pool_size == 24
    assert build_sampler("pairs-hard-negatives", LABELS, SETTINGS, pool_size=None).pool_size is None
    balanced = build_sampler("class-balanced", LABELS, SETTINGS, batches_per_epoch=3)
    assert len(balanced) == 3 and len(list(balanced)) == 3
    random = build_sampler("random", LABELS, SETTINGS, drop_last=True)
    assert all(len(batch) == 16 for batch in random)


@pytest.mark.parametrize(
    ("name", "given", "message"),
    [
        ("random", {"pool_size": 8}, "sampler 'random' takes no argument pool_size; its "
         "arguments are: drop_last$"),
        ("class-balanced", {"pool": 8}, "sampler 'class-balanced' takes no argument pool; its "
         "arguments are: batches_per_epoch$"),
        ("pairs-hard-negatives", {"pool": 8}, "takes no argument pool; its arguments are: "
         "pool_size, batches_per_epoch$"),
        ("pairs-hard-negatives", {"batch_size": 8, "seed": 1}, "sampler 'pairs-hard-negatives' "
         "gets batch_size, seed from the training run"),
        ("class-balanced", {"items_per_class": 2}, "gets items_per_class from the training run"),
    ],
)  # fmt: skip
def test_a_wrong_sampler_argument_is_refused_naming_the_accepted_ones(name, given, message):
    with pytest.raises(ValueError, match=message):
        build_sampler(name, LABELS, SETTINGS, **given)


class EveryOtherItemSampler(RandomBatchSampler):
    """A sampler of a user's own: random batches of every ``step``-th labelled item."""

    from_settings = ("n", "batch_size", "seed", "num_replicas", "rank")

    def __init__(self, n, batch_size, seed=0, *, step: int = 2, num_replicas=None, rank=None):
        indices = np.arange(0, int(n), step)
        super().__init__(indices, batch_size, seed, num_replicas=num_replicas, rank=rank)
        self.step = step

    @classmethod
    def for_training(cls, labels, settings, **sampler_args):
        return cls(len(labels), settings.batch_size, settings.seed, **sampler_args)


def test_a_sampler_registered_by_a_user_is_listed_and_built_with_its_arguments() -> None:
    with SAMPLERS.scratch():
        register_sampler("every-other", mines=False)(EveryOtherItemSampler)
        assert available_samplers()[-1] == "every-other"
        assert SAMPLERS.metadata("every-other") == {"mines": False}
        sampler = build_sampler("every-other", LABELS, SETTINGS, step=3)
        assert sampler.step == 3 and set(np.concatenate(list(sampler)) % 3) == {0}
        with pytest.raises(ValueError, match=r"takes no argument stride; its arguments are: step$"):
            build_sampler("every-other", LABELS, SETTINGS, stride=3)
    assert "every-other" not in available_samplers()
