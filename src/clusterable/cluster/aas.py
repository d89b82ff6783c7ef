"""Authority Ascent Shift (AAS): mode-seeking on a kNN graph, as the OPML paper uses it.

Every point climbs the authority (the stationary distribution of a random walk on the graph) one
relevant neighbour at a time; the points that reach the same authority mode form a cluster, and
clusters of little total authority are noise.

Choices the paper leaves open, made here (see :func:`aas` for the reasons):

- the kNN graph is symmetrised by union, so the authority has the closed form ``d_i / sum(d)``;
- ``delta_max`` in the edge weights is the longest kNN edge;
- the authority gap in the node relevancy is measured on ``omega / max(omega)``;
- a move needs a strictly higher authority (ties between neighbours: smallest index), and modes
  at the same location (duplicate points) are merged into one cluster.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import scipy.sparse as sp

from clusterable.cluster._validation import Rescaling
from clusterable.cluster.partition import NeighbourVotePartition
from clusterable.cluster.registry import Clusterer, register_clusterer, run_clustering

#: Below this many points, clusters of one point say little, and :class:`SingletonClustersWarning`
#: stays silent.
SINGLETON_WARNING_MIN_POINTS = 10


class SingletonClustersWarning(UserWarning):
    """AAS left most points in clusters of their own (see :func:`singleton_clusters_reason`)."""


#: Up to this dimension a k-d tree finds exact neighbours faster than faiss's brute force
#: (benchmarks/README.md, "Measured defaults").
KD_TREE_MAX_DIM = 8


def knn_graph(points: np.ndarray, k_graph: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``k_graph`` nearest neighbours of every point, the point itself excluded.

    The point is removed by index, not by assuming it comes first: with duplicate points the
    search may list a twin before the point itself.

    Parameters
    ----------
    points : np.ndarray
        ``(n, d)`` float64 points; above `KD_TREE_MAX_DIM` dimensions faiss (the optional
        ``faiss`` extra; scikit-learn's brute force without it) searches them in float32, so they
        should be centred and of moderate scale (``rescaled``).
    k_graph : int
        Neighbours per point, ``1 <= k_graph < n``.

    Returns
    -------
    neighbours : np.ndarray
        ``(n, k_graph)`` int64 neighbour indices.
    squared_distances : np.ndarray
        ``(n, k_graph)`` float64 squared Euclidean distances, clipped at 0.
    """
    from sklearn.neighbors import NearestNeighbors

    n, d = points.shape
    if d <= KD_TREE_MAX_DIM:
        distances, neighbours = (
            NearestNeighbors(n_neighbors=k_graph + 1, algorithm="kd_tree")
            .fit(points)
            .kneighbors(points)
        )
        squared = distances**2
    else:
        squared, neighbours = _brute_force_knn(points, k_graph + 1)  # (n, k_graph + 1) each
    is_self = neighbours == np.arange(n)[:, None]
    # Rows where the point was pushed out by k_graph + 1 twins drop their last (farthest) neighbour.
    is_self[~is_self.any(axis=1), -1] = True
    keep = ~is_self
    neighbours = neighbours[keep].reshape(n, k_graph).astype(np.int64)
    squared = np.maximum(squared[keep].reshape(n, k_graph).astype(np.float64), 0.0)
    return neighbours, squared


def _brute_force_knn(points: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n, k)`` squared distances and neighbours of every point, in float32: faiss (the
    optional ``faiss`` extra) when installed, scikit-learn's brute force otherwise."""
    from sklearn.neighbors import NearestNeighbors

    single = np.ascontiguousarray(points, dtype=np.float32)  # (n, d)
    try:
        import faiss
    except ImportError:
        search = NearestNeighbors(n_neighbors=k, algorithm="brute").fit(single)
        distances, neighbours = search.kneighbors(single)
        return distances.astype(np.float64) ** 2, neighbours
    index = faiss.IndexFlatL2(single.shape[1])
    index.add(single)
    return index.search(single, k)


def aas(
    x: np.ndarray,
    k_graph: int = 50,
    gamma: float = 100.0,
    eps: float = 0.65,
    theta_min: float = 0.0,
) -> np.ndarray:
    """Cluster points with Authority Ascent Shift on a kNN graph; -1 marks noise.

    1. kNN graph with edge weights ``W_ij = exp(-2 c^2 delta_ij^2 / delta_max^2)``, ``c = 1``,
       symmetrised by union (an edge exists if either point is among the other's neighbours).
       ``delta_max`` is the longest kNN edge. The paper says "the maximum distance among all the
       pairs"; over all pairs of a t-SNE map (the paper's input) every kNN edge is much shorter
       than the diameter, so every weight would be close to 1 and the authority would reduce to a
       neighbour count; the longest graph edge keeps the kernel informative, costs O(n k) instead
       of O(n^2) and is what the graph itself can see.
    2. Random walk ``T = D^-1 W`` with degrees ``d_i = sum_j W_ij``. Its stationary distribution,
       the authority, is ``omega_i = d_i / sum_j d_j`` exactly, because ``W`` is symmetric
       (detailed balance ``d_i T_ij = W_ij = d_j T_ji``); no power iteration is needed.
    3. Node relevancy, Eq. (1): ``psi(i, j) = d_i T_ij exp(-gamma (omega_j - omega_i)^2)``, where
       ``d_i T_ij = W_ij``. ``omega`` sums to 1, so for n = 1,200 its differences are ~1e-4 and
       the exponential would be 1 for any sensible ``gamma``: ``gamma`` and ``eps`` would do
       nothing (the paper's Tables II-III show that they do). The authority gap is therefore
       measured relative to the peak, on ``omega / max(omega)`` (in [0, 1], independent of n):
       with ``gamma = 100`` and ``eps = 0.65`` a neighbour is relevant when the authority gap is
       below ~6.6 % of the peak authority (for ``W_ij`` close to 1). Since ``psi <= 1``,
       ``eps >= 1`` leaves every point alone, the degeneracy the paper warns about.
    4. Relevant neighbours, Eq. (2): ``N_eps(i) = {j : psi(i, j) > eps} + {i}``.
    5. Authority ascent: ``i`` moves to ``argmax_{j in N_eps(i)} T_ij (omega_j - omega_i)``, which
       is ``i`` itself (value 0) when no relevant neighbour has a strictly higher authority; ties
       between neighbours go to the smaller index. Authority strictly increases along every move,
       so there are no cycles.
    6. Following the moves to their end (pointer jumping, O(log depth) vectorised passes) gives
       each point its authority mode; points sharing a mode form a cluster.
    7. Clusters whose summed authority is below ``theta_min`` percent of the total are noise.

    Exact copies are one node of the graph that stands for all of them, so they always share a
    cluster (on the copies themselves, ties between twins sent some copies up other paths than
    their originals). The node of a point with ``c`` copies has the degree of any one copy: its
    edges to the other nodes, each weighted by the copies there, plus weight 1 (``exp(0)``) to
    each of its own ``c - 1`` twins; its authority counts ``c`` times in its cluster's. The graph
    is the ``k_graph`` nearest distinct points of each distinct point. On points without copies
    this is exactly the algorithm above.

    Every step depends on distances only through ``delta_ij / delta_max`` and on the authority
    only through ratios, so the clusters do not change when all points are moved or scaled by one
    factor. The graph is therefore built on the points centred and scaled into ``[-1, 1]``:
    faiss's float32 squared distances would overflow near 1e19, vanish near 1e-20 and lose the
    spread of points far from the origin.

    Parameters
    ----------
    x : array-like of shape (n, d)
        Points; the paper runs AAS on a 2-D t-SNE map of the features.
    k_graph : int
        Neighbours per (distinct) point in the kNN graph (capped at the distinct points less
        one). The paper uses 50, and 500 for MNIST (1,000 points per class); it advises about
        half the points per class.
    gamma : float
        Scale of the authority gap in the node relevancy, Eq. (1). Paper: 100 (or 1,000).
    eps : float
        Node-relevancy threshold, Eq. (2). Paper: 0.65 without noise removal, or 0.9 with
        ``theta_min`` in {1, 5}.
    theta_min : float
        Noise threshold in percent of the total authority, in [0, 100]; 0 keeps every cluster.

    Returns
    -------
    np.ndarray
        ``(n,)`` int64 cluster ids: ``0, 1, ...`` by decreasing cluster authority, -1 for noise.

    Raises
    ------
    ValueError
        If ``x`` is not 2-D or not finite, or a parameter is out of range.

    References
    ----------
    U. K. Dutta, M. Harandi and C. C. Sekhar, "Unsupervised Deep Metric Learning via
    Orthogonality based Probabilistic Loss", IEEE Trans. Artificial Intelligence, 2020:
    Section III, Eqs. (1) and (2); Section V-A (edge weights, ``theta_min``, Fig. 5, Tables I-IV).
    M. Cho and K. M. Lee, "Mode-seeking on graphs via random walks", CVPR 2012.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.normal(0, 0.3, (100, 2)), rng.normal(5, 0.3, (100, 2))])
    >>> labels = aas(x, k_graph=30)
    >>> len(set(labels[:100]) & set(labels[100:]))
    0
    """
    return run_clustering(x, "aas", k_graph=k_graph, gamma=gamma, eps=eps, theta_min=theta_min)


@register_clusterer("aas", takes_n_clusters=False, seeded=False, label="AAS")
class AASClusterer(Clusterer):
    """:func:`aas` as a registered estimator; its partition gives a new point the majority
    cluster of its `VOTE_NEIGHBOURS` nearest fitted points, noise beyond the longest edge of the
    kNN graph, and to a point equal bit for bit to a fitted point that point's label
    (`clusterable.cluster.partition.NeighbourVotePartition`)."""

    def __init__(
        self,
        n_clusters: None = None,
        seed: int = 0,
        *,
        k_graph: int = 50,
        gamma: float = 100.0,
        eps: float = 0.65,
        theta_min: float = 0.0,
    ) -> None:
        super().__init__(n_clusters, seed)
        if isinstance(k_graph, bool) or not isinstance(k_graph, numbers.Integral) or k_graph < 1:
            raise ValueError(f"k_graph must be a positive integer, got {k_graph!r}")
        if not gamma >= 0.0:
            raise ValueError(f"gamma must be >= 0, got {gamma!r}")
        if not eps >= 0.0:
            raise ValueError(f"eps must be >= 0, got {eps!r}")
        if not 0.0 <= theta_min <= 100.0:
            raise ValueError(
                f"theta_min is a percentage of the total authority in [0, 100], got {theta_min!r}"
            )
        self.k_graph: int = int(k_graph)
        self.gamma: float = gamma
        self.eps: float = eps
        self.theta_min: float = theta_min

    def cluster(self, points: np.ndarray) -> np.ndarray:
        return self._fit(Rescaling.of(points).apply(points))[0]

    def partition(self, points: np.ndarray, frame: Rescaling) -> NeighbourVotePartition:
        z = frame.apply(points)  # (n, d)
        labels, reach = self._fit(z)
        return NeighbourVotePartition(labels_=labels, rescaling=frame, reference=z, reach=reach)

    def _fit(self, z: np.ndarray) -> tuple[np.ndarray, float]:
        """Labels of the rescaled points ``z`` and the longest edge of their kNN graph."""
        n = z.shape[0]
        # Distinct points in the order of their first copy: without copies, the points as given.
        _, first, location, copies = np.unique(
            z, axis=0, return_index=True, return_inverse=True, return_counts=True
        )
        order = np.argsort(first)
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        location, copies, distinct = rank[location.ravel()], copies[order], z[np.sort(first)]
        m = distinct.shape[0]
        if m == 1:
            return np.zeros(n, dtype=np.int64), 0.0
        k_graph = min(self.k_graph, m - 1)
        neighbours, squared = knn_graph(distinct, k_graph)
        longest = float(squared.max())
        # Distinct points at distance 0 in float32 (faiss): every edge has the largest weight.
        weights = np.exp(-2.0 * squared / longest) if longest > 0.0 else np.ones_like(squared)
        rows = np.repeat(np.arange(m), k_graph)
        directed = sp.csr_matrix((weights.ravel(), (rows, neighbours.ravel())), shape=(m, m))
        graph = directed.maximum(directed.T).tocsr()  # W, union symmetrisation

        mode, authority = authority_modes(graph, gamma=self.gamma, eps=self.eps, copies=copies)
        modes, cluster = np.unique(mode, return_inverse=True)
        cluster_authority = np.bincount(cluster, weights=authority * copies, minlength=modes.size)
        is_noise = cluster_authority < self.theta_min / 100.0 * cluster_authority.sum()
        # Number kept clusters by decreasing authority (stable: ties by first point); noise -1.
        kept = np.argsort(-cluster_authority, kind="stable")
        kept = kept[~is_noise[kept]]
        new_id = np.full(modes.size, -1, dtype=np.int64)
        new_id[kept] = np.arange(kept.size)
        labels = new_id[cluster][location]
        reason = singleton_clusters_reason(labels, self.eps)
        if reason is not None:
            warnings.warn(reason, SingletonClustersWarning, stacklevel=2)
        return labels, float(np.sqrt(longest))


def singleton_clusters_reason(labels: np.ndarray, eps: float) -> str | None:
    """Why AAS left more than half of (at least `SINGLETON_WARNING_MIN_POINTS`) points alone in
    a cluster, and what to do; None otherwise.

    A neighbour is relevant only where ``psi(i, j) > eps`` (Eq. 2), and ``psi <= W_ij =
    exp(-2 delta_ij^2 / delta_max^2)``: only an edge shorter than ``sqrt(-ln(eps) / 2)`` of the
    longest kNN edge (0.46 for ``eps = 0.65``) can join a point to a cluster. Distances between
    high-dimensional points are nearly equal, so few of their edges are that short, and with the
    paper's defaults nearly every point stays a cluster of its own (200 points of 5 Gaussian
    blobs in 16-d: 189 clusters; on their 2-D t-SNE map: 8). The paper runs AAS on such a map.
    """
    n = labels.size
    sizes = np.bincount(labels[labels >= 0])
    alone = int((sizes == 1).sum())
    if n < SINGLETON_WARNING_MIN_POINTS or 2 * alone <= n:
        return None
    if eps >= 1.0:
        why = f"eps = {eps:g} is 1 or more, and no neighbour's relevancy (at most 1) exceeds it"
    else:
        reach = math.sqrt(-math.log(eps) / 2.0) if eps > 0.0 else math.inf
        why = (
            f"a neighbour joins a point's cluster only when exp(-2 d^2 / d_max^2) > eps = "
            f"{eps:g}, i.e. closer than {reach:.2f} of the longest kNN edge, which the "
            "near-equal distances of high-dimensional points rarely allow"
        )
    return (
        f"AAS left {alone} of {n} points in clusters of their own: {why}; the paper clusters a "
        "2-D t-SNE map of the features (clusterable.tsne.tsne_map), or lower eps (e.g. eps=0.3; "
        "on the command line --clustering-arg eps=0.3)"
    )


def authority_modes(
    graph: sp.spmatrix | sp.sparray, gamma: float, eps: float, copies: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Authority mode of every node of a weighted undirected graph (AAS steps 2-6).

    Parameters
    ----------
    graph : scipy.sparse matrix of shape (n, n)
        Symmetric non-negative edge weights ``W`` without self-loops; every node needs an edge.
    gamma, eps : float
        Node-relevancy scale and threshold, Eqs. (1) and (2); see :func:`aas`.
    copies : np.ndarray, optional
        ``(n,)`` how many coincident points each node stands for (1 each by default): a node's
        degree is that of one of its copies, ``sum_j copies_j W_ij + copies_i - 1``.

    Returns
    -------
    mode : np.ndarray
        ``(n,)`` int64 index of the node each node ascends to (a mode is its own mode).
    authority : np.ndarray
        ``(n,)`` float64 authority of one copy of each node, ``omega = d / sum(copies * d)``
        (the stationary distribution of ``T = D^-1 W`` over the copies).

    References
    ----------
    U. K. Dutta, M. Harandi and C. C. Sekhar, "Unsupervised Deep Metric Learning via
    Orthogonality based Probabilistic Loss", IEEE TAI 2020, Section III, Eqs. (1)-(2).
    """
    # scipy-stubs type csr_matrix's input as a concrete format; any sparse matrix works.
    csr: sp.csr_matrix = sp.csr_matrix(graph, dtype=np.float64)  # type: ignore[call-overload]
    csr.sort_indices()
    n = csr.shape[0]
    copies = np.ones(n) if copies is None else np.asarray(copies, dtype=np.float64)
    degree = csr @ copies + (copies - 1.0)  # d_i of one copy: its twins at weight exp(0) = 1
    if not (degree > 0.0).all():
        raise ValueError("every node needs at least one edge of positive weight")
    # omega, exact for symmetric W (detailed balance)
    authority = degree / (copies * degree).sum()
    relative_authority = degree / degree.max()  # omega / max(omega): the scale of gamma

    source = np.repeat(np.arange(n), np.diff(csr.indptr))  # i of each edge (i, j)
    target = csr.indices  # j
    relevancy = csr.data * np.exp(
        -gamma * (relative_authority[target] - relative_authority[source]) ** 2
    )  # psi(i, j) = d_i T_ij exp(-gamma grad^2), Eq. (1), with d_i T_ij = W_ij
    ascent = csr.data / degree[source] * (authority[target] - authority[source])
    # Only a relevant neighbour (Eq. 2) of strictly higher authority beats staying (value 0).
    candidate = (relevancy > eps) & (ascent > 0.0)
    value = np.where(candidate, ascent, -np.inf)
    row_best = np.maximum.reduceat(value, csr.indptr[:-1])
    is_best = candidate & (value == row_best[source])
    moving, first = np.unique(source[is_best], return_index=True)  # ties: smallest j
    parent = np.arange(n)
    parent[moving] = target[is_best][first]

    # Authority strictly increases along every move, so the pointers form a forest: jump to roots.
    while True:
        grandparent = parent[parent]
        if np.array_equal(grandparent, parent):
            return parent, authority
        parent = grandparent
