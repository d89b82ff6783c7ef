"""Retrieval and clustering metrics for embeddings, and the whole table in one call.

Inputs are numpy arrays or torch tensors, validated once by the public function called. Retrieval
metrics use one exact, chunked kNN search (`neighbors`); partition metrics use one sparse
contingency table (`partition_metrics`). `evaluate_embeddings` computes any set of the metrics its
modules register (`registry`), each shared step once.
"""

from clusterable.evaluate.neighbors import faiss_available, iter_knn, knn_search
from clusterable.evaluate.partition_metrics import (
    Contingency,
    ari,
    cluster_accuracy,
    contingency_table,
    nmi,
    pairwise_f1,
    v_measure,
)
from clusterable.evaluate.registry import (
    available_metrics,
    metric_of_key,
    register_metric,
    table_keys,
)
from clusterable.evaluate.retrieval import (
    knn_accuracy,
    map_at_r,
    precision_at_1,
    r_precision,
    recall_at_k,
)
from clusterable.evaluate.silhouette import silhouette
from clusterable.evaluate.table import evaluate_embeddings

__all__ = [
    "Contingency",
    "ari",
    "available_metrics",
    "cluster_accuracy",
    "contingency_table",
    "evaluate_embeddings",
    "faiss_available",
    "iter_knn",
    "knn_accuracy",
    "knn_search",
    "map_at_r",
    "metric_of_key",
    "nmi",
    "pairwise_f1",
    "precision_at_1",
    "r_precision",
    "recall_at_k",
    "register_metric",
    "silhouette",
    "table_keys",
    "v_measure",
]
