"""One embedding rule and one label rule (`clusterable._arrays`), applied alike by every part of
the package that takes embeddings or labels: evaluation, clustering, the search index, and the
command line's label files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from clusterable import _arrays, cluster
from clusterable.cli._files import load_labels
from clusterable.cluster import _validation
from clusterable.evaluate import _inputs, evaluate_embeddings
from clusterable.index import EmbeddingIndex

#: Each place's own check of embeddings, as it is reached from its public functions.
EMBEDDING_CHECKS = {
    "evaluate": lambda x: _inputs.as_embeddings(x, "emb"),
    "cluster": lambda x: _validation.as_points(x),
    "index": lambda x: EmbeddingIndex.build(x).vectors,
    "index queries": lambda x: EmbeddingIndex.build(np.ones((1, x.shape[-1])))._check_queries(
        x, "queries"
    ),
}

POINTS = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])

#: Input dtype -> the dtype the rule gives: float32 and float64 kept, others promoted with
#: float32 (exactly), long double to float64.
DTYPE_RULE = [
    (np.float32, np.float32),
    (np.float64, np.float64),
    (np.float16, np.float32),
    (np.int8, np.float32),
    (np.uint8, np.float32),
    (np.int16, np.float32),
    (np.int32, np.float64),
    (np.int64, np.float64),
    (np.uint64, np.float64),
    (np.longdouble, np.float64),
]


@pytest.mark.parametrize("place", list(EMBEDDING_CHECKS))
@pytest.mark.parametrize(("given", "expected"), DTYPE_RULE)
def test_every_place_converts_numpy_embeddings_by_the_one_rule(place, given, expected):
    checked = EMBEDDING_CHECKS[place](POINTS.astype(given))
    assert checked.dtype == expected
    assert checked.flags.c_contiguous
    np.testing.assert_array_equal(checked, POINTS)


@pytest.mark.parametrize("place", list(EMBEDDING_CHECKS))
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (torch.bfloat16, np.float32),
        (torch.float16, np.float32),
        (torch.float32, np.float32),
        (torch.float64, np.float64),
        (torch.int64, np.float64),
    ],
)
def test_every_place_converts_torch_embeddings_by_the_one_rule(place, given, expected):
    tensor = torch.tensor(POINTS).to(given).requires_grad_(given.is_floating_point)
    checked = EMBEDDING_CHECKS[place](tensor)
    assert checked.dtype == expected
    np.testing.assert_array_equal(checked, POINTS)


def test_float32_and_float64_are_kept_without_a_copy():
    for dtype in (np.float32, np.float64):
        x = POINTS.astype(dtype)
        assert _arrays.as_embeddings(x) is x


@pytest.mark.parametrize("place", list(EMBEDDING_CHECKS))
def test_every_place_refuses_non_finite_rows_naming_the_first(place):
    x = POINTS.copy()
    x[1, 0], x[2, 1] = np.inf, np.nan
    with pytest.raises(
        ValueError, match=r"has 2 row\(s\) with NaN or infinite values \(first: row 1\)"
    ):
        EMBEDDING_CHECKS[place](x)


@pytest.mark.parametrize("place", list(EMBEDDING_CHECKS))
@pytest.mark.parametrize(
    ("given", "message"),
    [
        (np.array([1.0, 2.0]), r"must be a 2-D array.*reshape it to \(1, d\)"),
        (np.zeros((1, 2, 2)), "must be a 2-D array"),
        (np.zeros((0, 2)), "is empty"),
        (np.array([[True, False]]), "must hold real numbers, got dtype bool"),
        (np.array([[1 + 1j, 0]]), "must hold real numbers, got dtype complex128"),
        (np.array([["a", "b"]]), "must hold real numbers"),
    ],
)
def test_every_place_refuses_the_same_shapes_and_types(place, given, message):
    with pytest.raises(ValueError, match=message):
        EMBEDDING_CHECKS[place](given)


def test_the_public_calls_take_half_precision_tensors_as_their_float32_values():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(c, 0.1, (20, 3)) for c in (0.0, 3.0, 6.0)])
    labels = np.repeat([0, 1, 2], 20)
    bf16 = torch.tensor(x).to(torch.bfloat16)
    exact = bf16.float().numpy()  # what bfloat16 holds, in float32
    table = evaluate_embeddings(bf16, labels, metrics=["recall@k", "nmi"], ks=(1,))
    assert table == evaluate_embeddings(exact, labels, metrics=["recall@k", "nmi"], ks=(1,))
    np.testing.assert_array_equal(
        cluster.fit(bf16, "kmeans", 3, seed=0).labels_,
        cluster.fit(exact, "kmeans", 3, seed=0).labels_,
    )
    index = EmbeddingIndex.build(bf16)
    assert index.vectors.dtype == np.float32
    np.testing.assert_array_equal(index.search(bf16[:4], 2)[1], index.search(exact[:4], 2)[1])


def test_the_three_places_share_one_implementation():
    assert _inputs.as_embeddings is _arrays.as_embeddings
    assert _inputs.as_labels is _arrays.as_labels


#: Each place's labels, as it keeps them: evaluation's classes, the index's stored labels, the
#: command line's label file (integers as they are, text as sorted codes).
def _evaluate_labels(y):
    codes, classes = _inputs.as_labels(y, len(y))
    return classes[codes]


def _index_labels(y):
    return EmbeddingIndex.build(np.eye(len(y)), labels=y).labels


def _file_labels(y, folder):
    path = folder / "labels.npy"
    np.save(path, np.asarray(y))
    return load_labels(path, len(y))


LABEL_PLACES = {
    "evaluate": lambda y, folder: _evaluate_labels(y),
    "index": lambda y, folder: _index_labels(y),
    "label file": _file_labels,
}


@pytest.mark.parametrize("place", list(LABEL_PLACES))
@pytest.mark.parametrize(
    "given",
    [
        np.array([3, 1, 3, 7], dtype=np.int32),
        np.array([3.0, 1.0, 3.0, 7.0]),
        np.array([3, 1, 3, 7], dtype=np.uint8),
        torch.tensor([3, 1, 3, 7]),
    ],
)
def test_every_place_keeps_whole_number_labels_as_int64(place, given, tmp_path):
    if place == "label file" and isinstance(given, torch.Tensor):
        given = given.numpy()
    kept = LABEL_PLACES[place](given, tmp_path)
    assert kept.dtype == np.int64
    assert kept.tolist() == [3, 1, 3, 7]


@pytest.mark.parametrize("place", ["evaluate", "index"])
def test_text_labels_stay_text(place, tmp_path):
    kept = LABEL_PLACES[place](np.array(["b", "a", "b"]), tmp_path)
    assert kept.dtype.kind == "U" and kept.tolist() == ["b", "a", "b"]
    assert _file_labels(np.array(["b", "a", "b"]), tmp_path).tolist() == [1, 0, 1]  # codes


@pytest.mark.parametrize("place", list(LABEL_PLACES))
@pytest.mark.parametrize(
    ("given", "message"),
    [
        (np.array([0.0, 1.5, 1.0]), "labels holds non-integer floats"),
        (np.array([0.0, np.nan, 1.0]), r"labels has 1 missing label\(s\).*first: row 1"),
        (np.array([0.0, 1.0, np.inf]), r"labels has 1 missing label\(s\).*first: row 2"),
        (np.array([1 + 0j, 2, 3]), "labels must hold integers or strings"),
        (np.zeros((3, 2)), "labels must be 1-D"),
        (np.zeros(2), "labels has 2 entries but there are 3 items"),
    ],
)
def test_every_place_refuses_the_same_labels(place, given, message, tmp_path):
    if place == "label file":  # the same words, naming the file the labels came from
        message = message.replace("labels", r"labels file \S+labels\.npy", 1)

    def run():
        if place == "label file":
            path = tmp_path / "labels.npy"
            np.save(path, given)
            return load_labels(path, 3)
        if place == "index":
            return EmbeddingIndex.build(np.eye(3), labels=given)
        return _inputs.as_labels(given, 3)

    with pytest.raises(ValueError, match=message):
        run()


@pytest.mark.parametrize("place", ["evaluate", "index"])
def test_object_labels_of_numbers_and_text_are_refused(place, tmp_path):
    mixed = np.empty(3, dtype=object)
    mixed[:] = [1, "cat", 2]
    with pytest.raises(ValueError, match=r"int 1 \(row 0\), str 'cat' \(row 1\)"):
        LABEL_PLACES[place](mixed, tmp_path)
    missing = np.empty(3, dtype=object)
    missing[:] = ["a", None, "b"]
    with pytest.raises(ValueError, match=r"missing label\(s\).*first: row 1"):
        LABEL_PLACES[place](missing, tmp_path)


@pytest.mark.parametrize("place", ["evaluate", "index"])
def test_a_list_of_numbers_and_text_is_refused_as_its_object_array_is(place, tmp_path):
    """numpy reads the list [1, "1", 2] as the strings "1", "1", "2": 1 and "1" were one class."""
    with pytest.raises(ValueError, match=r"int 1 \(row 0\), str '1' \(row 1\)"):
        LABEL_PLACES[place]([1, "1", 2], tmp_path)
    with pytest.raises(ValueError, match=r"must be 1-D .* got rows of several lengths"):
        LABEL_PLACES[place]([[1], [2, 3], [4]], tmp_path)
    assert LABEL_PLACES[place]([[1], [2], [1]], tmp_path) is not None  # (n, 1), as arrays are
