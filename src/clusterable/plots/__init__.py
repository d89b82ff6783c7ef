"""PNG figures: t-SNE maps of embeddings, training curves, retrieval grids."""

from clusterable.plots.curves import plot_training_curves
from clusterable.plots.retrieval import plot_retrieval_grid
from clusterable.plots.tsne import plot_tsne, tsne_map

__all__ = ["plot_retrieval_grid", "plot_training_curves", "plot_tsne", "tsne_map"]
