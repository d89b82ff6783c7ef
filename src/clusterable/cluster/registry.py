"""Every partition algorithm under one name and one call, for the evaluation and the CLI.

``run_clustering(x, method, n_clusters=None, *, seed=0, **options)`` calls the algorithm a name
stands for: each module registers its function with :func:`register_clusterer`, saying whether it
takes a number of clusters (AAS chooses its own) and a seed (affinity propagation and AAS are
deterministic). The command line's choices and the evaluation's ``clustering=`` names are
:func:`available_clusterings`; a new algorithm is one module with its decorator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from clusterable._register import register_once

#: Short names accepted besides the registered ones.
ALIASES = {"ap": "affinity_propagation"}


@dataclass(frozen=True)
class Clusterer:
    """A registered algorithm: ``function(x, [n_clusters], [seed=], **options) -> (n,) ids``."""

    function: Callable[..., np.ndarray]
    takes_n_clusters: bool
    seeded: bool


CLUSTERERS: dict[str, Clusterer] = {}


def register_clusterer(
    name: str, *, takes_n_clusters: bool = True, seeded: bool = True
) -> Callable[[Callable[..., np.ndarray]], Callable[..., np.ndarray]]:
    """Function decorator: make a partition algorithm available as ``name``."""

    def add(function: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        register_once(CLUSTERERS, name, Clusterer(function, takes_n_clusters, seeded), "clustering")
        return function

    return add


def available_clusterings(aliases: bool = False) -> list[str]:
    """Registered names, sorted (and the short aliases such as ``ap`` when asked)."""
    return sorted(CLUSTERERS) + (sorted(ALIASES) if aliases else [])


def canonical_clustering(name: str) -> str:
    """The registered name ``name`` stands for; a ValueError listing the names otherwise."""
    name = ALIASES.get(name, name)
    if name not in CLUSTERERS:
        raise ValueError(
            f"unknown clustering {name!r}; choose one of "
            f"{', '.join(available_clusterings(aliases=True))}"
        )
    return name


def takes_n_clusters(name: str) -> bool:
    """Whether clustering ``name`` is told its number of clusters (AAS finds its own)."""
    return CLUSTERERS[canonical_clustering(name)].takes_n_clusters


def run_clustering(
    x: Any, method: str, n_clusters: int | None = None, *, seed: int = 0, **options: Any
) -> np.ndarray:
    """``(n,)`` int64 cluster ids of ``x`` by ``method`` (-1: AAS noise).

    Raises
    ------
    ValueError
        For an unknown method, ``n_clusters`` missing for a method that needs it or given to one
        that chooses its own (AAS), and whatever the algorithm refuses.
    """
    name = canonical_clustering(method)
    clusterer = CLUSTERERS[name]
    arguments: list[Any] = [x]
    if clusterer.takes_n_clusters:
        if n_clusters is None:
            raise ValueError(f"{name} needs n_clusters, the number of clusters to find")
        arguments.append(n_clusters)
    elif n_clusters is not None:
        raise ValueError(
            f"{name} finds its own number of clusters; leave n_clusters out, or choose a method "
            "that takes it"
        )
    if clusterer.seeded:
        options = {"seed": seed, **options}
    return np.asarray(clusterer.function(*arguments, **options), dtype=np.int64)
