"""Scores of a partition against class labels, all from one sparse contingency table.

Every metric here needs only the non-zero cells of the class x cluster table and its margins, which
cost ``O(n log n)`` to build and ``O(cells)`` to use: never an ``n x n`` pair matrix, never a dense
``classes x clusters`` table at Stanford-Online-Products scale (11,316 x 11,316). The information
quantities follow scikit-learn's ``mutual_info_score`` operation for operation, on the table as it
is (to the last bit, without its input checks); the pair counts (ARI, pairwise F1) and the matching
are computed here, as scikit-learn has no form of them that takes a table (its
``adjusted_rand_score`` would build a second one).

Noise: cluster id -1 (from `clusterable.cluster.aas`) makes each such item its own singleton cluster
(see `clusterable.evaluate._inputs.as_clusters`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from scipy import sparse
from scipy.optimize import linear_sum_assignment
from scipy.sparse.csgraph import min_weight_full_bipartite_matching

from clusterable.evaluate._inputs import as_clusters, as_labels, to_numpy
from clusterable.evaluate.registry import Artefacts, register_metric

#: Largest ``classes * clusters`` solved densely by `linear_sum_assignment` (32 MB of float64);
#: above it the sparse matching (LAPJVsp) runs on the non-zero cells only.
DENSE_ASSIGNMENT_LIMIT = 1 << 22


@dataclass(frozen=True)
class Contingency:
    """Sparse class x cluster count table.

    Attributes
    ----------
    rows, cols : numpy.ndarray
        ``(cells,)`` class code and cluster code of each non-zero cell.
    counts : numpy.ndarray
        ``(cells,)`` int64 number of items in the cell.
    class_sizes : numpy.ndarray
        ``(C,)`` items per class.
    cluster_sizes : numpy.ndarray
        ``(K,)`` items per cluster.
    """

    rows: np.ndarray
    cols: np.ndarray
    counts: np.ndarray
    class_sizes: np.ndarray
    cluster_sizes: np.ndarray

    @property
    def n(self) -> int:
        """Number of items."""
        return int(self.class_sizes.sum())

    @cached_property
    def information(self) -> tuple[float, float, float]:
        """Mutual information, class entropy and cluster entropy (natural log), computed once."""
        return (
            _mutual_information(self.rows, self.cols, self.counts),
            _entropy(self.class_sizes),
            _entropy(self.cluster_sizes),
        )

    @cached_property
    def matching(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`hungarian_matching` of the table, solved once for every score that reads it."""
        return hungarian_matching(self)


def contingency_from_codes(codes: np.ndarray, cluster_codes: np.ndarray) -> Contingency:
    """The table of `contingency_table` from validated, compact ``(n,)`` class and cluster codes."""
    n_clusters = int(cluster_codes.max()) + 1
    cells, counts = np.unique(codes * n_clusters + cluster_codes, return_counts=True)
    return Contingency(
        rows=cells // n_clusters,
        cols=cells % n_clusters,
        counts=counts.astype(np.int64),
        class_sizes=np.bincount(codes),
        cluster_sizes=np.bincount(cluster_codes),
    )


def contingency_table(labels: Any, clusters: Any) -> Contingency:
    """Build the sparse contingency table of class labels against cluster ids.

    Parameters
    ----------
    labels : array-like
        ``(n,)`` class labels (numpy or torch).
    clusters : array-like
        ``(n,)`` int cluster ids; -1 marks noise, each such item a singleton cluster.
    """
    raw = to_numpy(labels, "labels")
    codes, _ = as_labels(raw, raw.shape[0] if raw.ndim else 0)
    if codes.size == 0:
        raise ValueError("labels is empty; pass at least one item.")
    return contingency_from_codes(codes, as_clusters(clusters, codes.shape[0]))


def _mutual_information(rows: np.ndarray, cols: np.ndarray, counts: np.ndarray) -> float:
    """Mutual information (natural log) of the table with these non-zero cells, sorted by row
    then column and never repeated.

    The arithmetic of scikit-learn's ``mutual_info_score(contingency=...)``, operation for
    operation and so to the last bit (tested against it), without its input checks: they took
    1.3 ms of an evaluation's three calls and, on a process's first call, 5-17 ms (scikit-learn
    1.9's ``check_array`` looks up every installed package's entry points for dataframe
    libraries; benchmarks/README.md, "Evaluation").
    """
    counts = counts.astype(np.int64, copy=False)
    # Margins as integers (sums of counts stay exact in float64 below 2**53).
    class_sizes = np.bincount(rows, counts, int(rows[-1]) + 1).astype(np.int64)
    cluster_sizes = np.bincount(cols, counts, int(cols.max()) + 1).astype(np.int64)
    # One group on either side: no information (scikit-learn's early return).
    if class_sizes.size == 1 or cluster_sizes.size == 1:
        return 0.0
    total = class_sizes.sum()
    log_counts = np.log(counts)
    shares = counts / total
    outer = class_sizes.take(rows) * cluster_sizes.take(cols)  # int64: exact
    log_outer = -np.log(outer) + math.log(class_sizes.sum()) + math.log(cluster_sizes.sum())
    terms = shares * (log_counts - math.log(total)) + shares * log_outer
    terms = np.where(np.abs(terms) < np.finfo(terms.dtype).eps, 0.0, terms)
    return float(np.clip(terms.sum(), 0.0, None))


def _entropy(sizes: np.ndarray) -> float:
    """Entropy of a partition with these group sizes, as ``I(X; X) = H(X)``: computed by the same
    scikit-learn arithmetic as the mutual information, so clusters equal to the classes score an
    NMI of exactly 1 (a renamed copy can differ in the last bit: the sums run in another order)."""
    groups = np.arange(sizes.size)
    return _mutual_information(groups, groups, sizes)


def nmi_from_table(t: Contingency) -> float:
    """NMI of a contingency table; see `nmi`."""
    mi, h_classes, h_clusters = t.information
    if h_classes == 0.0 and h_clusters == 0.0:
        return 1.0  # one class and one cluster: identical partitions
    return min(mi / ((h_classes + h_clusters) / 2.0), 1.0)


def nmi(labels: Any, clusters: Any) -> float:
    """Normalised mutual information with the arithmetic-mean normaliser.

    ``NMI = I(classes; clusters) / ((H(classes) + H(clusters)) / 2)``, natural logarithms. Equal to
    scikit-learn's ``normalized_mutual_info_score(labels, clusters)`` (its default normaliser) and
    to the V-measure.

    Parameters
    ----------
    labels : array-like
        ``(n,)`` class labels.
    clusters : array-like
        ``(n,)`` cluster ids; -1 is noise, each noise item a singleton cluster.

    Returns
    -------
    float
        In [0, 1]; 1 when both sides hold a single group.

    References
    ----------
    Strehl and Ghosh, "Cluster Ensembles", JMLR 2002; Vinh, Epps and Bailey, "Information
    Theoretic Measures for Clusterings Comparison", JMLR 2010.

    Examples
    --------
    Cluster ids are names only: the same partition under other ids scores 1.

    >>> nmi([0, 0, 1, 1, 2, 2], [1, 1, 0, 0, 2, 2])
    1.0
    """
    return nmi_from_table(contingency_table(labels, clusters))


def _pairs(counts: np.ndarray) -> int:
    """``sum C(c, 2)`` as a Python int, so that products of pair counts cannot overflow."""
    counts = counts.astype(np.int64)
    return int((counts * (counts - 1) // 2).sum())


def pairwise_f1_from_table(t: Contingency) -> tuple[float, float, float]:
    """Pairwise precision, recall and F1 of a contingency table; see `pairwise_f1`."""
    same_both = _pairs(t.counts)
    same_cluster = _pairs(t.cluster_sizes)
    same_class = _pairs(t.class_sizes)
    # An empty denominator means no pair was claimed (or none exists): nothing is wrong, score 1.
    precision = same_both / same_cluster if same_cluster else 1.0
    recall = same_both / same_class if same_class else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def pairwise_f1(labels: Any, clusters: Any) -> tuple[float, float, float]:
    """Pairwise precision, recall and F1 over all unordered pairs of items.

    A pair is a true positive when its two items share both a cluster and a class. With ``n_ij``
    the contingency counts, ``a_i`` the class sizes and ``b_j`` the cluster sizes:
    ``TP = sum C(n_ij, 2)``, ``precision = TP / sum C(b_j, 2)``, ``recall = TP / sum C(a_i, 2)``;
    computed in ``O(n log n)``, not over the ``n^2`` pairs. A ratio with no pair in its denominator
    is 1 (no pair claimed, so none wrongly); F1 is 0 when precision and recall are both 0.

    Returns
    -------
    tuple of float
        ``(precision, recall, f1)``, each in [0, 1].

    References
    ----------
    Manning, Raghavan and Schütze, "Introduction to Information Retrieval", 2008, Sec. 16.3;
    Oh Song et al., "Deep Metric Learning via Lifted Structured Feature Embedding", CVPR 2016.

    Examples
    --------
    One cluster holding two classes keeps every same-class pair together (recall 1), but 4 of
    the 7 pairs the clusters claim join different classes (precision 3/7):

    >>> precision, recall, f1 = pairwise_f1([0, 0, 1, 1, 2, 2], [0, 0, 0, 0, 1, 1])
    >>> round(precision, 4), recall, round(f1, 4)
    (0.4286, 1.0, 0.6)
    """
    return pairwise_f1_from_table(contingency_table(labels, clusters))


def _sparse_assignment(t: Contingency) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-weight class-to-cluster matching on the non-zero cells only.

    ``min_weight_full_bipartite_matching`` needs a perfect matching to exist, which the sparse table
    alone may lack. The graph is padded to (classes + clusters) on each side: class i may go to its
    own dummy column, cluster j to its own dummy row, and dummy row j may meet dummy column i
    wherever cell (i, j) is non-zero. Every edge costs ``W`` minus its count (``W`` = largest count
    + 1, keeping costs positive, as the solver reads zeros as missing edges), so any perfect
    matching costs ``W (C + K) - sum(matched counts)``: its minimum is the maximum-weight matching.
    """
    n_classes, n_clusters = t.class_sizes.size, t.cluster_sizes.size
    w = int(t.counts.max()) + 1
    class_ids, cluster_ids = np.arange(n_classes), np.arange(n_clusters)
    rows = np.concatenate([t.rows, class_ids, n_classes + cluster_ids, n_classes + t.cols])
    cols = np.concatenate([t.cols, n_clusters + class_ids, cluster_ids, n_clusters + t.rows])
    cost = np.concatenate([w - t.counts, np.full(n_classes + n_clusters + t.counts.size, w)])
    size = n_classes + n_clusters
    graph = sparse.csr_matrix((cost.astype(np.float64), (rows, cols)), shape=(size, size))
    row_ind, col_ind = min_weight_full_bipartite_matching(graph)
    real = (row_ind < n_classes) & (col_ind < n_clusters)
    return row_ind[real], col_ind[real]


def hungarian_matching(t: Contingency) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One-to-one class-to-cluster map maximising the items they share.

    Returns
    -------
    classes, clusters : numpy.ndarray
        Matched class codes and cluster codes (at most ``min(C, K)`` pairs; pairs sharing no item
        are dropped).
    shared : numpy.ndarray
        Items in each matched pair.
    """
    n_classes, n_clusters = t.class_sizes.size, t.cluster_sizes.size
    if n_classes * n_clusters <= DENSE_ASSIGNMENT_LIMIT:
        dense = np.zeros((n_classes, n_clusters), dtype=np.int64)
        dense[t.rows, t.cols] = t.counts
        classes, clusters = linear_sum_assignment(dense, maximize=True)
        shared = dense[classes, clusters]
    else:
        classes, clusters = _sparse_assignment(t)
        # Cells come from a sorted `np.unique` of class * K + cluster, so they can be searched.
        cells = t.rows * n_clusters + t.cols
        wanted = classes * n_clusters + clusters
        at = np.minimum(np.searchsorted(cells, wanted), cells.size - 1)
        shared = np.where(cells[at] == wanted, t.counts[at], 0)
    keep = shared > 0
    return classes[keep], clusters[keep], shared[keep]


def cluster_accuracy_from_table(t: Contingency) -> float:
    """Hungarian clustering accuracy of a contingency table; see `cluster_accuracy`."""
    return float(t.matching[2].sum() / t.n)


def cluster_accuracy(labels: Any, clusters: Any) -> float:
    """Clustering accuracy under the best one-to-one map of clusters to classes (Hungarian).

    Works for any numbers of classes and clusters: with more clusters than classes the extra
    clusters' items count as errors, and likewise for extra classes.

    Returns
    -------
    float
        In [0, 1].

    References
    ----------
    Kuhn, "The Hungarian method for the assignment problem", 1955; Xie, Girshick and Farhadi,
    "Unsupervised Deep Embedding for Clustering Analysis", ICML 2016 (the ACC metric).

    Examples
    --------
    A cluster that merges two classes is matched to one of them: the other's items are errors.

    >>> cluster_accuracy([0, 0, 1, 1, 2, 2], [0, 0, 0, 0, 1, 1])
    0.6666666666666666
    """
    return cluster_accuracy_from_table(contingency_table(labels, clusters))


def ari_from_table(t: Contingency) -> float:
    """Adjusted Rand index of a contingency table; see `ari`."""
    n = t.n
    same_both = _pairs(t.counts)
    same_class, same_cluster = _pairs(t.class_sizes), _pairs(t.cluster_sizes)
    total = n * (n - 1) // 2
    if same_class == same_cluster == same_both:
        return 1.0  # no pair disagrees (includes both-all-singletons and both-one-group)
    # Python ints keep the product exact: it exceeds int64 beyond n ~ 77,000.
    expected = same_class * same_cluster / total
    return float((same_both - expected) / ((same_class + same_cluster) / 2 - expected))


def ari(labels: Any, clusters: Any) -> float:
    """Adjusted Rand index (Hubert and Arabie 1985).

    ``(RI - E[RI]) / (max RI - E[RI])`` in its pair-count form. Equals scikit-learn's
    ``adjusted_rand_score``. Not confined to [0, 1]: it is 0 in expectation for a random partition
    and can be negative (down to -0.5).

    References
    ----------
    Hubert and Arabie, "Comparing partitions", Journal of Classification, 1985.
    """
    return ari_from_table(contingency_table(labels, clusters))


def v_measure_from_table(t: Contingency) -> float:
    """V-measure of a contingency table; see `v_measure`."""
    # 2 h c / (h + c) with h = I / H(classes), c = I / H(clusters) is I / ((H(classes) +
    # H(clusters)) / 2), the NMI, in every case (both 1 when an entropy is 0 and the other too).
    return nmi_from_table(t)


def v_measure(labels: Any, clusters: Any) -> float:
    """V-measure: the harmonic mean of homogeneity and completeness (beta = 1).

    Equals scikit-learn's ``v_measure_score``, and NMI with the arithmetic normaliser (`nmi`), so
    the evaluation table shows it only when asked by name (``metrics=[..., "v_measure"]``).

    Returns
    -------
    float
        In [0, 1].

    References
    ----------
    Rosenberg and Hirschberg, "V-Measure: A conditional entropy-based external cluster evaluation
    measure", EMNLP 2007.
    """
    return v_measure_from_table(contingency_table(labels, clusters))


def _table_of(a: Artefacts) -> Contingency:
    """The evaluation's contingency table, which every metric that needs ``"partition"`` has."""
    assert a.table is not None, "a partition metric ran without the partition"
    return a.table


@register_metric("nmi", needs={"partition"}, label="NMI (clusters)")
def _table_nmi(a: Artefacts) -> float:
    return nmi_from_table(_table_of(a))


# "pairwise" in the labels: the table's pairwise precision and recall are not precision@1 or
# Recall@1.
@register_metric("precision", needs={"partition"}, label="pairwise precision (clusters)")
def _table_pairwise_precision(a: Artefacts) -> float:
    return pairwise_f1_from_table(_table_of(a))[0]


@register_metric("recall", needs={"partition"}, label="pairwise recall (clusters)")
def _table_pairwise_recall(a: Artefacts) -> float:
    return pairwise_f1_from_table(_table_of(a))[1]


@register_metric("f1", needs={"partition"}, label="pairwise F1 (clusters)")
def _table_pairwise_f1(a: Artefacts) -> float:
    return pairwise_f1_from_table(_table_of(a))[2]


@register_metric("accuracy", needs={"partition"}, label="Hungarian accuracy (clusters)")
def _table_cluster_accuracy(a: Artefacts) -> float:
    return cluster_accuracy_from_table(_table_of(a))


@register_metric("ari", needs={"partition"}, label="ARI (clusters)")
def _table_ari(a: Artefacts) -> float:
    return ari_from_table(_table_of(a))


@register_metric("v_measure", needs={"partition"}, default=False, label="V-measure (clusters)")
def _table_v_measure(a: Artefacts) -> float:
    return v_measure_from_table(_table_of(a))
