"""A saved search index over a gallery of embeddings: exact, or approximate for large galleries.

``EmbeddingIndex`` keeps the gallery's vectors with the items' ids and labels and answers "which
gallery items are nearest to these queries". The exact kind reuses the evaluation's kNN search
(`clusterable.evaluate.neighbors`: faiss when installed, torch otherwise, the same neighbours, ties
ordered by gallery row), so a saved index answers exactly what ``evaluate`` measured. The
approximate kinds are faiss's inverted lists (``"ivf"``) and HNSW graph (``"hnsw"``). Building one
widens its search until recall@10 against exact search reaches a target for a sample of gallery
items held out as new queries, then measures recall@10 for other held-out items and keeps it, so
the user sees what the speed costs.

A saved index is one checksummed ``.npz`` file written atomically (`clusterable.archive`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from clusterable._arrays import as_embeddings, label_kind, label_values
from clusterable._ranges import Bounds, check_bounds, check_seed
from clusterable.archive import load_archive, save_archive
from clusterable.classify import Classification, nearest_class_mean, neighbour_vote, rejected
from clusterable.evaluate._inputs import as_points
from clusterable.evaluate._keywords import refuse_renamed
from clusterable.evaluate.neighbors import faiss_available, knn_search

Distance = Literal["euclidean", "cosine"]
Kind = Literal["exact", "ivf", "hnsw"]
Method = Literal["knn", "class-mean"]


#: What `EmbeddingIndex.save` writes, and the version of its layout.
ARCHIVE_KIND = "clusterable search index"
FORMAT_VERSION = 1

#: Gallery items used as queries to tune an approximate index, and as many others to report its
#: recall@10 (the reported figure is never measured on the queries it was tuned on).
RECALL_SAMPLE = 1000

#: The recall@10 an approximate index may be asked to reach.
TARGET_RECALL = Bounds(0, 1, low_open=True)

#: Repeated ids a refused saved index names (`EmbeddingIndex.load`); more are counted.
_IDS_NAMED = 4

#: HNSW graph degree (faiss's ``M``).
HNSW_M = 32

#: Smallest search breadth tried: faiss's ``nprobe`` (IVF lists probed) or ``efSearch`` (HNSW).
#: It doubles until the tuning queries reach the target recall@10.
MIN_BREADTH = {"ivf": 8, "hnsw": 32}


@dataclass
class EmbeddingIndex:
    """Gallery embeddings with their ids and labels, searchable by nearest neighbour.

    Build with :meth:`build`, load with :meth:`load`; the constructor is the plain record.

    Attributes
    ----------
    vectors : np.ndarray
        ``(n, d)`` gallery embeddings, by the package's one embedding rule
        (`clusterable._arrays.as_embeddings`: float32 and float64 kept, other types converted).
    ids : np.ndarray
        ``(n,)`` item ids, int64 or strings (row numbers unless given; file paths, ...).
    labels : np.ndarray or None
        ``(n,)`` item labels, when known: int64 or strings (`clusterable._arrays.label_values`).
    distance : {"euclidean", "cosine"}
        Distance searched: Euclidean, or cosine distance ``1 - cos``.
    kind : {"exact", "ivf", "hnsw"}
        Exact search, or one of faiss's approximate indexes.
    model : str or None
        Identity of the model that embedded the gallery (a checksum of its weights), so that
        queries embedded by another model can be refused.
    run : str or None
        The training run folder whose model embedded the gallery.
    checkpoint : str or None
        The checkpoint folder of that model, whose weights ``clusterable search`` embeds image
        and table queries with (None: the run's best, as in files written before it was kept).
    recall_at_10 : float or None
        For approximate kinds, recall@10 against exact search measured when the index was built,
        for up to `RECALL_SAMPLE` gallery items held out of the index while it was measured (so
        they stand for new queries), other items than those the search breadth was tuned on;
        None for a gallery under 20 items, which is then searched exhaustively.
    search_breadth : int or None
        For approximate kinds, faiss's ``nprobe`` (IVF) or ``efSearch`` (HNSW): the smallest
        power-of-two multiple of `MIN_BREADTH` that reached ``target_recall`` on the tuning queries.
    """

    vectors: np.ndarray
    ids: np.ndarray
    labels: np.ndarray | None = None
    distance: Distance = "euclidean"
    kind: Kind = "exact"
    model: str | None = None
    run: str | None = None
    checkpoint: str | None = None
    recall_at_10: float | None = None
    search_breadth: int | None = None
    _faiss: Any = field(default=None, repr=False)
    #: ``(n,)`` gallery row of each faiss position (the held-out recall sample goes in last),
    #: None without faiss.
    _faiss_rows: Any = field(default=None, repr=False)

    @classmethod
    @refuse_renamed(metric="distance")
    def build(
        cls,
        embeddings: Any,
        ids: Sequence[Any] | np.ndarray | None = None,
        labels: Sequence[Any] | np.ndarray | None = None,
        distance: Distance = "euclidean",
        kind: Kind = "exact",
        *,
        model: str | None = None,
        run: str | None = None,
        checkpoint: str | None = None,
        target_recall: float = 0.95,
        seed: int = 0,
    ) -> EmbeddingIndex:
        """Index a gallery.

        Parameters
        ----------
        embeddings : array-like
            ``(n, d)`` gallery embeddings, numpy or torch, finite.
        ids : sequence, optional
            ``(n,)`` item ids (ints or strings); row numbers ``0 .. n-1`` by default.
        labels : sequence, optional
            ``(n,)`` item labels (ints or strings).
        distance : {"euclidean", "cosine"}
            Distance to search by (for cosine, no embedding may be all zeros). (Its former name
            ``metric=`` is refused, naming this one.)
        kind : {"exact", "ivf", "hnsw"}
            ``"exact"`` (default) searches every item. ``"ivf"`` (faiss ``IndexIVFFlat``, about
            ``4 sqrt(n)`` lists) and ``"hnsw"`` (faiss ``IndexHNSWFlat``) trade recall for speed on
            large galleries; both need faiss and report their measured recall@10.
        model : str, optional
            Identity of the embedding model (see :func:`model_checksum`).
        run : str, optional
            The run folder of that model.
        checkpoint : str, optional
            The checkpoint folder of that model.
        target_recall : float
            Recall@10 against exact search that an approximate index's search breadth is widened
            to reach (on gallery items as queries), as far as the kind allows; in ``(0, 1]``.
        seed : int
            Seed of the IVF training sample and of the tuning and recall samples, in
            ``[0, 2**32 - 1]``.

        Raises
        ------
        ValueError
            If an argument is out of its range, an id is given twice, or (cosine) an embedding
            is all zeros; before any work.

        Examples
        --------
        >>> import numpy as np
        >>> gallery = np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0]])
        >>> index = EmbeddingIndex.build(gallery, ids=["a", "b", "c"], labels=[0, 0, 1])
        >>> distances, rows, ids = index.search(np.array([[4.0, 4.0]]), k=2)
        >>> ids.tolist()
        [['c', 'b']]
        """
        distance = _check_choice(distance, ("euclidean", "cosine"), "distance")
        check_bounds(
            {"target_recall": target_recall},
            {"target_recall": TARGET_RECALL},
            "EmbeddingIndex.build",
            none_allowed=False,
        )
        check_seed(seed, "EmbeddingIndex.build")
        vectors = as_embeddings(embeddings, "embeddings")
        as_points(vectors, distance, "embeddings")  # cosine: no all-zero row
        item_ids = _as_ids(ids, vectors.shape[0], default=np.arange(vectors.shape[0]))
        _check_unique_ids(item_ids)
        index = cls(
            vectors=vectors,
            ids=item_ids,
            labels=None if labels is None else label_values(labels, vectors.shape[0]),
            distance=distance,
            kind=_check_choice(kind, ("exact", "ivf", "hnsw"), "kind"),
            model=model,
            run=run,
            checkpoint=checkpoint,
        )
        if index.kind != "exact":
            index._build_and_tune(target_recall, seed)
        return index

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        """Dimension ``d`` of the indexed embeddings."""
        return int(self.vectors.shape[1])

    def add(
        self,
        embeddings: Any,
        ids: Sequence[Any] | np.ndarray | None = None,
        labels: Sequence[Any] | np.ndarray | None = None,
    ) -> None:
        """Append items to the gallery (when not given, ids are numbers from one past the
        largest id).

        Raises
        ------
        ValueError
            If the dimension differs from the index's, (cosine) an embedding is all zeros,
            labels are given to an index built without them (or left out of one built with
            them), labels or ids are of another kind than the index's (numbers for strings, or
            strings for numbers), or an id is already in the index or given twice. Nothing
            changes if a check fails.
        """
        vectors = self._check_queries(embeddings, "embeddings")
        n_old, n_new = len(self), vectors.shape[0]
        first = int(self.ids.max()) + 1 if self.ids.dtype.kind == "i" else n_old
        new_ids = _as_ids(ids, n_new, default=np.arange(first, first + n_new))
        _check_same_kind(new_ids, self.ids, "ids")
        _check_unique_ids(new_ids, self.ids)
        if labels is None and self.labels is not None:
            raise ValueError("this index stores labels: pass labels= for the new items too")
        if labels is not None and self.labels is None:
            raise ValueError(
                "this index was built without labels; build a new one with labels= to store them"
            )
        if self.labels is not None:
            new_labels = label_values(labels, n_new)
            _check_same_kind(new_labels, self.labels, "labels")
            self.labels = np.concatenate([self.labels, new_labels])
        self.ids = np.concatenate([self.ids, new_ids])
        self.vectors = np.concatenate([self.vectors, vectors.astype(self.vectors.dtype)])
        if self._faiss is not None:
            self._faiss.add(np.ascontiguousarray(self._searchable(vectors), dtype=np.float32))
            self._faiss_rows = np.concatenate([self._faiss_rows, np.arange(n_old, n_old + n_new)])

    def search(
        self, queries: Any, k: int = 10, max_distance: float | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ``k`` gallery items nearest to each query.

        Parameters
        ----------
        queries : array-like
            ``(m, d)`` query embeddings, from the same model as the gallery.
        k : int
            Neighbours per query, ``1 <= k <= len(index)``.
        max_distance : float, optional
            Keep only neighbours at distance ``<= max_distance`` (compared with the returned
            distance); the others are reported as missing, as below. None keeps all k.

        Returns
        -------
        distances : np.ndarray
            ``(m, k)`` ascending (Euclidean distance, or ``1 - cos``): float32, or float64 from
            an exact index where the gallery or the queries are float64 (their precision kept).
        indices : np.ndarray
            ``(m, k)`` int64 gallery rows.
        ids : np.ndarray
            ``(m, k)`` the ids of those rows.

        An approximate index (``"ivf"``, ``"hnsw"``) may find fewer than ``k`` items for a query
        (the lists or the graph it searched hold fewer): each missing neighbour is row -1 at
        distance ``inf``, with id -1 (integer ids) or ``""`` (string ids), after the found ones;
        never a gallery row standing in for it. Neighbours farther than ``max_distance`` are
        marked missing the same way (they come last, since distances ascend), so a query may get
        fewer than ``k``, or none, with any kind of index.
        """
        q = self._check_queries(queries, "queries")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise ValueError(f"k must be a whole number of neighbours, got {k!r}")
        if not 1 <= k <= len(self):
            raise ValueError(
                f"k = {k!r} but the index holds {len(self)} items: choose 1 <= k <= {len(self)}"
            )
        _check_max_distance(max_distance)
        if self._faiss is None:
            distances, rows = knn_search(q, int(k), self.vectors, distance=self.distance)
        else:
            distances, rows = self._search_approximate(q, int(k))
        if max_distance is not None:
            too_far = distances > max_distance
            distances = np.where(too_far, distances.dtype.type(np.inf), distances)
            rows = np.where(too_far, -1, rows)
        ids = self.ids[rows]
        missing = rows < 0
        if missing.any():
            ids[missing] = "" if self.ids.dtype.kind == "U" else -1
        return distances, rows, ids

    def remove(self, ids: Sequence[Any] | np.ndarray) -> None:
        """Remove the gallery items of these ids (an id names one item: `build` and `add`
        refuse an id given twice; one named twice here is removed once).

        The remaining items keep their order, so their rows close up. An approximate index
        (``"ivf"``, ``"hnsw"``) re-adds the remaining items to its faiss structure (the IVF lists
        keep their training; the HNSW graph is rebuilt), keeping its search breadth; its
        ``recall_at_10`` stays the figure measured when it was built. Nothing changes if a check
        fails.

        Raises
        ------
        ValueError
            If an id is not in the index (the message names the first such id), or removing
            them would leave the index empty.
        """
        if np.ndim(ids) == 0:
            ids = [ids]
        wanted = label_values(ids, len(ids), "ids", what="id")
        unknown = ~np.isin(wanted, self.ids)
        if unknown.any():
            raise ValueError(
                f"id {wanted[unknown][0].item()!r} is not in this index; nothing was removed"
            )
        keep = ~np.isin(self.ids, wanted)
        if not keep.any():
            raise ValueError(
                "removing these ids would leave the index empty; build a new index instead"
            )
        faiss_index, faiss_rows = self._faiss, self._faiss_rows
        if self._faiss is not None:
            import faiss

            new_row = np.cumsum(keep) - 1
            faiss_rows = new_row[faiss_rows[keep[faiss_rows]]]
            faiss_index = faiss.clone_index(self._faiss)
            faiss_index.reset()  # IVF keeps its trained quantizer; HNSW starts a new graph
            vectors = self._searchable(self.vectors[keep][faiss_rows])
            faiss_index.add(np.ascontiguousarray(vectors, dtype=np.float32))
            _set_breadth(faiss_index, self.kind, self.search_breadth)
        self.vectors = self.vectors[keep]
        self.ids = self.ids[keep]
        if self.labels is not None:
            self.labels = self.labels[keep]
        self._faiss, self._faiss_rows = faiss_index, faiss_rows

    def classify(
        self,
        queries: Any,
        k: int = 10,
        weighting: Literal["uniform", "distance"] = "uniform",
        method: Method = "knn",
        max_distance: float | None = None,
    ) -> Classification:
        """The label of each query, by a vote of its ``k`` nearest gallery items or by the
        nearest class mean, with a confidence in ``[0, 1]``.

        Parameters
        ----------
        queries : array-like
            ``(m, d)`` query embeddings, from the same model as the gallery.
        k : int
            Neighbours that vote (``method="knn"``), ``1 <= k <= len(index)``; unused by
            ``"class-mean"``.
        weighting : {"uniform", "distance"}
            For ``"knn"``: one vote per neighbour, or a vote of ``1 / distance`` (scikit-learn's
            ``weights="distance"``: when some neighbours are at distance exactly 0, they alone
            vote, one vote each).
        method : {"knn", "class-mean"}
            ``"knn"`` votes among the neighbours found by :meth:`search` (for an approximate
            index, missing neighbours do not vote). ``"class-mean"`` picks the class whose mean
            gallery embedding is nearest (for cosine, the mean of unit-length embeddings,
            compared by cosine distance), searched exactly whatever the kind.
        max_distance : float, optional
            Open-set classification: only neighbours within ``max_distance`` vote (as
            :meth:`search` keeps them), and a query with no neighbour within it (``"knn"``), or
            whose nearest class mean is farther (``"class-mean"``), is "none of these": label -1
            (integer labels) or ``""`` (strings), confidence 0. None decides for every query.

        Returns
        -------
        Classification
            ``labels`` ``(m,)`` and ``confidence`` ``(m,)``. For ``"knn"`` the confidence is the
            predicted class's share of the (weighted) vote, which equals scikit-learn's
            ``KNeighborsClassifier(...).predict_proba(...).max(axis=1)``. For ``"class-mean"``
            it is the predicted class's weight in a softmax over the negative distances to all
            class means, ``exp(-d_c) / sum_j exp(-d_j)`` (temperature 1, so it depends on the
            scale of the distances).

        Ties go to the class that sorts first (smallest number, or first string in code-point
        order), as scikit-learn's argmax does: among classes with equal vote (``"knn"``) or at
        equal distance (``"class-mean"``). Without ``max_distance``, a query whose approximate
        search found no neighbour gets that first class with confidence 0 (scikit-learn's rule
        for an all-zero vote); with it, the none label.

        Raises
        ------
        ValueError
            If the index has no labels, or an argument is out of range.
        """
        if self.labels is None:
            raise ValueError(
                "this index was built without labels, so it cannot classify; build it with labels="
            )
        weighting = _check_choice(weighting, ("uniform", "distance"), "weighting")
        method = _check_choice(method, ("knn", "class-mean"), "method")
        _check_max_distance(max_distance)
        classes, codes = np.unique(self.labels, return_inverse=True)
        if method == "class-mean":
            q = self._check_queries(queries, "queries")
            return nearest_class_mean(q, self.vectors, codes, classes, self.distance, max_distance)
        distances, rows, _ = self.search(queries, k, max_distance)
        result = neighbour_vote(distances, rows, codes, classes, weighting)
        return result if max_distance is None else rejected(result, rows[:, 0] < 0, classes)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the index to one checksummed ``.npz`` file at ``path`` (whatever its suffix:
        :meth:`load` takes the same path), atomically; returns the path. A file at ``path`` is
        replaced, as ``numpy.save`` and ``torch.save`` replace theirs (the command line's
        ``index --out`` replaces one only with ``--overwrite``).

        Raises
        ------
        IsADirectoryError
            If ``path`` is a folder.
        """
        target = Path(path)
        if target.is_dir():
            raise IsADirectoryError(
                f"{target} is a folder; give the path of the index file to write, e.g. "
                f"{target / 'index.npz'}"
            )
        arrays = {"vectors": self.vectors, "ids": self.ids}
        if self.labels is not None:
            arrays["labels"] = self.labels
        if self._faiss is not None:
            import faiss

            arrays["faiss"] = faiss.serialize_index(self._faiss)
            arrays["faiss_rows"] = self._faiss_rows
        return save_archive(
            target,
            ARCHIVE_KIND,
            FORMAT_VERSION,
            arrays,
            distance=self.distance,
            kind=self.kind,
            model=self.model,
            run=self.run,
            checkpoint=self.checkpoint,
            recall_at_10=self.recall_at_10,
            search_breadth=self.search_breadth,
            count=len(self),
            dim=self.dim,
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> EmbeddingIndex:
        """Read an index written by :meth:`save`, checking every array against its checksum.

        An index saved before ids had to be unique may give one id to several items; it is
        refused (an id names the one item :meth:`search` returns and :meth:`remove` takes, and
        ``remove`` would drop every item of it). Build it again: ``clusterable index RUN --out
        FILE --overwrite`` (and ``--add`` again what was added to it), or, without embedding
        anything again, :meth:`build` of the file's own ``vectors``, ``labels`` and ``ids``
        (``numpy.load(FILE)``), those ids made unique.

        Raises
        ------
        FileNotFoundError
            If there is no such file.
        ValueError
            If the file is not an index, is truncated or damaged (any byte), or an array or the
            manifest does not match its checksum, or it gives one id to several items; the
            message names the file.
        """
        arrays, manifest = load_archive(
            path, ARCHIVE_KIND, FORMAT_VERSION, "rebuild it with `clusterable index`"
        )
        _check_saved_ids_unique(path, arrays["ids"], manifest["run"])
        index = cls(
            vectors=arrays["vectors"],
            ids=arrays["ids"],
            labels=arrays.get("labels"),
            # Files written before the rename name it "metric".
            distance=manifest["distance"] if "distance" in manifest else manifest["metric"],
            kind=manifest["kind"],
            model=manifest["model"],
            run=manifest["run"],
            checkpoint=manifest.get("checkpoint"),  # files written before it was kept have none
            recall_at_10=manifest["recall_at_10"],
            search_breadth=manifest["search_breadth"],
        )
        if "faiss" in arrays:
            if not faiss_available():
                raise ImportError(
                    f"{path} is an approximate ({index.kind}) index, which needs faiss: "
                    "pip install faiss-cpu"
                )
            import faiss

            index._faiss = faiss.deserialize_index(arrays["faiss"])
            index._faiss_rows = arrays["faiss_rows"]
            _set_breadth(index._faiss, index.kind, index.search_breadth)
        return index

    def _searchable(self, vectors: np.ndarray) -> np.ndarray:
        """Vectors as the approximate index stores them: unit rows for cosine."""
        if self.distance == "euclidean":
            return vectors
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def _check_queries(self, queries: Any, name: str) -> np.ndarray:
        """Embeddings to search for or add: the package's embedding rule, the index's
        dimension and, for cosine, no all-zero row (which has no direction to search by)."""
        q = as_embeddings(queries, name)
        if q.shape[1] != self.dim:
            raise ValueError(
                f"{name} have dimension {q.shape[1]} but the index holds {self.dim}-dimensional "
                "embeddings; embed them with the model that built the index"
            )
        as_points(q, self.distance, name)
        return q

    def _search_approximate(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        squared, rows = self._faiss.search(
            np.ascontiguousarray(self._searchable(q), dtype=np.float32), k
        )
        # Graph and list searches may come up short of k; faiss marks those slots -1.
        missing = rows < 0
        rows = np.where(missing, -1, self._faiss_rows[np.where(missing, 0, rows)])
        squared = np.where(missing, np.inf, np.maximum(squared, 0.0))
        distances = np.sqrt(squared) if self.distance == "euclidean" else squared / 2.0
        return distances.astype(np.float32), rows

    def _build_and_tune(self, target_recall: float, seed: int) -> None:
        """Build the faiss index without a held-out sample of the gallery, widen its search until
        recall@10 reaches the target for half of the sample (as new queries), measure recall@10
        on the other half, then add the sample.

        Held-out items stand for new queries: a gallery item searched for itself would sit in the
        graph or list it is looked up in, and flatter the figure.
        """
        n = len(self)
        order = np.random.default_rng(seed).permutation(n)
        held_out = np.sort(order[: min(2 * RECALL_SAMPLE, n // 10)])
        kept = np.setdiff1d(np.arange(n), held_out)
        self._faiss = _build_approximate(self._searchable(self.vectors[kept]), self.kind, seed)
        self._faiss_rows = kept
        largest = self._faiss.nlist if self.kind == "ivf" else max(MIN_BREADTH["hnsw"], n)
        breadth = min(MIN_BREADTH[self.kind], largest)
        if held_out.size < 2:  # too small a gallery to measure: search all of it
            breadth, self.recall_at_10 = largest, None
        else:
            tuning, reporting = held_out[::2], held_out[1::2]
            while True:
                _set_breadth(self._faiss, self.kind, breadth)
                if self._recall_on(tuning, held_out) >= target_recall or breadth >= largest:
                    break
                breadth = min(2 * breadth, largest)
            self.recall_at_10 = self._recall_on(reporting, held_out)
        _set_breadth(self._faiss, self.kind, breadth)
        self.search_breadth = breadth
        self._faiss.add(np.ascontiguousarray(self._searchable(self.vectors[held_out]), np.float32))
        self._faiss_rows = np.concatenate([kept, held_out])

    def _recall_on(self, rows: np.ndarray, held_out: np.ndarray) -> float:
        """Recall@10 of the approximate search for held-out gallery items ``rows``, against
        exact search over the items the faiss index holds."""
        k = min(10, len(self) - held_out.size)
        queries = self.vectors[rows]
        # Exact neighbours over the whole gallery, then the held-out ones dropped: a few extra
        # candidates cover them (a query whose top k + extra holds fewer than k kept is skipped).
        candidates = knn_search(
            queries, min(len(self), 3 * k + 1), self.vectors, distance=self.distance
        )[1]
        is_kept = ~np.isin(candidates, held_out)
        enough = is_kept.sum(axis=1) >= k
        truth = [c[m][:k] for c, m in zip(candidates[enough], is_kept[enough], strict=True)]
        found = self._search_approximate(queries[enough], k)[1]
        hits = sum(len(set(f) & set(t)) for f, t in zip(found.tolist(), truth, strict=True))
        return hits / max(1, k * len(truth))


def model_checksum(state_dict: Any) -> str:
    """SHA-256 of a model's weights (a ``state_dict``), in key order: the model's identity."""
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().cpu().contiguous()
        digest.update(name.encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def _build_approximate(vectors: np.ndarray, kind: str, seed: int) -> Any:
    if not faiss_available():
        raise ImportError(f"kind={kind!r} needs faiss: pip install faiss-cpu (or use kind='exact')")
    import faiss

    data = np.ascontiguousarray(vectors, dtype=np.float32)
    n, d = data.shape
    index: Any
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(d, HNSW_M)
    else:
        n_lists = max(1, min(int(4 * np.sqrt(n)), n // 39))
        index = faiss.IndexIVFFlat(faiss.IndexFlatL2(d), d, n_lists)
        # faiss trains on at most 256 points per list; a seeded sample keeps that reproducible.
        rows = np.random.default_rng(seed).permutation(n)[: 256 * n_lists]
        index.cp.seed = seed
        index.train(data[np.sort(rows)])
    index.add(data)
    return index


def _set_breadth(index: Any, kind: str, breadth: int | None) -> None:
    """Search-time breadth, which faiss does not save with the index (None: none to set)."""
    if breadth is None:
        return
    if kind == "hnsw":
        index.hnsw.efSearch = int(breadth)
    else:
        index.nprobe = int(breadth)


def _as_ids(values: Any, n: int, default: np.ndarray) -> np.ndarray:
    """``(n,)`` ids as int64 or strings (never an object array), ``default`` when not given."""
    return default if values is None else label_values(values, n, "ids", what="id")


def _repeated(ids: np.ndarray) -> np.ndarray:
    """The ids that stand more than once in ``ids``, each once, sorted."""
    values, counts = np.unique(ids, return_counts=True)
    return values[counts > 1]


def _check_unique_ids(new: np.ndarray, held: np.ndarray | None = None) -> None:
    """Refuse an id given twice among ``new``, or one the index holds already (``held``, its
    ids, for `EmbeddingIndex.add`): an id names one item, the one `search` returns and
    `remove` takes."""
    repeated = _repeated(new)
    if held is None:
        if repeated.size:
            raise ValueError(
                f"id {repeated[0].item()!r} is given twice; ids must be unique: give each item "
                "its own id"
            )
        return
    taken = np.concatenate([repeated, new[np.isin(new, held)]])
    if taken.size:
        raise ValueError(
            f"id {taken[0].item()!r} is already in this index or given twice; ids must be "
            "unique, so remove the old item first or give the new one another id"
        )


def _check_saved_ids_unique(path: str | os.PathLike[str], ids: np.ndarray, run: str | None) -> None:
    """Refuse a saved index (``path``, of the run folder ``run`` where known) that gives one id
    to several items, as `build` and `add` refuse to make one; the message names the first
    `_IDS_NAMED` such ids and how to build the index again."""
    repeated = _repeated(ids)
    if not repeated.size:
        return
    named = ", ".join(repr(value.item()) for value in repeated[:_IDS_NAMED])
    more = repeated.size - _IDS_NAMED
    named = f"id {named}" if repeated.size == 1 else f"ids {named}"
    named += f" and {more} more" if more > 0 else ""
    raise ValueError(
        f"{path} gives {named} to more than one item (as indexes saved before ids had to be "
        "unique could), so a search result or --remove cannot tell those items apart: build it "
        f"again with one id per item, `clusterable index {run or 'RUN'} --out {path} "
        "--overwrite` (then --add again what was added to it), or EmbeddingIndex.build of the "
        "file's vectors, labels and unique ids"
    )


def _check_same_kind(new: np.ndarray, held: np.ndarray, name: str) -> None:
    """Refuse new ids or labels of another kind than the index's (`label_kind`)."""
    if label_kind(new) != label_kind(held):
        raise ValueError(
            f"this index's {name} are {label_kind(held)}; the new {name} are {label_kind(new)}: "
            f"give {name}= of the index's kind"
        )


def _check_max_distance(max_distance: Any) -> None:
    if max_distance is not None and (
        isinstance(max_distance, bool)
        or not isinstance(max_distance, (int, float, np.integer, np.floating))
        or not max_distance >= 0  # NaN fails too
    ):
        raise ValueError(f"max_distance must be a number >= 0 (or None), got {max_distance!r}")


def _check_choice(value: str, choices: tuple[str, ...], name: str) -> Any:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value
