"""The HTML report of an evaluation (``clusterable evaluate RUN --report PAGE.html``): what was
evaluated, the evaluation table, and the verification view of the evaluated items, on one
self-contained page."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from clusterable.evaluate.pair_sample import pair_distances
from clusterable.reports.page import render, write_page
from clusterable.reports.panels import metrics_section, settings_section, verification_section
from clusterable.reports.verification_view import verification_view


def write_evaluation_report(
    table: Mapping[str, Any],
    embeddings: np.ndarray,
    labels: np.ndarray,
    out: str | os.PathLike[str],
    *,
    queries: np.ndarray | None = None,
    validation: tuple[np.ndarray, np.ndarray] | None = None,
    without_validation: str = "No validation split is at hand for these items.",
    heading: str = "",
    settings: Mapping[str, Any] | None = None,
    title: str = "Evaluation",
    seed: int = 0,
) -> Path:
    """Write the report of the evaluation ``table`` of ``embeddings``; returns its path.

    The verification view takes the pairs of the evaluated items (every query with every gallery
    item when ``queries`` is given; a seeded sample beyond
    `~clusterable.evaluate.pair_sample.MAX_PAIRS`) and chooses its threshold on ``validation``'s
    pairs when given, else on the evaluated pairs themselves, saying so.

    Parameters
    ----------
    table : mapping
        The scores, as `clusterable.evaluate.evaluate_embeddings` returns them.
    embeddings : numpy.ndarray
        ``(n, d)`` the evaluated (labelled) items' embeddings.
    labels : numpy.ndarray
        ``(n,)`` their classes.
    out : path
        The HTML file to write.
    queries : numpy.ndarray, optional
        ``(n,)`` booleans: True for a query, False for a gallery item.
    validation : tuple of numpy.ndarray, optional
        ``(embeddings (v, d), labels (v,))`` of held-out items to choose the threshold on.
    without_validation : str
        Why there is no ``validation``, said on the page when it is None.
    heading : str
        What the table covers, shown above it.
    settings : mapping, optional
        What was evaluated (source, split, seed), shown first.
    title : str
        The page's title.
    seed : int
        Seed of the pair samples.
    """
    pairs = pair_distances(embeddings, labels, queries=queries, seed=seed)
    held_out = None if validation is None else pair_distances(*validation, seed=seed)
    view = verification_view(pairs, held_out, without_validation)
    sections = [
        settings_section({"items": len(labels), **(settings or {})}),
        metrics_section(table, heading),
        verification_section(view, "the evaluated items"),
    ]
    page = render(title, heading, sections, title)
    return write_page(page, out)
