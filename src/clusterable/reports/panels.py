"""The panels of a report: settings, metrics, per-class results, curves, map, retrieval, clusters,
verification.

Each function takes arrays and returns a :class:`~clusterable.reports.page.Section`; the run,
clustering and reproduction reports put together the ones that apply. Items are shown as
thumbnails when they are images (``(C, H, W)`` or ``(H, W)``) and by id and label otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterable.data import labelled_mask
from clusterable.evaluate import knn_search
from clusterable.metric_table import metric_label
from clusterable.plots import draw_confusion, draw_maps, draw_training_curves, draw_verification
from clusterable.plots.maps import NOISE, Colouring, group_name
from clusterable.reports.page import Html, Section, escape, figure_image, note, table, thumbnail
from clusterable.tsne import tsne_map

if TYPE_CHECKING:
    from clusterable.evaluate.pair_sample import PairDistances
    from clusterable.evaluate.verification import ThresholdChoice
    from clusterable.reports.verification_view import VerificationView

#: Validation metrics drawn as curves, when the log has them.
CURVE_METRICS = ("recall@1", "map@r", "nmi", "f1", "accuracy", "classification_accuracy")

#: Items per row of a retrieval panel, and queries of each kind shown.
NEIGHBOURS = 6
QUERIES_SHOWN = 4

#: Member thumbnails per cluster, and clusters listed at most.
MEMBERS_SHOWN = 10
CLUSTERS_SHOWN = 40

#: The rates of the threshold table: ThresholdChoice field -> column, in percent.
THRESHOLD_RATES = {
    "fmr": "FMR %",
    "fnmr": "FNMR %",
    "precision": "precision %",
    "recall": "recall %",
    "f1": "F1 %",
}


def _as_items(items: Any) -> np.ndarray | None:
    """Items as an array when they are images (``(n, C, H, W)`` or ``(n, H, W)``), else None."""
    if items is None:
        return None
    array = np.asarray(items)
    return array if array.ndim in (3, 4) else None


def settings_section(
    settings: Mapping[str, Any], title: str = "Settings", anchor: str = "settings"
) -> Section:
    """Every setting as a ``key: value`` row (nested mappings as dotted keys)."""
    rows = [(key, _short(value)) for key, value in _flatten(settings)]
    return Section(anchor, title, table(["setting", "value"], rows))


def _flatten(values: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in values.items():
        if isinstance(value, Mapping) and value:
            rows += _flatten(value, f"{prefix}{key}.")
        else:
            rows.append((f"{prefix}{key}", value))
    return rows


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 160 else text[:157] + "..."


def metrics_section(
    metrics: Mapping[str, float],
    description: str,
    before: tuple[str, Mapping[str, float]] | None = None,
) -> Section:
    """The evaluation table in percent, each metric named in full; ``before``: (what it scored,
    the table before training), a second column (``-`` where it lacks a metric)."""
    keys = [
        key
        for key, value in metrics.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    ]
    rows = [[metric_label(key), f"{100 * metrics[key]:.2f}"] for key in keys]
    header = ["metric", "%"]
    if before is not None:
        representation, earlier = before
        for key, row in zip(keys, rows, strict=True):
            row.append(f"{100 * earlier[key]:.2f}" if key in earlier else "-")
        header = ["metric", "trained, %", "before training, %"]
        description += f" Before training: {representation}, scored alike."
    return Section("metrics", "Metrics", note(description) + table(header, rows))


def per_class_section(
    per_class: Mapping[str, np.ndarray],
    class_names: Sequence[str] | None,
    sort_key: str = "map@r",
    description: str = "",
) -> Section:
    """Per-class results sorted worst first; the worst and best fifth are shaded."""
    columns = [k for k in per_class if k not in ("class", "count")]
    key = sort_key if sort_key in per_class else columns[0]
    values = np.asarray(per_class[key], dtype=np.float64)
    order = np.argsort(np.nan_to_num(values, nan=np.inf), kind="stable")
    fifth = max(1, len(order) // 5)
    rows, kinds = [], []
    for position, row in enumerate(order):
        name = group_name(int(per_class["class"][row]), class_names)
        cells = [f"{100 * per_class[c][row]:.1f}" for c in columns]
        rows.append([name, int(per_class["count"][row]), *cells])
        kinds.append(
            "bad" if position < fifth else "good" if position >= len(order) - fifth else ""
        )
    text = f"Sorted by {metric_label(key)}, worst first. Values in %. {description}"
    header = ["class", "items", *[metric_label(c).split(" (")[0] for c in columns]]
    return Section("classes", "Per-class results", note(text) + table(header, rows, kinds))


def curves_section(records: Sequence[Mapping[str, Any]]) -> Section:
    """Training loss and every validation metric per epoch (and the learning rate if logged)."""
    numeric = [name for name in CURVE_METRICS if any(name in r for r in records)]
    body: str = figure_image(draw_training_curves(records, numeric), "training curves")
    if not numeric:
        body = note("No validation metric was logged (no validation split).") + body
    else:
        names = ", ".join(metric_label(name) for name in numeric)
        body = note(f"Validation curves: {names}.") + body
    return Section("curves", "Training curves", body)


def map_section(
    embeddings: np.ndarray,
    colourings: Sequence[Colouring],
    description: str = "",
    seed: int = 0,
) -> Section:
    """A 2-D map of ``embeddings`` once per ``(groups, group names, title)`` colouring: the
    embedding itself when it is 2-D, t-SNE otherwise."""
    points = embeddings if embeddings.shape[1] == 2 else tsne_map(embeddings, seed=seed)
    how = "the embedding itself (2-D)" if embeddings.shape[1] == 2 else "t-SNE (openTSNE)"
    body = note(f"Map: {how} of {len(points):,} items. {description}")
    return Section("map", "2-D map", body + figure_image(draw_maps(points, colourings), "2-D map"))


def retrieval_section(
    embeddings: np.ndarray,
    labels: np.ndarray,
    ids: np.ndarray,
    class_names: Sequence[str] | None,
    items: Any = None,
    seed: int = 0,
) -> Section:
    """Queries with their nearest items (the query excluded): the best, the worst and a random
    few, by the share of their neighbours in the query's class."""
    k = min(NEIGHBOURS, len(labels) - 1)
    distances, neighbours = knn_search(embeddings, k)  # (n, k) each, the query excluded
    hits = labels[neighbours] == labels[:, None]  # (n, k)
    share = hits.mean(axis=1)
    # Best: most hits, then the nearest neighbours; worst: fewest hits, then the nearest wrong ones.
    order = np.lexsort((distances[:, 0], -share))
    rng = np.random.default_rng(seed)
    shown = QUERIES_SHOWN
    groups = [
        ("best", order[:shown]),
        ("worst", order[::-1][:shown]),
        ("random", rng.choice(len(labels), size=min(shown, len(labels)), replace=False)),
    ]
    images = _as_items(items)
    body = note(
        f"Each row: a query, then its {k} nearest items (the query excluded), framed green when "
        f"they share the query's class and red when not. {np.mean(share):.1%} of all neighbours "
        f"share their query's class over {len(labels):,} queries."
    )
    for title, queries in groups:
        rows = []
        for query in queries:
            found = neighbours[query]
            if images is not None:
                query_name = group_name(labels[query], class_names)
                strip: str = thumbnail(images[query], "query", query_name)
                strip += "".join(
                    thumbnail(
                        images[n],
                        "hit" if labels[n] == labels[query] else "miss",
                        f"{group_name(labels[n], class_names)} at {distances[query, j]:.3g}",
                    )
                    for j, n in enumerate(found)
                )
                cells: list[object] = [Html(f'<div class="strip">{strip}</div>')]
            else:
                cells = [
                    ids[query],
                    Html(
                        " ".join(
                            f'<span class="{"hit" if labels[n] == labels[query] else "miss"}">'
                            f"{escape(ids[n])} ({escape(group_name(labels[n], class_names))})"
                            "</span>"
                            for n in found
                        )
                    ),
                ]
            rows.append([*cells, group_name(labels[query], class_names), f"{share[query]:.0%}"])
        header = (
            ["query, then neighbours"] if images is not None else ["query", "neighbours (class)"]
        )
        body += f"<h3>{title} queries</h3>" + table([*header, "class", "same class"], rows)
    return Section("retrieval", "Retrieval", body)


def cluster_section(
    clusters: np.ndarray,
    labels: np.ndarray | None,
    class_names: Sequence[str] | None,
    items: Any = None,
    description: str = "",
    seed: int = 0,
) -> Section:
    """Each cluster's size, majority class and purity, a strip of its members, and the confusion
    between clusters and classes as a heat map. AAS noise (-1) is its own group. Unlabelled items
    (label -1) count in a cluster's size, never as a class: majority, purity and the heat map
    are those of its labelled items, and a cluster of unlabelled items alone has none."""
    images = _as_items(items)
    rng = np.random.default_rng(seed)
    ids, sizes = np.unique(clusters, return_counts=True)
    order = np.argsort(-sizes, kind="stable")
    listed = order[:CLUSTERS_SHOWN]
    labelled = np.ones(len(clusters), bool) if labels is None else labelled_mask(labels)  # (n,)
    rows, kinds = [], []
    for position in listed:
        cluster, size = int(ids[position]), int(sizes[position])
        members = np.flatnonzero(clusters == cluster)
        row: list[object] = [group_name(cluster, None, NOISE), size]
        if labels is not None:
            cells, kind = _majority_and_purity(labels[members[labelled[members]]], class_names)
            row += cells
            kinds.append(kind)
        if images is not None:
            sample = rng.choice(members, size=min(MEMBERS_SHOWN, size), replace=False)
            strip = "".join(
                thumbnail(
                    images[m], "", group_name(labels[m], class_names) if labels is not None else ""
                )
                for m in sample
            )
            row.append(Html(f'<div class="strip">{strip}</div>'))
        rows.append(row)
    header = ["cluster", "items"]
    header += ["majority class", "purity"] if labels is not None else []
    header += ["members (a sample)"] if images is not None else []
    unlabelled = int((~labelled).sum())
    text = (
        f"{len(ids) - int((ids < 0).any())} clusters of {len(clusters):,} items"
        + (f", {int((clusters < 0).sum())} items called noise" if (ids < 0).any() else "")
        + "; largest first"
        + (f", the {CLUSTERS_SHOWN} largest listed" if len(ids) > CLUSTERS_SHOWN else "")
        + (
            f". {unlabelled:,} unlabelled items count in the sizes, not in majority or purity"
            if unlabelled
            else ""
        )
        + f". {description}"
    )
    body = note(text) + table(header, rows, kinds)
    if labels is not None and labelled.any():
        confusion = draw_confusion(clusters[labelled], labels[labelled], class_names, ids[listed])
        body += figure_image(confusion, "confusion between clusters and classes")
    return Section("clusters", "Clusters", body)


def _majority_and_purity(
    member_labels: np.ndarray, class_names: Sequence[str] | None
) -> tuple[list[object], str]:
    """A cluster's majority class and purity from its labelled members' ``(m,)`` labels (the
    smallest class on equal counts), and its row's kind: bad below half, good from 90 %;
    dashes and no kind when it has no labelled member."""
    if not len(member_labels):
        return ["–", "–"], ""
    classes, counts = np.unique(member_labels, return_counts=True)
    purity = counts.max() / len(member_labels)
    kind = "bad" if purity < 0.5 else "good" if purity >= 0.9 else ""
    return [group_name(int(classes[counts.argmax()]), class_names), f"{purity:.0%}"], kind


def verification_section(view: VerificationView, name: str, description: str = "") -> Section:
    """Same or not, by distance: which pairs, how the threshold was chosen, a table of its rates
    (on the validation pairs that chose it, when any, and on ``name``'s pairs), the distance
    histograms and the DET curve."""
    pairs = view.pairs
    text = " ".join(
        part
        for part in (
            f"Pairs of {name}: {pairs.describe()}; {pairs.distance} distance.",
            description,
            "A pair is called a match when its distance is at most the threshold.",
            view.chosen_where,
        )
        if part
    )
    rows = []
    if view.validation is not None and view.validation_choice is not None:
        rows.append(
            _threshold_row("validation (chose it)", view.validation, view.validation_choice)
        )
    rows.append(_threshold_row(name, pairs, view.choice))
    header = ["pairs of", "pairs", "criterion", "threshold", *THRESHOLD_RATES.values()]
    figure = draw_verification(pairs.distances, pairs.same, view.choice)
    body = note(text) + table(header, rows) + figure_image(figure, "pair distances and DET curve")
    return Section("verification", "Verification", body)


def _threshold_row(name: str, pairs: PairDistances, choice: ThresholdChoice) -> list[object]:
    rates = [f"{100 * getattr(choice, field):.2f}" for field in THRESHOLD_RATES]
    return [name, len(pairs.distances), choice.criterion, f"{choice.threshold:.6g}", *rates]
