"""Partition algorithms the papers evaluate with; each returns int cluster ids (-1: AAS noise).

`run_clustering(x, name, n_clusters, seed=...)` calls any of them by name (`available_clusterings`).

`fit` runs one and keeps a `Partition` that assigns new points, saves and loads.
"""

from clusterable.cluster._validation import ClusterCountWarning
from clusterable.cluster.aas import aas
from clusterable.cluster.affinity_propagation import affinity_propagation
from clusterable.cluster.gmm import gmm
from clusterable.cluster.kmeans import kmeans
from clusterable.cluster.partition import METHODS, Partition, fit
from clusterable.cluster.registry import (
    available_clusterings,
    canonical_clustering,
    register_clusterer,
    run_clustering,
    takes_n_clusters,
)
from clusterable.cluster.spectral import spectral, spectral_embedding

__all__ = [
    "METHODS",
    "ClusterCountWarning",
    "Partition",
    "aas",
    "affinity_propagation",
    "available_clusterings",
    "canonical_clustering",
    "fit",
    "gmm",
    "kmeans",
    "register_clusterer",
    "run_clustering",
    "spectral",
    "spectral_embedding",
    "takes_n_clusters",
]
