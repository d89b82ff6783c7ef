"""One contract for every partition algorithm: a registered estimator, one dispatcher.

Each algorithm is one class registered in ``CLUSTERERS`` (a `clusterable._register.Registry`) with
what the rest of the package needs to know of it, modelled on scikit-learn's ``KMeans``: it is
built with ``n_clusters``, ``seed`` and its own keyword options (checked once, in ``__init__``),
``cluster(points)`` returns the fitted points' ids and ``partition(points, frame)`` also keeps
the rule that places new points (`clusterable.cluster.partition`). The metadata travels with
the registration:

- ``takes_n_clusters``: told its number of clusters (AAS and HDBSCAN find their own);
- ``auto``: the criterion by which it chooses one for ``n_clusters="auto"``, or None;
- ``seeded``: has random steps that ``seed`` fixes;
- ``label``: the name shown to people; ``memory``: ``"linear"`` or ``"quadratic"`` in the points;
- ``noise``: may mark points as noise (-1);
- ``takes_device``: can use a GPU, so takes ``device`` (derived: a ``device`` keyword of its
  ``__init__``, or of the registered function).

The dispatcher, :func:`fit` (a `Partition`) and :func:`run_clustering` (the ids alone), checks
the points once, decides the number of clusters by the one rule :func:`resolve_n_clusters`,
checks the options against the estimator's keywords, hands ``device`` to the estimators that
take one (the others run on the CPU), and calls the estimator, whose core assumes valid input.
No clusterer reads an ambient device: ``device="auto"`` is the detection
(:func:`clusterable.device.resolve_device`). The evaluation, the command line's choices,
``assign`` and the reports all read this registry: a clusterer registered by a user is
everywhere at once, and nothing falls back to k-means. A plain function
``f(x, [k], [seed=], **options) -> ids`` may be registered too (:func:`register_clusterer`); its
partition places a new point with its nearest fitted point.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from clusterable._ranges import check_seed
from clusterable._register import Registry, accepted_keywords, check_keywords
from clusterable.cluster._validation import Rescaling, as_points, check_n_clusters
from clusterable.cluster.partition import NeighbourVotePartition, Partition

#: Short names accepted besides the registered ones.
ALIASES = {"ap": "affinity_propagation"}

if TYPE_CHECKING:  # torch is imported by the clusterers that use it, not by the registry
    from clusterable.device import DeviceSpec

#: How many clusters to ask for: a count, ``"auto"`` (the method chooses), or None (its default).
NClusters = int | Literal["auto"] | None


class Clusterer:
    """Base of a registered partition algorithm (an estimator, as scikit-learn's ``KMeans``).

    A subclass takes its options as keyword-only ``__init__`` parameters after ``n_clusters`` and
    ``seed``, checks them there, and implements :meth:`cluster`; one that can use a GPU takes a
    ``device`` keyword (``"auto"``: the detection, never an ambient device), which :func:`fit`
    hands over. It overrides :meth:`partition`
    when it has an assignment rule of its own (the default places a new point with its nearest
    fitted point). Both receive points the dispatcher has checked: ``(n, d)``, finite, float32
    or float64, with ``n_clusters`` an int in ``[1, n]``, ``"auto"`` or None as its metadata
    allows. After a fit with ``"auto"``, ``chosen_n_clusters_`` holds the count chosen and
    ``selection_`` what the criterion measured.

    Parameters
    ----------
    n_clusters : int, "auto" or None
        Clusters to find (None for the methods that find their own).
    seed : int
        Seed of every random step.
    """

    def __init__(self, n_clusters: NClusters = None, seed: int = 0) -> None:
        self.n_clusters = n_clusters
        self.seed = seed
        self.chosen_n_clusters_: int | None = None
        self.selection_: dict[str, Any] | None = None

    def cluster(self, points: np.ndarray) -> np.ndarray:
        """``(n,)`` int64 cluster ids of checked ``points`` (-1: noise)."""
        raise NotImplementedError

    def partition(self, points: np.ndarray, frame: Rescaling) -> Partition:
        """The clusters of checked ``points`` with the rule that places new points.

        ``frame`` is ``Rescaling.of(points)``, the frame every rule works in. The default rule
        gives a new point the cluster of its nearest fitted point.
        """
        labels = self.cluster(points)
        return NeighbourVotePartition(
            labels_=labels, rescaling=frame, reference=frame.apply(points), vote_neighbours=1
        )

    def _count(self, choose: Callable[[], tuple[int, dict[str, Any]]]) -> int:
        """``n_clusters``, or for ``"auto"`` the count ``choose()`` returns (kept with what it
        measured)."""
        if self.n_clusters != "auto":
            return int(self.n_clusters)  # type: ignore[arg-type]
        self.chosen_n_clusters_, self.selection_ = choose()
        return self.chosen_n_clusters_


@dataclass(frozen=True)
class ClustererInfo:
    """What was said of a clusterer at its registration (see the module docstring)."""

    name: str
    label: str
    takes_n_clusters: bool
    seeded: bool
    auto: str | None
    memory: str
    noise: bool
    takes_device: bool = False


CLUSTERERS: Registry[type[Clusterer]] = Registry("clustering", aliases=ALIASES)


def register_clusterer(
    name: str,
    *,
    takes_n_clusters: bool = True,
    seeded: bool = True,
    auto: str | None = None,
    label: str | None = None,
    memory: Literal["linear", "quadratic"] = "linear",
    noise: bool | None = None,
) -> Callable[[Any], Any]:
    """Decorator: make a `Clusterer` subclass, or a function, available as ``name``.

    A function is called as ``function(x, n_clusters, seed=seed, **options)`` (``n_clusters``
    left out when ``takes_n_clusters`` is False, ``seed`` when ``seeded`` is False) and returns
    ``(n,)`` ids; it cannot choose ``"auto"``. ``noise`` defaults to ``not takes_n_clusters``.

    Examples
    --------
    >>> import numpy as np
    >>> @register_clusterer("halves", seeded=False, label="first and second half")
    ... def halves(x, n_clusters):
    ...     return np.arange(len(x)) * n_clusters // len(x)
    >>> fit(np.zeros((4, 1)), "halves", n_clusters=2).labels_.tolist()
    [0, 0, 1, 1]

    From then on ``"halves"`` is in `available_clusterings`, the command line's choices and
    ``evaluate_embeddings(clustering="halves")``.
    """
    if memory not in ("linear", "quadratic"):
        raise ValueError(f"memory must be 'linear' or 'quadratic', got {memory!r}")
    if auto is not None and not takes_n_clusters:
        raise ValueError(f"{name} finds its own number of clusters, so it cannot also take 'auto'")

    def add(target: Any) -> Any:
        estimator = target
        if not (isinstance(target, type) and issubclass(target, Clusterer)):
            if auto is not None:
                raise ValueError("a clusterer registered as a function cannot choose 'auto'")
            estimator = _function_clusterer(target, takes_n_clusters, seeded)
        CLUSTERERS.add(
            name,
            estimator,
            label=label or name,
            takes_n_clusters=takes_n_clusters,
            seeded=seeded,
            auto=auto,
            memory=memory,
            noise=(not takes_n_clusters) if noise is None else noise,
            takes_device="device" in (accepted_keywords(target) or ()),
        )
        return target

    return add


def _function_clusterer(
    function: Callable[..., Any], takes_n_clusters: bool, seeded: bool
) -> type[Clusterer]:
    """A `Clusterer` that calls ``function``, whose keywords are its options."""

    class FunctionClusterer(Clusterer):
        def __init__(self, n_clusters: NClusters = None, seed: int = 0, **options: Any) -> None:
            super().__init__(n_clusters, seed)
            check_keywords(f"clustering {function.__name__!r}", function, options, ("seed",))
            self.options = options

        def cluster(self, points: np.ndarray) -> np.ndarray:
            arguments = [points, self.n_clusters] if takes_n_clusters else [points]
            options = {"seed": self.seed, **self.options} if seeded else self.options
            return np.asarray(function(*arguments, **options), dtype=np.int64)

    FunctionClusterer.__name__ = FunctionClusterer.__qualname__ = f"{function.__name__}_clusterer"
    FunctionClusterer.function = function  # type: ignore[attr-defined]
    return FunctionClusterer


def available_clusterings(aliases: bool = False) -> list[str]:
    """Registered names, sorted (and the short aliases such as ``ap`` when asked)."""
    return CLUSTERERS.names(aliases=aliases)


def canonical_clustering(name: str) -> str:
    """The registered name ``name`` stands for; a ValueError listing the names otherwise."""
    return CLUSTERERS.canonical(name)


def clusterer_info(name: str) -> ClustererInfo:
    """The registration metadata of clusterer ``name`` (or an alias of it)."""
    canonical = CLUSTERERS.canonical(name)
    meta = CLUSTERERS.metadata(canonical)
    return ClustererInfo(
        name=canonical,
        label=CLUSTERERS.label(canonical),
        takes_n_clusters=meta["takes_n_clusters"],
        seeded=meta["seeded"],
        auto=meta["auto"],
        memory=meta["memory"],
        noise=meta["noise"],
        takes_device=meta["takes_device"],
    )


def takes_n_clusters(name: str) -> bool:
    """Whether clustering ``name`` is told its number of clusters (AAS and HDBSCAN find their
    own)."""
    return clusterer_info(name).takes_n_clusters


def resolve_n_clusters(
    method: str, n_clusters: NClusters | str = None, *, n_classes: int | None = None
) -> NClusters:
    """The number of clusters to ask ``method`` for: the one rule of the package.

    - A method that finds its own count (AAS, HDBSCAN) gets None; an int for it is refused
      (``"auto"`` is what it does anyway, and is accepted).
    - An int is checked (a positive integer) and kept; ``"auto"`` is kept for a method that can
      choose (its registration names the criterion) and refused otherwise.
    - None becomes ``n_classes``, the caller's class count, where given (the papers' protocol);
      else ``"auto"`` where the method can choose; else a ValueError saying what to give.

    Examples
    --------
    >>> resolve_n_clusters("kmeans", n_classes=10), resolve_n_clusters("kmeans")
    (10, 'auto')
    >>> resolve_n_clusters("aas", n_classes=10) is None
    True
    """
    info = clusterer_info(method)
    if not info.takes_n_clusters:
        if n_clusters is not None and n_clusters != "auto":
            raise ValueError(
                f"{info.name} finds its own number of clusters; leave n_clusters out, or choose "
                f"a method that takes it ({', '.join(_names(lambda i: i.takes_n_clusters))})"
            )
        return None
    if n_clusters is None:
        n_clusters = n_classes if n_classes is not None else ("auto" if info.auto else None)
        if n_clusters is None:
            choosing = ", ".join(_names(lambda i: bool(i.auto)))
            finding = ", ".join(_names(lambda i: not i.takes_n_clusters))
            raise ValueError(
                f"{info.name} needs n_clusters, the number of clusters to find (give labels to "
                f"use their class count); {choosing} can choose one with n_clusters='auto', and "
                f"{finding} find their own"
            )
    if n_clusters == "auto":
        if not info.auto:
            raise ValueError(
                f"{info.name} cannot choose its number of clusters: give n_clusters, or use "
                f"{' or '.join(_names(lambda i: bool(i.auto)))} with n_clusters='auto'"
            )
        return "auto"
    if isinstance(n_clusters, bool) or not isinstance(n_clusters, numbers.Integral):
        raise ValueError(f"the number of clusters must be an integer or 'auto', got {n_clusters!r}")
    if n_clusters < 1:
        raise ValueError(f"cannot make {n_clusters} clusters: choose n_clusters >= 1")
    return int(n_clusters)


def _names(keep: Callable[[ClustererInfo], bool]) -> list[str]:
    return [name for name in available_clusterings() if keep(clusterer_info(name))]


def _prepare(
    x: Any,
    method: str,
    n_clusters: NClusters | str,
    seed: int,
    device: DeviceSpec,
    options: dict[str, Any],
) -> tuple[str, Clusterer, np.ndarray, dict[str, Any]]:
    """Check everything once: the name, the points, the count, the options; build the
    estimator, with ``device`` where it takes one. Returns the options it was given too."""
    name = canonical_clustering(method)
    n_clusters = resolve_n_clusters(name, n_clusters)
    check_seed(seed, f"clustering {name!r}")
    points = as_points(x)
    if isinstance(n_clusters, int):
        n_clusters = check_n_clusters(n_clusters, points.shape[0])
    estimator_class = CLUSTERERS[name]
    check_keywords(f"clustering {name!r}", estimator_class, options, ("n_clusters", "seed"))
    if device is not None and clusterer_info(name).takes_device:
        options = {**options, "device": device}
    estimator = estimator_class(n_clusters=n_clusters, seed=seed, **options)
    return name, estimator, points, options


def fit(
    x: Any,
    method: str,
    n_clusters: NClusters | str = None,
    seed: int = 0,
    *,
    device: DeviceSpec = None,
    **options: Any,
) -> Partition:
    """Cluster ``x`` with ``method`` and keep the rule that places new points.

    Parameters
    ----------
    x : array-like
        ``(n, d)`` finite points, numpy or torch.
    method : str
        A registered name (`available_clusterings`) or alias.
    n_clusters : int, "auto" or None
        Clusters to find. None: ``"auto"`` for a method that can choose (k-means by silhouette,
        spectral by the eigengap), none for a method that finds its own (AAS, HDBSCAN); the
        others need an int (`resolve_n_clusters`).
    seed : int
        Seed of the algorithm's random steps.
    device : str or torch.device, optional
        Where a clusterer that can use a GPU runs (``clusterer_info(method).takes_device``:
        k-means, spectral): ``"cpu"``, ``"cuda"``, ``"cuda:N"``, or ``"auto"``, CUDA where torch
        sees a GPU. None: the clusterer's own default (``"auto"``). The others run on the CPU
        and are not given it. No ambient device is read.
    **options
        The algorithm's own keywords (e.g. ``k_graph`` and ``eps`` for ``aas``, ``rank`` for
        ``spectral``, ``min_cluster_size`` for ``hdbscan``).

    Returns
    -------
    Partition
        With ``labels_`` of the fitted points; ``predict(x)`` returns them again.

    Raises
    ------
    ValueError
        For an unknown method, a count or option it does not take, a seed that is not an int
        in ``[0, 2**32 - 1]``, and points it cannot cluster; each message says what to do.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0, 0.0], [0.2, 0.0], [9.0, 9.0], [9.2, 9.0]])
    >>> partition = fit(x, "kmeans", n_clusters=2)
    >>> partition.predict(np.array([[8.5, 9.5], [0.1, -0.3]])).tolist() == [
    ...     partition.labels_[2], partition.labels_[0]]
    True
    """
    name, estimator, points, options = _prepare(x, method, n_clusters, seed, device, options)
    partition = estimator.partition(points, Rescaling.of(points))
    partition.method = name
    partition.options = _record(estimator, seed, options)
    partition.fitted_keys = partition.fitted_keys_of(points)  # to know the points again
    return partition


def run_clustering(
    x: Any,
    method: str,
    n_clusters: NClusters | str = None,
    *,
    seed: int = 0,
    device: DeviceSpec = None,
    **options: Any,
) -> np.ndarray:
    """``(n,)`` int64 cluster ids of ``x`` by ``method`` (-1: noise), without keeping an
    assignment rule: the same dispatcher as :func:`fit` (``device`` as there), for callers
    that need the ids only.

    Raises
    ------
    ValueError
        As :func:`fit`.
    """
    _, estimator, points, _ = _prepare(x, method, n_clusters, seed, device, options)
    return estimator.cluster(points)


def _record(estimator: Clusterer, seed: int, options: dict[str, Any]) -> dict[str, Any]:
    """What a partition keeps of its call: the settings that can be written as JSON."""
    record: dict[str, Any] = {"n_clusters": estimator.n_clusters, "seed": seed}
    for key, value in options.items():
        if isinstance(value, np.generic):
            value = value.item()
        elif key == "device":
            value = str(value)  # a torch.device as its name
        try:
            json.dumps(value)
        except TypeError:
            value = f"<{type(value).__name__}>"  # e.g. the evaluation's neighbour lists
        record[key] = value
    if estimator.chosen_n_clusters_ is not None:
        record["chosen_n_clusters"] = estimator.chosen_n_clusters_
        record["selection"] = estimator.selection_
    return record
