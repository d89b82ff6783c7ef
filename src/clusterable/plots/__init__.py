"""Every figure of clusterable: t-SNE and PCA maps of embeddings, training curves, retrieval
grids, clusters against classes, verification (pair distances and the DET curve), and the
reproductions' figures.

A ``plot_*`` function writes a PNG file and returns its path; a ``draw_*`` function returns the
matplotlib figure, which a report inlines (:func:`clusterable.reports.page.figure_image`).
"""

from clusterable._optional import require

# The check first, so that a missing matplotlib names the extra to install.
require("matplotlib", "figures")

from clusterable.plots.budget_gaps import plot_budget_gaps  # noqa: E402
from clusterable.plots.confusion import draw_confusion  # noqa: E402
from clusterable.plots.curves import draw_training_curves, plot_training_curves  # noqa: E402
from clusterable.plots.layouts import plot_layouts  # noqa: E402
from clusterable.plots.maps import draw_maps  # noqa: E402
from clusterable.plots.partitions import plot_partitions  # noqa: E402
from clusterable.plots.pca import plot_pca_maps  # noqa: E402
from clusterable.plots.retrieval_grid import plot_retrieval_grid  # noqa: E402
from clusterable.plots.sweeps import Sweep, plot_sweeps  # noqa: E402
from clusterable.plots.tsne import plot_tsne, plot_tsne_maps  # noqa: E402
from clusterable.plots.verification import draw_verification  # noqa: E402

__all__ = [
    "Sweep",
    "draw_confusion",
    "draw_maps",
    "draw_training_curves",
    "draw_verification",
    "plot_budget_gaps",
    "plot_layouts",
    "plot_partitions",
    "plot_pca_maps",
    "plot_retrieval_grid",
    "plot_sweeps",
    "plot_training_curves",
    "plot_tsne",
    "plot_tsne_maps",
]
