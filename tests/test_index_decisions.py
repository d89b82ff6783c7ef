"""EmbeddingIndex decisions: search within a distance, kNN and class-mean classification
(against scikit-learn), and removing items from a gallery."""

from __future__ import annotations

import numpy as np
import pytest
from test_index import blobs, brute_force  # tests/: the gallery helpers

from clusterable.classify import Classification
from clusterable.evaluate.neighbors import faiss_available
from clusterable.index import EmbeddingIndex

needs_faiss = pytest.mark.skipif(not faiss_available(), reason="faiss not installed")


def random_labelled(n=300, d=6, classes=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)).astype(np.float32), rng.integers(0, classes, size=n)


# --- search(max_distance=) -------------------------------------------------------------------


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
@pytest.mark.parametrize("string_ids", [False, True])
def test_search_max_distance_keeps_only_neighbours_within_it(distance, string_ids):
    gallery, _ = random_labelled(200, 5)
    queries = np.random.default_rng(3).normal(size=(30, 5)).astype(np.float32)
    ids = np.array([f"g{i}" for i in range(200)]) if string_ids else None
    index = EmbeddingIndex.build(gallery, ids=ids, distance=distance)
    full_d, full_rows, full_ids = index.search(queries, k=8)
    limit = float(np.median(full_d))
    d, rows, got_ids = index.search(queries, k=8, max_distance=limit)
    within = full_d <= limit
    assert within.any() and (~within).any()
    np.testing.assert_array_equal(rows, np.where(within, full_rows, -1))
    np.testing.assert_array_equal(d, np.where(within, full_d, np.inf))
    assert d.dtype == np.float32
    missing_id = "" if string_ids else -1
    np.testing.assert_array_equal(got_ids, np.where(within, full_ids, missing_id))
    # The kept ones agree with brute force too.
    _, ref_rows = brute_force(queries, gallery, 8, distance)
    np.testing.assert_array_equal(rows[within], ref_rows[within])


def test_search_max_distance_edges():
    gallery = np.array([[0.0], [1.0], [3.0]], dtype=np.float32)
    index = EmbeddingIndex.build(gallery)
    d, rows, ids = index.search(np.array([[0.0]]), k=3, max_distance=1.0)
    assert rows.tolist() == [[0, 1, -1]]  # a neighbour exactly at max_distance is kept
    assert ids.tolist() == [[0, 1, -1]]
    assert d[0, 2] == np.inf
    d, rows, _ = index.search(np.array([[10.0]]), k=2, max_distance=0.5)
    assert rows.tolist() == [[-1, -1]]  # none within: every slot missing
    assert index.search(np.array([[0.0]]), k=3, max_distance=np.inf)[1].tolist() == [[0, 1, 2]]
    for bad in (-1.0, float("nan"), "1", True):
        with pytest.raises(ValueError, match="max_distance"):
            index.search(np.array([[0.0]]), k=1, max_distance=bad)


@needs_faiss
@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_search_max_distance_approximate(kind):
    gallery, _ = blobs(2000, 8, 10)
    index = EmbeddingIndex.build(gallery, kind=kind)
    full_d, full_rows, _ = index.search(gallery[:50], k=10)
    limit = float(np.median(full_d[np.isfinite(full_d)]))
    d, rows, _ = index.search(gallery[:50], k=10, max_distance=limit)
    within = full_d <= limit
    np.testing.assert_array_equal(rows, np.where(within, full_rows, -1))
    assert (d[rows >= 0] <= limit).all() and np.isinf(d[rows < 0]).all()


# --- classify --------------------------------------------------------------------------------


def sklearn_knn(gallery, labels, queries, k, weights, distance):
    neighbors = pytest.importorskip("sklearn.neighbors")
    metric = "cosine" if distance == "cosine" else "euclidean"
    model = neighbors.KNeighborsClassifier(
        n_neighbors=k, weights=weights, algorithm="brute", metric=metric
    )
    model.fit(gallery.astype(np.float64), labels)
    q = queries.astype(np.float64)
    return model.predict(q), model.predict_proba(q).max(axis=1)


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
@pytest.mark.parametrize("weighting", ["uniform", "distance"])
@pytest.mark.parametrize("k", [1, 4, 7])
def test_knn_classify_equals_sklearn(distance, weighting, k):
    gallery, labels = random_labelled(300, 6, 5, seed=k)
    queries = np.random.default_rng(10 + k).normal(size=(120, 6)).astype(np.float32)
    # Include gallery items themselves: exact-zero distances (distance weighting: they alone vote).
    queries = np.concatenate([queries, gallery[:10]])
    ref_d, _ = brute_force(queries, gallery, k + 1, distance)
    gaps = np.diff(ref_d, axis=1)
    assert (gaps > 1e-6).all(), "comparison data must not hold distance ties"
    index = EmbeddingIndex.build(gallery, labels=labels, distance=distance)
    result = index.classify(queries, k, weighting=weighting)
    assert isinstance(result, Classification)
    want_labels, want_conf = sklearn_knn(gallery, labels, queries, k, weighting, distance)
    np.testing.assert_array_equal(result.labels, want_labels)
    np.testing.assert_allclose(result.confidence, want_conf, rtol=1e-5, atol=1e-6)
    assert result.labels.dtype == np.int64
    if weighting == "distance":  # an exact match decides alone, with full confidence
        np.testing.assert_array_equal(result.labels[-10:], labels[:10])
        np.testing.assert_array_equal(result.confidence[-10:], 1.0)


def test_knn_classify_string_labels_equal_sklearn():
    gallery, codes = random_labelled(200, 4, 4, seed=5)
    labels = np.array(["zeta", "alpha", "mu", "beta"])[codes]
    queries = np.random.default_rng(6).normal(size=(60, 4)).astype(np.float32)
    index = EmbeddingIndex.build(gallery, labels=labels)
    got_labels, got_conf = index.classify(queries, 5, weighting="distance")
    want_labels, want_conf = sklearn_knn(gallery, labels, queries, 5, "distance", "euclidean")
    np.testing.assert_array_equal(got_labels, want_labels)
    np.testing.assert_allclose(got_conf, want_conf, rtol=1e-5)


def test_knn_tie_rule_takes_the_class_sorting_first():
    # Two classes on one point (class 7 first in the gallery): a tie under both weightings.
    gallery = np.array([[1.0], [1.0], [10.0]], dtype=np.float32)
    index = EmbeddingIndex.build(gallery, labels=[7, 3, 3])
    for weighting in ("uniform", "distance"):
        labels, conf = index.classify(np.array([[0.0]]), k=2, weighting=weighting)
        assert labels.tolist() == [3] and conf.tolist() == [0.5]
    strings = EmbeddingIndex.build(gallery, labels=["b", "a", "c"])
    assert strings.classify(np.array([[0.0]]), k=2).labels.tolist() == ["a"]
    # Uniform 2-2 tie among 4 neighbours, classes 5 and 2 (nearer ones are class 5): 2 wins.
    gallery = np.array([[0.1], [0.2], [0.3], [0.4], [9.0]], dtype=np.float32)
    index = EmbeddingIndex.build(gallery, labels=[5, 5, 2, 2, 1])
    labels, conf = index.classify(np.array([[0.0]]), k=4)
    assert labels.tolist() == [2] and conf.tolist() == [0.5]
    # Distance weighting breaks that tie towards the nearer class.
    assert index.classify(np.array([[0.0]]), k=4, weighting="distance").labels.tolist() == [5]


def test_distance_weighting_zero_distance_votes_alone():
    gallery = np.array([[0.0], [0.0], [0.01], [0.02], [0.03]], dtype=np.float32)
    index = EmbeddingIndex.build(gallery, labels=[1, 2, 0, 0, 0])
    labels, conf = index.classify(np.array([[0.0]]), k=5, weighting="distance")
    assert labels.tolist() == [1] and conf.tolist() == [0.5]  # the two exact matches tie
    labels, conf = index.classify(np.array([[0.0]]), k=5, weighting="uniform")
    assert labels.tolist() == [0] and conf.tolist() == [0.6]


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_class_mean_classify_against_brute_force(distance):
    gallery, labels = blobs(600, 8, 6)
    queries = np.random.default_rng(2).normal(scale=6.0, size=(80, 8)).astype(np.float32)
    index = EmbeddingIndex.build(gallery, labels=labels * 10, distance=distance)
    got_labels, got_conf = index.classify(queries, method="class-mean")
    g = gallery.astype(np.float64)
    q = queries.astype(np.float64)
    classes = np.unique(labels)
    if distance == "cosine":
        g = g / np.linalg.norm(g, axis=1, keepdims=True)
        means = np.stack([g[labels == c].mean(0) for c in classes])
        means /= np.linalg.norm(means, axis=1, keepdims=True)
        qn = q / np.linalg.norm(q, axis=1, keepdims=True)
        dist = 1.0 - qn @ means.T
    else:
        means = np.stack([g[labels == c].mean(0) for c in classes])
        dist = np.linalg.norm(q[:, None] - means[None], axis=-1)
    np.testing.assert_array_equal(got_labels, classes[dist.argmin(1)] * 10)
    soft = np.exp(-(dist - dist.min(1, keepdims=True)))
    np.testing.assert_allclose(got_conf, soft.max(1) / soft.sum(1), rtol=1e-4, atol=1e-6)
    assert ((got_conf > 0) & (got_conf <= 1)).all()


def test_class_mean_tie_and_one_class():
    gallery = np.array([[-1.0], [-1.0], [1.0]], dtype=np.float32)
    index = EmbeddingIndex.build(gallery, labels=["right", "right", "left"])
    labels, conf = index.classify(np.array([[0.0]]), method="class-mean")
    assert labels.tolist() == ["left"]  # equidistant means: the label sorting first
    np.testing.assert_allclose(conf, [0.5])
    single = EmbeddingIndex.build(gallery, labels=[4, 4, 4])
    labels, conf = single.classify(np.array([[0.0], [9.0]]), method="class-mean")
    assert labels.tolist() == [4, 4] and conf.tolist() == [1.0, 1.0]


def test_classify_refusals():
    gallery, labels = random_labelled(20, 3)
    with pytest.raises(ValueError, match="without labels") as caught:
        EmbeddingIndex.build(gallery).classify(gallery[:2], 3)
    assert "\n" not in str(caught.value)
    index = EmbeddingIndex.build(gallery, labels=labels)
    with pytest.raises(ValueError, match="weighting"):
        index.classify(gallery[:2], 3, weighting="inverse")
    with pytest.raises(ValueError, match="method"):
        index.classify(gallery[:2], 3, method="centroid")
    with pytest.raises(ValueError, match="k = 21"):
        index.classify(gallery[:2], 21)
    with pytest.raises(ValueError, match="dimension"):
        index.classify(np.zeros((2, 4)), 3)


@needs_faiss
def test_knn_classify_approximate_agrees_mostly_with_exact():
    gallery, labels = blobs(2000, 8, 10)
    queries = blobs(200, 8, 10, seed=0)[0] + 0.1
    exact = EmbeddingIndex.build(gallery, labels=labels).classify(queries, 5)
    approx = EmbeddingIndex.build(gallery, labels=labels, kind="hnsw").classify(queries, 5)
    assert (exact.labels == approx.labels).mean() > 0.95
    assert ((approx.confidence >= 0) & (approx.confidence <= 1)).all()


# --- remove ----------------------------------------------------------------------------------


@pytest.mark.parametrize("string_ids", [False, True])
def test_remove_exact_equals_index_built_without_them(string_ids):
    gallery, labels = random_labelled(100, 4)
    ids = np.array([f"x{i}" for i in range(100)]) if string_ids else np.arange(100) * 3
    index = EmbeddingIndex.build(gallery, ids=ids, labels=labels)
    gone = [ids[5], ids[0], ids[99], ids[5]]  # duplicates are fine
    index.remove(gone)
    keep = ~np.isin(ids, gone)
    assert len(index) == 97
    np.testing.assert_array_equal(index.ids, ids[keep])
    np.testing.assert_array_equal(index.labels, labels[keep])
    np.testing.assert_array_equal(index.vectors, gallery[keep])
    fresh = EmbeddingIndex.build(gallery[keep], ids=ids[keep], labels=labels[keep])
    queries = np.random.default_rng(4).normal(size=(10, 4)).astype(np.float32)
    for a, b in zip(index.search(queries, 5), fresh.search(queries, 5), strict=True):
        np.testing.assert_array_equal(a, b)
    index.remove(ids[7])  # a single id
    assert ids[7] not in index.ids and len(index) == 96


@pytest.mark.parametrize("ids", [["a", "b", "a"], [4, 7, 4]])
def test_build_refuses_an_id_given_twice_as_add_does(ids):
    """An id names one item (`search` returns it, `remove` takes it): ``build`` refuses a
    repeated one in one line, as ``add`` does."""
    with pytest.raises(ValueError, match=rf"^id {ids[0]!r} is given twice; ids must be unique"):
        EmbeddingIndex.build(np.eye(3, dtype=np.float32), ids=ids)
    gallery = np.eye(3, dtype=np.float32)
    index = EmbeddingIndex.build(gallery[:2], ids=ids[:2])
    with pytest.raises(ValueError, match=rf"^id {ids[0]!r} is already in this index"):
        index.add(gallery[2:], ids=ids[2:])


def saved_before_ids_were_unique(path, ids, run=None):
    """An index file as `save` wrote it before ids had to be unique: the plain record (which
    `build` and `add` check, and the constructor does not) saved with ``ids`` as given."""
    vectors = np.eye(len(ids), dtype=np.float32)
    return EmbeddingIndex(vectors, np.asarray(ids), labels=np.arange(len(ids)), run=run).save(path)


@pytest.mark.parametrize(
    ("ids", "named"),
    [
        ([7, 3, 7, 5], "id 7"),
        (["b.jpg", "a.jpg", "b.jpg", "a.jpg", "c.jpg"], "ids 'a.jpg', 'b.jpg'"),
        ([*range(6)] * 2, "ids 0, 1, 2, 3 and 2 more"),
    ],
    ids=["one-number", "two-files", "more-than-named"],
)
def test_an_index_saved_with_an_id_given_twice_is_refused_naming_the_file_and_ids(
    tmp_path, ids, named
):
    """An index saved before ids had to be unique loads as nothing: search results and remove
    could not tell its items of one id apart. The one line names the file, the ids (the first
    four) and how to build it again."""
    path = saved_before_ids_were_unique(tmp_path / "old.npz", ids)
    with pytest.raises(ValueError) as refused:
        EmbeddingIndex.load(path)
    said = str(refused.value)
    assert said.startswith(f"{path} gives {named} to more than one item (as indexes saved before")
    assert f"`clusterable index RUN --out {path} --overwrite`" in said and "\n" not in said


def test_a_refused_index_is_built_again_as_its_refusal_says(tmp_path):
    """From its run, or, in Python, from the file's own arrays with unique ids."""
    path = saved_before_ids_were_unique(tmp_path / "old.npz", [1, 1], run="runs/fm")
    with pytest.raises(ValueError, match=f"`clusterable index runs/fm --out {path} --overwrite`"):
        EmbeddingIndex.load(path)
    with np.load(path) as saved:
        rebuilt = EmbeddingIndex.build(saved["vectors"], ids=[1, 2], labels=saved["labels"])
    assert EmbeddingIndex.load(rebuilt.save(path, overwrite=True)).ids.tolist() == [1, 2]


def test_index_remove_cannot_mend_a_saved_index_with_an_id_given_twice(tmp_path, capsys):
    """``--remove`` would drop every item of the id: the verb says the refusal in one line and
    leaves the file as it was."""
    from clusterable.cli import main

    path = saved_before_ids_were_unique(tmp_path / "old.npz", [7, 3, 7])
    before = path.read_bytes()
    with pytest.raises(SystemExit) as stop:
        main(["index", str(path), "--remove", "7"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"clusterable index: error: {path} gives id 7 to more than one item")
    assert path.read_bytes() == before


def test_remove_refuses_unknown_ids_and_changes_nothing():
    gallery, labels = random_labelled(10, 3)
    index = EmbeddingIndex.build(gallery, labels=labels)
    with pytest.raises(ValueError, match=r"^id 12 is not in this index") as caught:
        index.remove([3, 12, 15])
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="id 'a' is not"):
        index.remove(["a"])  # string ids against integer ids
    with pytest.raises(ValueError, match="empty"):
        index.remove(np.arange(10))
    assert len(index) == 10 and index.ids.tolist() == list(range(10))


def test_remove_then_add_then_save_load(tmp_path):
    gallery, labels = random_labelled(50, 4)
    index = EmbeddingIndex.build(gallery, labels=labels)
    index.remove([0, 1, 2])
    index.add(gallery[:2], ids=[100, 101], labels=labels[:2])
    loaded = EmbeddingIndex.load(index.save(tmp_path / "g.npz"))
    np.testing.assert_array_equal(loaded.ids, list(range(3, 50)) + [100, 101])
    assert loaded.search(gallery[:1], 1)[2].tolist() == [[100]]


@needs_faiss
@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_remove_approximate(kind, tmp_path):
    gallery, labels = blobs(2000, 8, 10)
    ids = np.array([f"i{r}" for r in range(2000)])
    index = EmbeddingIndex.build(gallery, ids=ids, labels=labels, kind=kind)
    breadth, recall = index.search_breadth, index.recall_at_10
    gone = ids[::4]
    index.remove(gone)
    keep = ~np.isin(ids, gone)
    assert len(index) == 1500 and index._faiss.ntotal == 1500
    assert sorted(index._faiss_rows.tolist()) == list(range(1500))
    assert index.search_breadth == breadth and index.recall_at_10 == recall
    # Every remaining item finds itself; no removed id is ever returned.
    _, rows, found = index.search(gallery[keep], 5)
    assert (rows[:, 0] == np.arange(1500)).mean() > 0.99
    assert not np.isin(found, gone).any()
    # The removed items, searched for, are not found; their nearest ones are remaining items.
    assert not np.isin(index.search(gallery[~keep], 10)[2], gone).any()
    # Adding afterwards and saving keep working.
    index.add(gallery[:4], ids=["n0", "n1", "n2", "n3"], labels=labels[:4])
    loaded = EmbeddingIndex.load(index.save(tmp_path / "a.npz"))
    assert loaded._faiss.ntotal == 1504
    assert loaded.search(gallery[:1], 1)[2].tolist() == [["n0"]]


# --- classify(max_distance=) and add's ids ---------------------------------------------------


@pytest.mark.parametrize("weighting", ["uniform", "distance"])
def test_knn_classify_within_a_distance_votes_only_the_neighbours_within_it(weighting):
    gallery, labels = random_labelled(300, 6, 5, seed=2)
    queries = np.random.default_rng(4).normal(size=(80, 6)).astype(np.float32)
    index = EmbeddingIndex.build(gallery, labels=labels)
    distances, rows, _ = index.search(queries, 7)
    limit = float(np.quantile(distances[:, 0], 0.3))  # some queries have no neighbour within
    got = index.classify(queries, 7, weighting=weighting, max_distance=limit)
    alone = distances[:, 0] > limit
    assert alone.any() and (~alone).any()
    assert (got.labels[alone] == -1).all() and (got.confidence[alone] == 0).all()
    for q in np.flatnonzero(~alone):  # the vote of the neighbours within, by hand
        within = distances[q] <= limit
        weights = np.ones(within.sum()) if weighting == "uniform" else 1 / distances[q][within]
        votes = np.bincount(labels[rows[q][within]], weights=weights, minlength=5)
        assert got.labels[q] == votes.argmax()
        np.testing.assert_allclose(got.confidence[q], votes.max() / votes.sum(), rtol=1e-6)


def test_class_mean_within_a_distance_and_string_labels_say_none():
    gallery = np.array([[0.0], [2.0], [10.0], [12.0]], dtype=np.float32)
    index = EmbeddingIndex.build(gallery, labels=["a", "a", "b", "b"])
    queries = np.array([[1.0], [11.0], [6.0], [30.0]])
    got = index.classify(queries, method="class-mean", max_distance=5.0)
    assert got.labels.tolist() == ["a", "b", "a", ""]  # 6 is 5 from both: kept, ties to "a"
    assert got.confidence[2] > 0 and got.confidence[3] == 0
    assert index.classify(queries, k=1, max_distance=0.5).labels.tolist() == ["", "", "", ""]
    with pytest.raises(ValueError, match="max_distance"):
        index.classify(queries, max_distance=-1.0)


def test_add_refuses_ids_already_there_or_of_another_kind_and_changes_nothing():
    gallery, labels = random_labelled(10, 3)
    index = EmbeddingIndex.build(gallery, labels=labels)
    index.remove([9])
    index.add(gallery[:1], labels=labels[:1])  # one past the largest id, never a taken one
    assert index.ids.tolist() == [*range(9), 9]
    for ids, message in (
        ([3], "id 3 is already in this index"),
        ([20, 20], "id 20 is already in this index or given twice"),
        (["x"], "ids are numbers; the new ids are strings"),
    ):
        with pytest.raises(ValueError, match=message):
            index.add(gallery[: len(ids)], ids=ids, labels=labels[: len(ids)])
    assert len(index) == 10 and index.ids.tolist() == [*range(9), 9]
