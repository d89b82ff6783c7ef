"""Seeded 2-D t-SNE maps (openTSNE): for plots, and for OPML's pseudo-labels, which cluster the map.

One thread, so that a map depends on the seed only. Below :data:`BARNES_HUT_LIMIT` points
Barnes-Hut gradients are used (faster there: benchmarks/README.md, "Measured defaults"), above it
FFT gradients, which scale linearly.
"""

from __future__ import annotations

import numpy as np

from clusterable._arrays import as_embeddings
from clusterable._optional import require
from clusterable._ranges import check_seed

#: Maps of fewer points use Barnes-Hut gradients, larger ones FFT-accelerated interpolation.
BARNES_HUT_LIMIT = 10_000


def tsne_map(features: np.ndarray, seed: int = 0) -> np.ndarray:
    """2-D map ``(n, 2)`` float64 of ``(n, d)`` features; perplexity 30, or less for tiny sets.

    The features are checked by the package's one embedding rule (`clusterable._arrays.
    as_embeddings`: 2-D, finite), and the seed is an integer in ``[0, 2**32 - 1]``.
    """
    check_seed(seed, "tsne_map")
    points = as_embeddings(features, "features").astype(np.float64, copy=False)
    if len(points) < 2:
        raise ValueError(f"t-SNE needs a 2-D array of at least 2 rows, got shape {points.shape}")
    # openTSNE needs 3 * perplexity < n neighbours: tiny sets get a smaller perplexity.
    perplexity = min(30.0, max((len(points) - 1) / 3.0, 1.0))
    tsne = require("openTSNE", "t-SNE maps (plots, OPML pseudo-labels)").TSNE(
        perplexity=perplexity,
        negative_gradient_method="bh" if len(points) < BARNES_HUT_LIMIT else "fft",
        n_jobs=1,
        random_state=seed,
        verbose=False,
    )
    return np.asarray(tsne.fit(points), dtype=np.float64)
