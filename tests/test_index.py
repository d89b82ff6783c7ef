"""EmbeddingIndex: exact search against brute force, approximate recall, save/load integrity."""

from __future__ import annotations

import inspect
import re
import zipfile

import numpy as np
import pytest
import torch

from clusterable import archive
from clusterable.index import EmbeddingIndex, model_checksum


def brute_force(queries: np.ndarray, gallery: np.ndarray, k: int, distance: str):
    """Nearest rows by float64 distance, ties to the lower row: the reference answer."""
    q, g = queries.astype(np.float64), gallery.astype(np.float64)
    if distance == "cosine":
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        g = g / np.linalg.norm(g, axis=1, keepdims=True)
        dist = 1.0 - q @ g.T
    else:
        dist = np.sqrt(((q[:, None, :] - g[None, :, :]) ** 2).sum(-1))
    rows = np.stack([np.lexsort((np.arange(g.shape[0]), d))[:k] for d in dist])
    return np.take_along_axis(dist, rows, axis=1), rows


def blobs(n: int = 3000, d: int = 16, centres: int = 30, seed: int = 0):
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=6.0, size=(centres, d))
    labels = rng.integers(0, centres, size=n)
    return (means[labels] + rng.normal(size=(n, d))).astype(np.float32), labels


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_exact_search_equals_brute_force_with_ids(distance):
    gallery, labels = blobs(400, 8, 5)
    queries = np.random.default_rng(1).normal(scale=6.0, size=(25, 8)).astype(np.float32)
    ids = np.array([f"item-{i}" for i in range(400)])
    index = EmbeddingIndex.build(gallery, ids=ids, labels=labels, distance=distance)
    distances, rows, found_ids = index.search(queries, k=7)
    want_dist, want_rows = brute_force(queries, gallery, 7, distance)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_allclose(distances, want_dist, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(found_ids, ids[want_rows])
    np.testing.assert_array_equal(index.labels[rows], labels[want_rows])


def test_duplicate_gallery_items_come_back_in_row_order():
    gallery = np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [1.0, 1.0]], dtype=np.float32)
    _, rows, _ = EmbeddingIndex.build(gallery).search(np.array([[1.0, 1.0]]), k=3)
    assert rows.tolist() == [[0, 2, 3]]


def test_float64_gallery_stays_float64():
    index = EmbeddingIndex.build(np.zeros((3, 2), dtype=np.float64) + [[0.0], [1.0], [2.0]])
    assert index.vectors.dtype == np.float64
    assert EmbeddingIndex.build(torch.ones(3, 2)).vectors.dtype == np.float32


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_approximate_recall_is_measured_honestly(kind, distance):
    points, _ = blobs(3200)
    gallery, queries = points[:3000], points[3000:]
    index = EmbeddingIndex.build(gallery, kind=kind, distance=distance, seed=3)
    assert index.search_breadth is not None
    # Our own recall@10 on new items from the same data: the reported figure must be close to it.
    _, truth = brute_force(queries, gallery, 10, distance)
    _, found, _ = index.search(queries, k=10)
    recall = np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth, strict=True)])
    assert recall >= 0.9
    assert abs(index.recall_at_10 - recall) < 0.04


def test_a_higher_recall_target_widens_the_search():
    # Structureless data, where eight lists of an IVF hold few of the true neighbours.
    gallery = np.random.default_rng(0).normal(size=(4000, 32)).astype(np.float32)
    loose = EmbeddingIndex.build(gallery, kind="ivf", target_recall=0.3)
    strict = EmbeddingIndex.build(gallery, kind="ivf", target_recall=1.0)
    assert strict.search_breadth > loose.search_breadth
    assert strict.recall_at_10 >= loose.recall_at_10
    with pytest.raises(ValueError, match="target_recall"):
        EmbeddingIndex.build(gallery, kind="hnsw", target_recall=0.0)


@pytest.mark.parametrize("kind", ["exact", "ivf", "hnsw"])
def test_save_and_load_give_the_same_answers(tmp_path, kind):
    gallery, labels = blobs(1500)
    ids = np.array([f"/data/img{i}.png" for i in range(len(gallery))])
    index = EmbeddingIndex.build(
        gallery, ids=ids, labels=labels, kind=kind, distance="cosine", model="abc"
    )
    path = index.save(tmp_path / "gallery.idx")
    assert path == tmp_path / "gallery.idx"
    loaded = EmbeddingIndex.load(tmp_path / "gallery.idx")  # the path given to save
    queries = gallery[:20] + 0.1
    for got, want in zip(loaded.search(queries, 5), index.search(queries, 5), strict=True):
        np.testing.assert_array_equal(got, want)
    assert (loaded.distance, loaded.kind, loaded.model) == ("cosine", kind, "abc")
    assert loaded.search_breadth == index.search_breadth
    assert loaded.recall_at_10 == index.recall_at_10
    np.testing.assert_array_equal(loaded.labels, labels)
    assert [p.name for p in tmp_path.iterdir()] == ["gallery.idx"]  # no temporary left


def _rewrite(path, **replace):
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays.update(replace)
    with open(path, "wb") as out:
        np.savez(out, **arrays)


def test_an_edited_array_is_refused_by_its_checksum(tmp_path):
    path = EmbeddingIndex.build(blobs(100)[0]).save(tmp_path / "g.npz")
    vectors = np.load(path)["vectors"].copy()
    vectors[3, 0] += 1.0
    _rewrite(path, vectors=vectors)
    with pytest.raises(ValueError, match="damaged: its 'vectors' array"):
        EmbeddingIndex.load(path)


def test_a_truncated_or_foreign_file_is_refused(tmp_path):
    path = EmbeddingIndex.build(blobs(100)[0]).save(tmp_path / "g.npz")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a readable clusterable search index file"):
        EmbeddingIndex.load(path)
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="no clusterable search index manifest"):
        EmbeddingIndex.load(tmp_path / "other.npz")
    with pytest.raises(FileNotFoundError, match="does not exist: no clusterable search index file"):
        EmbeddingIndex.load(tmp_path / "missing.npz")


def test_an_interrupted_save_keeps_the_previous_file(tmp_path, monkeypatch):
    first = EmbeddingIndex.build(blobs(50)[0], model="first")
    path = first.save(tmp_path / "g.npz")

    def broken_savez(out, **arrays):
        out.write(b"half of a zip")
        raise KeyboardInterrupt

    monkeypatch.setattr(archive.np, "savez", broken_savez)
    with pytest.raises(KeyboardInterrupt):
        EmbeddingIndex.build(blobs(60)[0], model="second").save(path)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["g.npz"]
    assert EmbeddingIndex.load(path).model == "first"


@pytest.mark.parametrize("kind", ["exact", "hnsw"])
def test_added_items_are_searchable_with_continued_ids(kind):
    gallery, labels = blobs(500)
    index = EmbeddingIndex.build(gallery[:400], labels=labels[:400], kind=kind)
    index.add(gallery[400:], labels=labels[400:])
    assert len(index) == 500
    _, rows, ids = index.search(gallery[450:451], k=1)
    assert rows.tolist() == [[450]] and ids.tolist() == [[450]]
    np.testing.assert_array_equal(index.labels, labels)


def test_add_checks_dimension_and_labels():
    index = EmbeddingIndex.build(np.eye(4), labels=[0, 1, 2, 3])
    with pytest.raises(ValueError, match="dimension 3 but the index holds 4"):
        index.add(np.ones((2, 3)), labels=[0, 1])
    with pytest.raises(ValueError, match="stores labels"):
        index.add(np.ones((2, 4)))
    with pytest.raises(ValueError, match="without labels"):
        EmbeddingIndex.build(np.eye(4)).add(np.ones((1, 4)), labels=[1])


def test_bad_queries_and_k_get_clear_errors():
    index = EmbeddingIndex.build(np.eye(4))
    with pytest.raises(ValueError, match="index holds 4 items"):
        index.search(np.eye(4), k=5)
    with pytest.raises(ValueError, match="choose 1 <= k"):
        index.search(np.eye(4), k=0)
    # k=2.0 said "k = 2.0 but the index holds 4 items: choose 1 <= k <= 4", which 2.0 is.
    for k in (2.0, "2", True):
        refusal = rf"^k must be a whole number of neighbours, got {re.escape(repr(k))}$"
        with pytest.raises(ValueError, match=refusal):
            index.search(np.eye(4), k=k)
        with pytest.raises(ValueError, match=refusal):
            EmbeddingIndex.build(np.eye(4), labels=[0, 0, 1, 1]).classify(np.eye(4), k=k)
    with pytest.raises(ValueError, match="embed them with the model that built the index"):
        index.search(np.ones((1, 5)), k=1)
    with pytest.raises(ValueError, match="NaN or inf"):
        index.search(np.array([[np.nan, 0, 0, 0]]), k=1)
    with pytest.raises(ValueError, match="kind must be one of"):
        EmbeddingIndex.build(np.eye(4), kind="annoy")
    with pytest.raises(ValueError, match="ids has 2 entries but there are 4 items; pass one id"):
        EmbeddingIndex.build(np.eye(4), ids=[1, 2])
    with pytest.raises(ValueError, match=r"ids has 1 missing id\(s\).*first: row 1"):
        EmbeddingIndex.build(np.eye(2), ids=np.array(["a", None], dtype=object))


def test_the_distance_is_named_distance_and_the_old_name_is_refused():
    index = EmbeddingIndex.build(np.eye(3), distance="cosine")
    assert index.distance == "cosine" and not hasattr(index, "metric")
    with pytest.raises(
        TypeError, match=r"^build\(\) takes distance= now, not metric=: write .*distance='cosine'"
    ):
        EmbeddingIndex.build(np.eye(3), metric="cosine")
    with pytest.raises(TypeError, match="unexpected keyword argument 'metrc'"):
        EmbeddingIndex.build(np.eye(3), metrc="cosine")
    assert "distance" in inspect.signature(EmbeddingIndex.build).parameters
    with pytest.raises(ValueError, match="distance must be one of euclidean, cosine"):
        EmbeddingIndex.build(np.eye(3), distance="manhattan")


def test_the_index_verb_takes_distance_and_refuses_metric_in_one_line(capsys):
    from clusterable.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["index", "RUN", "--data", "digits", "--out", "g.npz", "--metric", "cosine"])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert error == "clusterable index: error: --metric is now --distance: --distance cosine\n"
    with pytest.raises(SystemExit):
        main(["index", "--help"])
    assert "--distance {euclidean,cosine}" in capsys.readouterr().out


def test_an_index_saved_before_the_rename_loads_with_its_distance(tmp_path):
    # The layout of an index file written before the rename: the distance under "metric".
    path = archive.save_archive(
        tmp_path / "old.npz",
        "clusterable search index",
        1,
        {"vectors": np.eye(3, dtype=np.float32), "ids": np.arange(3)},
        metric="cosine",
        kind="exact",
        model=None,
        run=None,
        recall_at_10=None,
        search_breadth=None,
        count=3,
        dim=3,
    )
    loaded = EmbeddingIndex.load(path)
    assert loaded.distance == "cosine"
    distances, rows, _ = loaded.search(np.array([[2.0, 0.0, 0.0]], dtype=np.float32), k=2)
    assert rows.tolist() == [[0, 1]] and distances[0].tolist() == pytest.approx([0.0, 1.0])
    resaved = loaded.save(tmp_path / "new.npz")
    _, manifest = archive.load_archive(resaved, "clusterable search index", 1, "")
    assert manifest["distance"] == "cosine" and "metric" not in manifest


def test_model_checksum_follows_the_weights():
    model = torch.nn.Linear(3, 2)
    before = model_checksum(model.state_dict())
    assert model_checksum(model.state_dict()) == before
    with torch.no_grad():
        model.weight[0, 0] += 1e-6
    assert model_checksum(model.state_dict()) != before


def test_zip_layout_is_plain_arrays_only(tmp_path):
    # Text ids and labels given as Python lists: stored as unicode arrays, so every member reads
    # without unpickling, and the file holds exactly the index's members.
    path = EmbeddingIndex.build(np.eye(3), ids=["a", "b", "c"], labels=["x", "y", "3"]).save(
        tmp_path / "g.npz"
    )
    with zipfile.ZipFile(path) as archive:
        names = sorted(archive.namelist())
        members = {}
        for name in names:
            with archive.open(name) as member:
                members[name] = np.lib.format.read_array(member, allow_pickle=False)
    assert names == [
        "ids.npy",
        "labels.npy",
        "manifest.npy",
        "manifest_sha256.npy",
        "vectors.npy",
    ]
    assert all(array.dtype != object for array in members.values())
    assert members["ids.npy"].tolist() == ["a", "b", "c"]
    assert members["labels.npy"].tolist() == ["x", "y", "3"]
    np.testing.assert_array_equal(members["vectors.npy"], np.eye(3))


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_a_tiny_approximate_gallery_is_searched_whole(kind):
    gallery = np.random.default_rng(0).normal(size=(12, 3)).astype(np.float32)
    index = EmbeddingIndex.build(gallery, kind=kind)
    assert index.recall_at_10 is None
    _, rows, _ = index.search(gallery, k=4)
    _, want = brute_force(gallery, gallery, 4, "euclidean")
    np.testing.assert_array_equal(rows, want)


def test_every_damaged_byte_is_a_value_error_naming_the_file(tmp_path):
    # One byte flipped at every offset: the zip's directory and headers, the members, the manifest.
    path = EmbeddingIndex.build(np.eye(3), ids=["a", "b", "c"], labels=[0, 1, 1]).save(
        tmp_path / "g.idx"
    )
    original = path.read_bytes()
    reference = EmbeddingIndex.load(path)
    damaged = tmp_path / "damaged.idx"
    refused = 0
    for offset in range(len(original)):
        data = bytearray(original)
        data[offset] ^= 0xFF
        damaged.write_bytes(bytes(data))
        try:
            loaded = EmbeddingIndex.load(damaged)
        except ValueError as err:
            assert str(damaged) in str(err)
            refused += 1
            continue
        # A byte no reader looks at (a timestamp, an attribute): the index is the same.
        np.testing.assert_array_equal(loaded.vectors, reference.vectors)
        np.testing.assert_array_equal(loaded.ids, reference.ids)
        np.testing.assert_array_equal(loaded.labels, reference.labels)
        assert (loaded.distance, loaded.kind, loaded.model) == ("euclidean", "exact", None)
    assert refused > 0.8 * len(original)


def test_an_edited_manifest_is_refused_by_its_checksum(tmp_path):
    path = EmbeddingIndex.build(blobs(50)[0], distance="euclidean").save(tmp_path / "g.npz")
    with np.load(path, allow_pickle=False) as data:
        manifest = data["manifest"].tobytes().replace(b'"euclidean"', b'"cosine"')
    _rewrite(path, manifest=np.frombuffer(manifest, dtype=np.uint8))  # valid zip CRCs
    with pytest.raises(ValueError, match=r"g\.npz is damaged: its manifest does not match"):
        EmbeddingIndex.load(path)


def test_an_approximate_search_that_comes_up_short_marks_missing_neighbours():
    # Eight IVF lists of 51 probed hold fewer than 600 items: the rest are missing, not row 0.
    gallery, _ = blobs(2000)
    ids = np.array([f"item-{i}" for i in range(2000)])
    index = EmbeddingIndex.build(gallery, ids=ids, kind="ivf", target_recall=0.1, seed=0)
    distances, rows, found_ids = index.search(gallery[:5], k=600)
    missing = rows < 0
    assert missing.any()
    assert np.isinf(distances[missing]).all() and np.isfinite(distances[~missing]).all()
    assert (found_ids[missing] == "").all()
    for row, gone in zip(rows, missing, strict=True):
        assert not gone[: (~gone).sum()].any()  # the missing ones come last
        assert len(set(row[~gone].tolist())) == (~gone).sum()  # no row repeated
    int_ids = EmbeddingIndex.build(gallery, kind="ivf", target_recall=0.1, seed=0)
    assert (int_ids.search(gallery[:5], k=600)[2][missing] == -1).all()


def test_added_labels_of_another_kind_are_refused_not_turned_into_strings():
    """Labels [0, 1] plus "a" became the strings "0", "1", "a": label 1 and "1" one class."""
    index = EmbeddingIndex.build(np.eye(2), labels=[0, 1])
    with pytest.raises(ValueError, match="this index's labels are numbers; the new labels are str"):
        index.add(np.ones((1, 2)), labels=["a"])
    assert len(index) == 2 and index.labels.dtype == np.int64
    named = EmbeddingIndex.build(np.eye(2), labels=["cat", "dog"])
    with pytest.raises(ValueError, match="this index's labels are strings; the new labels are num"):
        named.add(np.ones((1, 2)), labels=[3])


@pytest.mark.parametrize("kind", ["exact", "ivf", "hnsw"])
def test_a_cosine_index_refuses_an_all_zero_row_where_it_enters(kind):
    """A zero gallery row passed build and failed the first search as "reference row 0"; an
    approximate index answered a zero query with no neighbours at all, and took a zero row
    into its faiss structure as NaN."""
    if kind != "exact":
        pytest.importorskip("faiss")
    gallery = np.random.default_rng(0).normal(size=(300, 8)).astype(np.float32)
    with_zero = np.concatenate([gallery, np.zeros((1, 8), np.float32)])
    zero_row = r"^embeddings row 300 is all zeros and has no direction for cosine distance"
    with pytest.raises(ValueError, match=zero_row):
        EmbeddingIndex.build(with_zero, distance="cosine", kind=kind)
    index = EmbeddingIndex.build(gallery, distance="cosine", kind=kind)
    with pytest.raises(ValueError, match=r"^queries row 0 is all zeros"):
        index.search(np.zeros((1, 8)), k=3)
    with pytest.raises(ValueError, match=r"^embeddings row 0 is all zeros"):
        index.add(np.zeros((1, 8)))
    assert len(index) == 300
    EmbeddingIndex.build(with_zero, distance="euclidean", kind=kind)  # a zero row is a point


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"target_recall": "0.9"}, r"target_recall='0.9' is not a number: it must be in \(0, 1\]"),
        ({"target_recall": 0.0}, r"target_recall=0.0 must be in \(0, 1\]"),
        ({"seed": "x"}, r"seed='x' is not a number: it must be an integer in \[0, "),
        ({"seed": -1}, r"seed=-1 must be an integer in \[0, "),
        ({"seed": None}, r"seed=None is not a number: it must be an integer in \[0, "),
        ({"target_recall": None}, r"target_recall=None is not a number: it must be in \(0, 1\]"),
    ],
)
def test_build_settings_out_of_range_are_refused_in_one_line(arguments, message):
    """A string target_recall was Python's "'<' not supported", a string seed NumPy's own
    TypeError, and seed=None faiss's "argument 2 of type 'int'"."""
    with pytest.raises(ValueError, match=rf"^EmbeddingIndex.build {message}"):
        EmbeddingIndex.build(np.eye(4), kind="ivf", **arguments)


def test_save_to_a_folder_names_the_file_to_give(tmp_path):
    """It failed deep in the atomic rename: "[Errno 21] Is a directory: '/tmp/.x.4mxz' -> ..."."""
    with pytest.raises(IsADirectoryError, match="is a folder; give the path of the index file"):
        EmbeddingIndex.build(np.eye(3)).save(tmp_path)
    assert list(tmp_path.iterdir()) == []
