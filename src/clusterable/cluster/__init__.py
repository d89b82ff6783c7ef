"""Partition algorithms the papers evaluate with, each one registered estimator.

``fit(x, name, n_clusters=None, seed=0, device=None, **options)`` runs any of them by name and
returns a `Partition`: ``labels_`` (int ids, -1: noise for AAS and HDBSCAN), ``predict`` for new
points, ``save`` and ``Partition.load``. ``run_clustering`` gives the ids alone through the same
dispatcher; ``resolve_n_clusters`` is the one rule for the number of clusters (the caller's class
count, ``"auto"`` where a method can choose, none where it finds its own). The names are
``available_clusterings()``; a new algorithm is one module with its ``register_clusterer``
(`clusterable.cluster.registry`). The functions ``kmeans``, ``spectral``, ``gmm``,
``affinity_propagation``, ``aas`` and ``hdbscan`` return the ids of one algorithm. Those that can
use a GPU (k-means, spectral) take ``device`` as an argument; ``"auto"`` is the detection (CUDA,
else the CPU), never an ambient device.
"""

from clusterable.cluster._validation import ClusterCountWarning
from clusterable.cluster.aas import SingletonClustersWarning, aas
from clusterable.cluster.affinity_propagation import affinity_propagation
from clusterable.cluster.gmm import gmm
from clusterable.cluster.hdbscan import hdbscan
from clusterable.cluster.kmeans import kmeans
from clusterable.cluster.partition import Partition
from clusterable.cluster.registry import (
    Clusterer,
    ClustererInfo,
    available_clusterings,
    canonical_clustering,
    clusterer_info,
    fit,
    register_clusterer,
    resolve_n_clusters,
    run_clustering,
    takes_n_clusters,
)
from clusterable.cluster.spectral import spectral, spectral_embedding

__all__ = [
    "ClusterCountWarning",
    "Clusterer",
    "ClustererInfo",
    "Partition",
    "SingletonClustersWarning",
    "aas",
    "affinity_propagation",
    "available_clusterings",
    "canonical_clustering",
    "clusterer_info",
    "fit",
    "gmm",
    "hdbscan",
    "kmeans",
    "register_clusterer",
    "resolve_n_clusters",
    "run_clustering",
    "spectral",
    "spectral_embedding",
    "takes_n_clusters",
]
