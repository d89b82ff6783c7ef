"""The HTML report of a clustering: each cluster's size, majority class, purity and members, the
confusion between clusters and classes, the partition metrics and a map
(``clusterable report PARTITION --embeddings EMB.npy``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clusterable.data import labelled_mask
from clusterable.evaluate import evaluate_embeddings, partition_metric_names
from clusterable.plots.maps import NOISE, Colouring
from clusterable.reports.page import render, write_page
from clusterable.reports.panels import (
    cluster_section,
    map_section,
    metrics_section,
    settings_section,
)

#: Points on the map at most (a seeded sample beyond).
MAP_ITEMS = 2_000


def write_clustering_report(
    embeddings: np.ndarray,
    clusters: Any,
    out: str | os.PathLike[str],
    *,
    labels: np.ndarray | None = None,
    class_names: Sequence[str] | None = None,
    items: Any = None,
    settings: dict[str, Any] | None = None,
    title: str = "Clustering",
    seed: int = 0,
) -> Path:
    """Write the report of ``clusters`` of ``embeddings`` ``(n, d)``.

    Parameters
    ----------
    embeddings : array
        ``(n, d)`` embeddings: the points of the map.
    clusters : array or partition
        ``(n,)`` ids (-1: noise), or a partition of the embeddings that holds them
        (``labels_``): the one an evaluation scored (``clusterable.evaluate.Evaluation.partition``,
        whose clusterer and k-means rule the settings then show) or `clusterable.cluster.fit`'s.
    out : path
        The HTML file to write (atomically); returned.
    labels : array, optional
        ``(n,)`` int classes: adds purity, the confusion heat map and the partition metrics.
    class_names : sequence of str, optional
        The name of each class code, for the legends.
    items : array, optional
        ``(n, C, H, W)`` or ``(n, H, W)`` images in [0, 1]: adds member thumbnails.
    settings : dict, optional
        What produced the clustering (method, k, source files), shown first.
    title : str
        The page's title.
    seed : int
        Seed of the map's sample and projection and of the thumbnails' choice.
    """
    embeddings = np.asarray(embeddings, dtype=np.float32)
    settings = {**_partition_settings(clusters), **(settings or {})}
    clusters = np.asarray(getattr(clusters, "labels_", clusters), dtype=np.int64)
    if clusters.shape != (len(embeddings),):
        raise ValueError(
            f"{len(clusters)} cluster ids for {len(embeddings)} embeddings: give the clusters of "
            "these embeddings (the same rows, in the same order)"
        )
    if labels is not None and np.shape(labels) != clusters.shape:
        raise ValueError(f"{len(labels)} labels for {len(clusters)} items: give one per item")
    found = len(np.unique(clusters[clusters >= 0]))
    sections = [settings_section({"items": len(clusters), "clusters": found, **settings})]
    if labels is not None:
        labels = np.asarray(labels, dtype=np.int64)
        # The partition's scores over the labelled items (a negative label is none), read from
        # the metric registry: a metric registered with needs={"partition"} shows here too.
        keep = labelled_mask(labels)  # (n,)
        classes = len(np.unique(labels[keep]))
        if classes >= 2:
            scores = evaluate_embeddings(
                embeddings[keep],
                labels[keep],
                metrics=partition_metric_names(),
                clustering=clusters[keep],
                seed=seed,
            )
            left_out = int((~keep).sum())
            note = f" ({left_out:,} unlabelled items left out)" if left_out else ""
            caption = f"These clusters against the {classes} classes{note}."
            sections.append(metrics_section(scores, caption))
    rng = np.random.default_rng(seed)
    on_map = np.sort(rng.choice(len(clusters), size=min(MAP_ITEMS, len(clusters)), replace=False))
    colourings = [Colouring(clusters[on_map], None, "by cluster", NOISE)]
    if labels is not None:
        colourings.append(Colouring(labels[on_map], class_names, "by class"))
    sections.append(map_section(embeddings[on_map], colourings, seed=seed))
    sections.append(cluster_section(clusters, labels, class_names, items, seed=seed))
    page = render(title, f"{found} clusters of {len(clusters):,} items", sections, title)
    return write_page(page, out)


def _partition_settings(partition: Any) -> dict[str, Any]:
    """What a partition says of how it was found (its method, and k-means' rule); nothing for
    plain ids or a given partition."""
    method = getattr(partition, "method", "")
    if not method or method == "given":
        return {}
    rule = getattr(partition, "rule", "")  # an evaluation's partition states its k-means rule
    return {"method": method, **({"rule": rule} if rule else {})}
