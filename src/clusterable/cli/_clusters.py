"""How many clusters ``evaluate`` and ``cluster`` ask a method for, from the flags: the library's
one rule (`clusterable.cluster.resolve_n_clusters`) with the labels' class count, and what the
command line says about it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Literal

from clusterable.cli._flag_types import whole_number

if TYPE_CHECKING:
    import numpy as np


def n_clusters_flag(text: str) -> int | Literal["auto"]:
    """``--n-clusters``: a whole number of 1 or more, or ``auto`` for a method that can choose;
    anything else is one line naming the flag (argparse's ``argument --n-clusters: ...``)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return whole_number(1)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of clusters: give a whole number of 1 or more, or auto"
        ) from None


def clusters_to_ask(
    clustering: str,
    n_clusters: int | str | None,
    labels: np.ndarray | None,
    n_items: int,
    *,
    announce: bool = False,
) -> int | Literal["auto"] | None:
    """``--n-clusters``, else the number of classes in ``labels``, else ``"auto"`` where the
    method can choose; None for a method that finds its own number (AAS, HDBSCAN).

    ``announce``: say where the number came from when it is the labels'. A method of quadratic
    memory (affinity propagation) is announced as slow.

    Raises
    ------
    ValueError
        For ``n_clusters`` given to a method that finds its own, or missing where nothing can
        stand for it.
    """

    from clusterable.cluster import available_clusterings, clusterer_info, resolve_n_clusters
    from clusterable.data import labelled_classes

    info = clusterer_info(clustering)
    n_classes = None if labels is None else len(labelled_classes(labels))
    try:
        k = resolve_n_clusters(clustering, n_clusters, n_classes=n_classes)
    except ValueError as error:  # the library's reason, in the command line's words
        if not info.takes_n_clusters:
            reason = "finds its own number of clusters (it marks noise too): drop --n-clusters"
        elif n_clusters is None:
            reason = "needs the number of clusters: add --n-clusters N, or --labels"
        elif n_clusters == "auto":
            choosing = [name for name in available_clusterings() if clusterer_info(name).auto]
            reason = (
                f"cannot choose its number of clusters: give --n-clusters N, or --clustering "
                f"{' or '.join(choosing)} with --n-clusters auto"
            )
        else:
            reason = str(error)
        raise ValueError(f"--clustering {clustering} {reason}") from None
    if announce and n_clusters is None and isinstance(k, int):
        print(f"n_clusters = {k}: the number of classes in the labels (--n-clusters sets it)")
    if info.memory == "quadratic":
        print(f"{info.label} on {n_items} items: O(n^2) memory and time, may take minutes")
    return k
