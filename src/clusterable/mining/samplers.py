"""Batch samplers: which dataset items form each training batch.

Each sampler yields lists of dataset indices and is used as ``DataLoader(dataset,
batch_sampler=sampler)``. All are seeded: the batches of an epoch are a function of
``(seed, epoch)`` only, and :meth:`DistributedBatchSampler.set_epoch` reshuffles, as with
``DistributedSampler``.

Distributed training: every rank builds the same *global* batch and keeps a contiguous
``1 / num_replicas`` slice of it, rank 0 first, so concatenating the ranks' slices in rank order
(``all_gather``) gives exactly the batch a single process would draw. ``batch_size`` is always
the global batch size.

Labels below 0 (``-1``: unlabelled distractors) are never sampled by the label-aware samplers.

Training builds its sampler by name: :func:`register_sampler` adds a class to :data:`SAMPLERS`
(:func:`available_samplers` lists them), and :func:`build_sampler` calls its
:meth:`~DistributedBatchSampler.for_training` with the sampler's own arguments
(``TrainConfig.sampler_args``: ``pool_size``, ``batches_per_epoch``, ...), checked against its
constructor. A new sampler is one class with that decorator (here, or in a module of its own:
:mod:`clusterable.mining.hard_negatives`), plus its test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, SupportsInt, TypedDict, TypeVar, cast

import numpy as np
import torch.distributed as dist
from torch import Tensor
from torch.utils.data import Sampler

from clusterable._register import Registry, check_keywords
from clusterable.data import labelled_classes, labelled_mask

ArrayLike = np.ndarray | Tensor | Sequence[int]
SamplerClass = TypeVar("SamplerClass", bound=type["DistributedBatchSampler"])

#: Name -> sampler class, in registration order (plain to mining): ``TrainConfig.sampler`` and
#: the CLI's choices.
SAMPLERS: Registry[type[DistributedBatchSampler]] = Registry("sampler", sort=False)


def register_sampler(name: str, **metadata: Any) -> Callable[[SamplerClass], SamplerClass]:
    """Class decorator: make a sampler available to training as ``TrainConfig(sampler=name)``;
    ``metadata`` travels with it (``SAMPLERS.metadata(name)``)."""
    register = SAMPLERS.register(name, **metadata)

    def add(cls: SamplerClass) -> SamplerClass:
        register(cls)
        return cls

    return add


def available_samplers() -> list[str]:
    """Names :func:`build_sampler` and ``TrainConfig.sampler`` accept, in registration order."""
    return SAMPLERS.names()


@dataclass(frozen=True)
class SamplerSettings:
    """What a training run tells its sampler (from :class:`~clusterable.train.TrainConfig` and
    the process group)."""

    batch_size: int  # the global batch size
    items_per_class: int  # for samplers that draw classes: items of each class in a batch
    seed: int
    num_replicas: int | None = None  # processes; None: from torch.distributed, else 1
    rank: int | None = None  # this process; None: from torch.distributed, else 0


def check_sampler_args(name: str, sampler_args: Mapping[str, Any]) -> None:
    """Refuse what the sampler ``name`` does not take, naming what it does: its constructor's
    keywords but those a training run fills in itself (labels, batch size, seed, processes)."""
    cls = SAMPLERS[name]
    what = f"sampler {SAMPLERS.canonical(name)!r}"
    settings = {f.name for f in fields(SamplerSettings)}
    from_run = sorted(set(sampler_args) & (settings | set(cls.from_settings)))
    if from_run:
        raise ValueError(
            f"{what} gets {', '.join(from_run)} from the training run (its data and the "
            "settings batch_size, items_per_class, seed), not from sampler_args"
        )
    check_keywords(what, cls, sampler_args, skip=cls.from_settings)


def build_sampler(
    name: str, labels: ArrayLike, settings: SamplerSettings, **sampler_args: Any
) -> DistributedBatchSampler:
    """The registered sampler ``name`` for training on ``labels`` ``(n,)`` (-1: never sampled).

    ``sampler_args`` are the sampler's own keywords (``pool_size=512`` for
    ``pairs-hard-negatives``); one it does not take is refused with the list of those it does.

    Examples
    --------
    >>> settings = SamplerSettings(batch_size=8, items_per_class=2, seed=0)
    >>> sampler = build_sampler("pairs-hard-negatives", [0, 0, 1, 1] * 4, settings, pool_size=6)
    >>> sampler.pool_size, len(next(iter(sampler)))
    (6, 8)
    """
    check_sampler_args(name, sampler_args)
    return SAMPLERS[name].for_training(label_array(labels), settings, **sampler_args)


def pairs_shortfall_of_labels(labels: ArrayLike) -> str | None:
    """Why no batch drawn from ``labels`` ``(n,)`` (-1: never sampled) can hold a positive pair
    and a negative, whatever the sampler: fewer than two classes, or no class of two items; None
    where the labels allow both."""
    counts = np.bincount(label_array(labels)[labelled_mask(label_array(labels))])
    counts = counts[counts > 0]
    if len(counts) < 2:
        return (
            f"the training items hold {len(counts)} class(es), so no batch has a negative (an "
            "item of another class); give data of two classes or more"
        )
    if counts.max() < 2:
        return (
            f"each of the {len(counts)} training classes holds one item, so no batch has a "
            "positive pair (two items of a class); give two items per class or more (with a "
            "validation split: more items per class, or a smaller val_fraction)"
        )
    return None


class Replicas(TypedDict):
    """A sampler's share of a distributed run, as keywords."""

    num_replicas: int | None
    rank: int | None


def replicas_of(settings: SamplerSettings) -> Replicas:
    """The sampler's share of a distributed run: ``num_replicas`` and ``rank`` keywords."""
    return {"num_replicas": settings.num_replicas, "rank": settings.rank}


def _as_int_array(values: ArrayLike, what: str) -> np.ndarray:
    if isinstance(values, Tensor):
        values = values.detach().cpu().numpy()
    values = np.asarray(values)
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"{what} must be a 1-D integer array, got {values.shape} {values.dtype}")
    return values.astype(np.int64)


def label_array(labels: ArrayLike) -> np.ndarray:
    """``labels`` as a validated ``(n,)`` int64 array."""
    return _as_int_array(labels, "labels")


def _as_indices(indices: ArrayLike) -> np.ndarray:
    indices = _as_int_array(indices, "indices")
    if (indices < 0).any():
        raise ValueError("dataset indices must be non-negative")
    return indices


def class_members(labels: np.ndarray) -> dict[int, np.ndarray]:
    """Indices of each class (unlabelled items left out), classes in increasing order."""
    return {int(c): np.flatnonzero(labels == c) for c in labelled_classes(labels)}


def batches_per_epoch_of(requested: int | None, n_labelled: int, batch_size: int) -> int:
    """``requested``, or about one pass over the labelled items."""
    if requested is None:
        return max(1, n_labelled // batch_size)
    if requested < 1:
        raise ValueError(f"batches_per_epoch must be positive, got {requested}")
    return requested


class DistributedBatchSampler(Sampler[list[int]]):
    """Base of the samplers: seeding per epoch and the slicing of global batches across ranks.

    Subclasses implement :meth:`global_batches` and ``__len__``.

    Parameters
    ----------
    seed : int
        Non-negative seed; every rank must use the same one.
    num_replicas : int, optional
        Number of processes; default the world size if ``torch.distributed`` is initialised,
        else 1.
    rank : int, optional
        This process's rank; default from ``torch.distributed``, else 0.
    """

    #: Whether the trainer gives :meth:`update_embeddings` the embeddings of the whole training
    #: set before each epoch (hard-negative mining); samplers that leave it False never get them.
    requires_embeddings: bool = False

    #: The global batch size the sampler draws (every process's slices together), which its
    #: constructor sets.
    batch_size: int

    #: Constructor arguments :meth:`for_training` fills in from the labels and the
    #: :class:`SamplerSettings`; the constructor's other keywords are the sampler's own
    #: arguments (``TrainConfig.sampler_args``).
    from_settings: ClassVar[tuple[str, ...]] = (
        "labels",
        "batch_size",
        "seed",
        "num_replicas",
        "rank",
    )

    @classmethod
    def for_training(
        cls, labels: np.ndarray, settings: SamplerSettings, **sampler_args: Any
    ) -> DistributedBatchSampler:
        """The sampler a training run uses on ``labels`` ``(n,)`` (-1: unlabelled, never
        sampled) with ``settings``; ``sampler_args`` go to the constructor."""
        raise NotImplementedError

    def pair_shortfall(self) -> tuple[str, str, str] | None:
        """Why none of this sampler's batches can hold both a positive pair (two items of a
        class) and a negative (an item of another class), as ``(setting, why, remedy)``: the
        training setting that makes it so (``"batch_size"``, ``"items_per_class"``), the rest of
        the sentence, and what to give instead. None where batches can, the labels permitting
        (two classes, one of them with two items: :func:`pairs_shortfall_of_labels`)."""
        return None

    def update_embeddings(self, embeddings: np.ndarray | Tensor) -> None:
        """Take the ``(n, d)`` embeddings of every dataset item, row ``i`` for index ``i``
        (called before each epoch when :attr:`requires_embeddings` is set)."""
        raise NotImplementedError(
            f"{type(self).__name__} declares requires_embeddings but implements no "
            "update_embeddings"
        )

    def __init__(self, seed: int, num_replicas: int | None, rank: int | None) -> None:
        distributed = dist.is_available() and dist.is_initialized()
        if num_replicas is None:
            num_replicas = dist.get_world_size() if distributed else 1
        if rank is None:
            rank = dist.get_rank() if distributed else 0
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(
                f"need 0 <= rank < num_replicas, got rank={rank}, num_replicas={num_replicas}"
            )
        if seed < 0:
            raise ValueError(f"seed must be non-negative, got {seed}")
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0

    def _check_divisible(self, batch_size: int) -> None:
        # all_gather needs equal slices on every rank.
        if batch_size % self.num_replicas:
            raise ValueError(
                f"the global batch size {batch_size} must be divisible by num_replicas="
                f"{self.num_replicas}, so that every rank gets an equal slice"
            )

    def set_epoch(self, epoch: int) -> None:
        """Draw the batches of ``epoch`` (call before each epoch, on every rank)."""
        self.epoch = epoch

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.epoch])

    def global_batches(self) -> Iterator[list[int]]:
        """The epoch's batches as one process would see them (all ranks' items)."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.global_batches():
            size = len(batch) // self.num_replicas
            yield batch[self.rank * size : (self.rank + 1) * size]

    def __len__(self) -> int:
        raise NotImplementedError


@register_sampler("random")
class RandomBatchSampler(DistributedBatchSampler):
    """Plain random batches: a fresh permutation of the items each epoch, cut into batches.

    Parameters
    ----------
    n : int or array-like of int
        Dataset size (items ``range(n)``), or the dataset indices to draw from (for example
        ``np.flatnonzero(labels >= 0)`` to leave out unlabelled items).
    batch_size : int
        Global batch size, divisible by ``num_replicas``.
    seed : int
        Seed.
    drop_last : bool
        Drop the last, incomplete batch. When it is kept with several replicas, it is padded with
        the first indices of the epoch's permutation up to a multiple of ``num_replicas`` (as
        ``DistributedSampler`` pads), so every rank gets an equal slice.
    num_replicas, rank : int, optional
        See :class:`DistributedBatchSampler`.

    Examples
    --------
    >>> sampler = RandomBatchSampler(10, batch_size=4, seed=0)
    >>> [len(b) for b in sampler]
    [4, 4, 2]
    """

    from_settings = ("n", "batch_size", "seed", "num_replicas", "rank")

    def __init__(
        self,
        n: int | ArrayLike,
        batch_size: int,
        seed: int = 0,
        drop_last: bool = False,
        *,
        num_replicas: int | None = None,
        rank: int | None = None,
    ) -> None:
        super().__init__(seed, num_replicas, rank)
        if isinstance(n, int) or np.ndim(n) == 0:
            self.indices = np.arange(int(cast(SupportsInt, n)))  # a 0-d value: a count
        else:
            self.indices = _as_indices(n)
        if len(self.indices) == 0 or batch_size < 1:
            raise ValueError(
                f"need at least one item and a positive batch_size, got {len(self.indices)} items "
                f"and batch_size={batch_size}"
            )
        self._check_divisible(batch_size)
        self.batch_size = batch_size
        self.drop_last = drop_last

    @classmethod
    def for_training(
        cls, labels: np.ndarray, settings: SamplerSettings, **sampler_args: Any
    ) -> RandomBatchSampler:
        """Batches of the labelled items."""
        labelled = np.flatnonzero(labels >= 0)
        return cls(
            labelled, settings.batch_size, settings.seed, **replicas_of(settings), **sampler_args
        )

    def pair_shortfall(self) -> tuple[str, str, str] | None:
        if self.batch_size < 2:
            return "batch_size", "puts one item in each batch: no pair", "give 2 or more"
        return None

    def global_batches(self) -> Iterator[list[int]]:
        order = self._rng().permutation(self.indices).tolist()
        for i in range(len(self)):
            batch = order[i * self.batch_size : (i + 1) * self.batch_size]
            shortfall = -len(batch) % self.num_replicas
            yield batch + order[:shortfall]

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.indices) // self.batch_size
        return -(-len(self.indices) // self.batch_size)


@register_sampler("class-balanced")
class ClassBalancedBatchSampler(DistributedBatchSampler):
    """``p`` classes x ``m`` items per batch, the batches of DSCL (Law et al., ICML 2017, Sec. 4.1)
    and of most deep metric learning protocols.

    Each batch draws ``classes_per_batch`` distinct classes uniformly at random, then
    ``items_per_class`` items of each. Within a class, items are taken from a shuffled queue that
    is refilled when fewer than ``m`` remain, so every item is seen about equally often and no
    item repeats within a batch. A class with fewer than ``m`` items gives all of them once and
    fills up with items drawn from it uniformly *with replacement* (so those repeat).

    The batch is laid out class by class, so a rank's slice holds whole classes when
    ``classes_per_batch`` is divisible by ``num_replicas``.

    Parameters
    ----------
    labels : array-like of int
        ``(n,)`` labels; items labelled below 0 are never sampled.
    classes_per_batch : int
        ``p``, at most the number of classes.
    items_per_class : int
        ``m``.
    seed : int
        Seed.
    batches_per_epoch : int, optional
        Default ``max(1, n_labelled // (p * m))``: about one pass over the labelled items.
    num_replicas, rank : int, optional
        See :class:`DistributedBatchSampler`; ``p * m`` must be divisible by ``num_replicas``.
    """

    from_settings = (
        "labels",
        "classes_per_batch",
        "items_per_class",
        "seed",
        "num_replicas",
        "rank",
    )

    def __init__(
        self,
        labels: ArrayLike,
        classes_per_batch: int,
        items_per_class: int,
        seed: int = 0,
        *,
        batches_per_epoch: int | None = None,
        num_replicas: int | None = None,
        rank: int | None = None,
    ) -> None:
        super().__init__(seed, num_replicas, rank)
        self.labels = label_array(labels)
        self.members = class_members(self.labels)
        if classes_per_batch < 1 or items_per_class < 1:
            raise ValueError("classes_per_batch and items_per_class must be positive")
        if classes_per_batch > len(self.members):
            raise ValueError(
                f"classes_per_batch={classes_per_batch} but the labels have only "
                f"{len(self.members)} classes (labels >= 0)"
            )
        self.classes_per_batch = classes_per_batch
        self.items_per_class = items_per_class
        self.batch_size = classes_per_batch * items_per_class
        self._check_divisible(self.batch_size)
        n_labelled = sum(len(m) for m in self.members.values())
        self.batches_per_epoch = batches_per_epoch_of(
            batches_per_epoch, n_labelled, self.batch_size
        )

    @classmethod
    def for_training(
        cls, labels: np.ndarray, settings: SamplerSettings, **sampler_args: Any
    ) -> ClassBalancedBatchSampler:
        """``p = batch_size / items_per_class`` classes of ``m = items_per_class`` items; with
        fewer classes than ``p``, ``m`` grows to fill the batch."""
        num_classes = len(np.unique(labels[labels >= 0]))
        classes = max(min(settings.batch_size // settings.items_per_class, num_classes), 1)
        items = max(settings.batch_size // classes, 1)
        return cls(labels, classes, items, settings.seed, **replicas_of(settings), **sampler_args)

    def pair_shortfall(self) -> tuple[str, str, str] | None:
        p, m = self.classes_per_batch, self.items_per_class
        if p * m < 4 and (p < 2 or m < 2):  # two classes of two items need four
            why = (
                "puts one item in each batch: no pair"
                if p * m == 1
                else (f"makes batches of {p * m}, too few for two classes of two items")
            )
            return "batch_size", why, "give 4 or more"
        if p < 2:
            return (
                "items_per_class",
                f"fills each batch of {p * m} with one class: no negative",
                f"give items_per_class at most {p * m // 2} (half the batch)",
            )
        if m < 2:
            return (
                "items_per_class",
                f"puts one item of each of {p} classes in a batch: no positive pair",
                "give items_per_class 2 or more",
            )
        return None

    def _take(
        self, label: int, queues: dict[int, np.ndarray], rng: np.random.Generator
    ) -> np.ndarray:
        """``m`` items of class ``label``."""
        members, m = self.members[label], self.items_per_class
        if len(members) < m:
            extra = rng.choice(members, size=m - len(members), replace=True)
            return np.concatenate([rng.permutation(members), extra])
        queue = queues.get(label)
        if queue is None or len(queue) < m:
            queue = rng.permutation(members)
        queues[label] = queue[m:]
        return queue[:m]

    def global_batches(self) -> Iterator[list[int]]:
        rng = self._rng()
        classes = np.fromiter(self.members, dtype=np.int64)
        queues: dict[int, np.ndarray] = {}
        for _ in range(self.batches_per_epoch):
            chosen = rng.choice(classes, size=self.classes_per_batch, replace=False)
            yield np.concatenate([self._take(int(c), queues, rng) for c in chosen]).tolist()

    def __len__(self) -> int:
        return self.batches_per_epoch
