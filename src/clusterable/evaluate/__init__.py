"""Retrieval and clustering metrics for embeddings, and the whole table in one call.

Inputs are numpy arrays or torch tensors, validated once by the public function called. Retrieval
metrics use one exact, chunked kNN search (`neighbors`); partition metrics use one sparse
contingency table (`partition_metrics`). `evaluate_embeddings` computes any set of the metrics its
modules register (`registry`), each shared step once, and returns an `Evaluation`: the scores
and the partition they were computed on (`ScoredPartition`, k-means by `kmeans_rule`, the rule
the command line's ``cluster`` uses too). `verification` chooses a distance threshold for "same or
not" (`select_threshold`) and computes FNMR@FMR from pair distances (`fnmr_at_fmr`);
`pair_scores` computes ROC AUC and FNMR@FMR over every pair of a set exactly, without storing
the pairs (the table's ``roc_auc`` and ``fnmr@fmr=EPS``).
"""

from clusterable.evaluate.clustering import (
    ScoredPartition,
    describe_clustering,
    describe_kmeans,
    kmeans_rule,
)
from clusterable.evaluate.knn_classification import knn_accuracy
from clusterable.evaluate.neighbors import faiss_available, iter_knn, knn_search
from clusterable.evaluate.pair_metrics import PairScores, pair_scores
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
    partition_metric_names,
    register_metric,
    table_keys,
)
from clusterable.evaluate.retrieval import (
    map_at_r,
    precision_at_1,
    r_precision,
    recall_at_k,
)
from clusterable.evaluate.silhouette import silhouette
from clusterable.evaluate.table import Evaluation, EvaluationOptions, evaluate_embeddings
from clusterable.evaluate.verification import (
    ThresholdChoice,
    VerificationCurve,
    fnmr_at_fmr,
    select_threshold,
)

__all__ = [
    "Contingency",
    "Evaluation",
    "EvaluationOptions",
    "PairScores",
    "ScoredPartition",
    "ThresholdChoice",
    "VerificationCurve",
    "ari",
    "available_metrics",
    "cluster_accuracy",
    "contingency_table",
    "describe_clustering",
    "describe_kmeans",
    "evaluate_embeddings",
    "faiss_available",
    "fnmr_at_fmr",
    "iter_knn",
    "kmeans_rule",
    "knn_accuracy",
    "knn_search",
    "map_at_r",
    "metric_of_key",
    "nmi",
    "pair_scores",
    "pairwise_f1",
    "partition_metric_names",
    "precision_at_1",
    "r_precision",
    "recall_at_k",
    "register_metric",
    "select_threshold",
    "silhouette",
    "table_keys",
    "v_measure",
]
