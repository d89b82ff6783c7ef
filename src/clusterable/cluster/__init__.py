"""Partition algorithms the papers evaluate with; each returns int cluster ids (-1: AAS noise)."""

from clusterable.cluster._validation import ClusterCountWarning
from clusterable.cluster.aas import aas
from clusterable.cluster.affinity_propagation import affinity_propagation
from clusterable.cluster.gmm import gmm
from clusterable.cluster.kmeans import kmeans
from clusterable.cluster.spectral import spectral, spectral_embedding

__all__ = [
    "ClusterCountWarning",
    "aas",
    "affinity_propagation",
    "gmm",
    "kmeans",
    "spectral",
    "spectral_embedding",
]
