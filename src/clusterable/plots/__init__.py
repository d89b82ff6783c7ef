"""PNG figures: t-SNE maps of embeddings, training curves, retrieval grids."""

from clusterable._optional import require

# The check first, so that a missing matplotlib names the extra to install.
require("matplotlib", "figures")

from clusterable.plots.curves import plot_training_curves  # noqa: E402
from clusterable.plots.retrieval_grid import plot_retrieval_grid  # noqa: E402
from clusterable.plots.tsne import plot_tsne  # noqa: E402

__all__ = ["plot_retrieval_grid", "plot_training_curves", "plot_tsne"]
