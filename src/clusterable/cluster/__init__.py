"""Partition algorithms the papers evaluate with; each returns int cluster ids (-1: AAS noise).

`fit` runs one and keeps a `Partition` that assigns new points, saves and loads.
"""

from clusterable.cluster._validation import ClusterCountWarning
from clusterable.cluster.aas import aas
from clusterable.cluster.affinity_propagation import affinity_propagation
from clusterable.cluster.gmm import gmm
from clusterable.cluster.kmeans import kmeans
from clusterable.cluster.partition import METHODS, Partition, fit
from clusterable.cluster.spectral import spectral, spectral_embedding

__all__ = [
    "METHODS",
    "ClusterCountWarning",
    "Partition",
    "aas",
    "affinity_propagation",
    "fit",
    "gmm",
    "kmeans",
    "spectral",
    "spectral_embedding",
]
