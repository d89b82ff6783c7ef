"""How many clusters ``evaluate`` and ``cluster`` ask a method for, from the flags: the library's
one rule (`clusterable.cluster.resolve_n_clusters`) with the labels' class count, and what the
command line says about it; and the method's own options, ``--clustering-arg NAME=VALUE``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Literal

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


#: Clusterer keywords a flag of its own sets (or, for k-means' neighbour lists, the evaluation).
NOT_CLUSTERING_ARGS = {
    "n_clusters": "--n-clusters",
    "seed": "--seed",
    "device": "--device",
    "neighbours": "nothing: the evaluation passes its own neighbour lists",
}


def clustering_options(clustering: str, given: list[tuple[str, Any]] | None) -> dict[str, Any]:
    """The ``--clustering-arg NAME=VALUE`` pairs ``given`` as the keywords of ``clustering``:
    typed as its estimator declares them and checked by the estimator itself, which is built and
    not fitted, so that a wrong option is one line naming the flag before any work.

    Raises
    ------
    ValueError
        For a keyword the method does not take (listing those it does), one another flag sets, or
        a value of the wrong type or out of its range.
    """
    from clusterable._register import check_keywords
    from clusterable.cluster import canonical_clustering
    from clusterable.cluster.registry import CLUSTERERS
    from clusterable.train.config_typing import SettingError, parameter_types, typed_settings

    name = canonical_clustering(clustering)
    options = dict(given or [])
    for key, setter in NOT_CLUSTERING_ARGS.items():
        if key in options:
            raise ValueError(f"--clustering-arg {key}: set by {setter}, not by --clustering-arg")
    estimator = CLUSTERERS[name]
    try:
        check_keywords(f"--clustering {name}", estimator, options, tuple(NOT_CLUSTERING_ARGS))
    except ValueError as error:
        raise ValueError(f"--clustering-arg: {error}") from None
    try:
        typed = typed_settings(
            options, parameter_types(estimator), f"clustering {name!r} argument", "clustering_args"
        )
        estimator(n_clusters=None, seed=0, **typed)  # its own range checks; nothing is fitted
    except SettingError as error:
        raise ValueError(
            error.as_given(f"--clustering-arg {error.key}={options.get(error.key or '')}")
        ) from None
    except (ValueError, TypeError) as error:
        raise ValueError(f"--clustering-arg (--clustering {name}): {error}") from None
    return typed


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
