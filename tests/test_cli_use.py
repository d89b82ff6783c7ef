"""The verbs that use a trained model: index, search, cluster --save, assign, export, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clusterable.cli import main
from clusterable.cluster import Partition
from clusterable.data import load_dataset
from clusterable.index import EmbeddingIndex
from clusterable.trained_run import TrainedRun

TRAIN = ["--data", "digits", "--loss", "contrastive", "--embedding-dim", "8", "--epochs", "1"]


def train(out: Path, seed: int = 0) -> Path:
    assert main(["train", *TRAIN, "--seed", str(seed), "--no-progress", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A trained digits run, its gallery index, and five test digits saved as PNG files."""
    folder = tmp_path_factory.mktemp("use")
    run = train(folder / "run")
    assert (
        main(
            [
                "index",
                str(run),
                "--data",
                "digits",
                "--split",
                "train",
                "--out",
                str(folder / "gallery.npz"),
            ]
        )
        == 0
    )
    test = load_dataset("digits", split="test")
    pngs = []
    for i in range(5):
        path = folder / "queries" / f"q{i}.png"
        path.parent.mkdir(exist_ok=True)
        pixels = np.round(test.x[i, 0] * 255).astype(np.uint8)
        Image.fromarray(pixels, mode="L").save(path)
        pngs.append(path)
    return folder, run, pngs


def one_line_error(capsys, argv: list[str], verb: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith(f"clusterable {verb}: error:") and "\n" not in err and "Traceback" not in err
    )
    return err


def test_index_holds_the_gallery_with_labels_and_model_identity(work):
    folder, run, _ = work
    index = EmbeddingIndex.load(folder / "gallery.npz")
    embedder = TrainedRun.load(run)
    gallery = embedder.embed("digits", split="train")
    np.testing.assert_array_equal(index.vectors, gallery.embeddings)
    assert index.labels.tolist() == gallery.labels.tolist()
    assert (index.model, index.run) == (embedder.model_id, str(run.resolve()))


def test_index_of_a_run_without_data_indexes_the_run_s_own_data_set(work, tmp_path):
    """``index RUN`` without ``--data`` takes the data set the run trained on, as ``cluster
    RUN`` and ``evaluate RUN`` do (`TrainedRun.split`): the index ``--data digits`` builds, and
    every item of it without ``--split``; a query then searches it."""
    folder, run, pngs = work
    own = tmp_path / "own.npz"
    assert main(["index", str(run), "--split", "train", "--out", str(own)]) == 0
    built, named = EmbeddingIndex.load(own), EmbeddingIndex.load(folder / "gallery.npz")
    np.testing.assert_array_equal(built.vectors, named.vectors)
    assert built.ids.tolist() == named.ids.tolist()
    assert built.labels.tolist() == named.labels.tolist()
    assert (built.model, built.run) == (named.model, named.run)
    every = tmp_path / "every.npz"
    assert main(["index", str(run), "--out", str(every)]) == 0
    assert len(EmbeddingIndex.load(every)) == len(load_dataset("digits", split="all"))
    hits = tmp_path / "hits.json"
    assert main(["search", str(own), str(pngs[0]), "-k", "3", "--json", str(hits)]) == 0
    (query,) = json.loads(hits.read_text())["queries"]
    assert query["query"] == str(pngs[0].resolve()) and len(query["neighbours"]) == 3


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_an_approximate_index_prints_its_measured_recall(work, tmp_path, capsys, kind):
    _, run, _ = work
    out = tmp_path / f"{kind}.npz"
    argv = ["index", str(run), "--data", "digits", "--split", "train", "--kind", kind]
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    index = EmbeddingIndex.load(out)
    assert index.kind == kind and 0.0 < index.recall_at_10 <= 1.0
    assert f"recall@10 against exact search {100 * index.recall_at_10:.2f} %" in printed


def test_search_images_prints_and_writes_the_neighbours(work, capsys):
    folder, run, pngs = work
    out = folder / "hits.json"
    argv = ["search", str(folder / "gallery.npz"), *map(str, pngs), "-k", "3", "--json", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    hits = json.loads(out.read_text())
    index = EmbeddingIndex.load(folder / "gallery.npz")
    queries = TrainedRun.load(run).embed([str(p) for p in pngs]).embeddings
    distances, rows, _ = index.search(queries, 3)
    assert [q["query"] for q in hits["queries"]] == [str(p) for p in pngs]
    for q, result in enumerate(hits["queries"]):
        assert [n["id"] for n in result["neighbours"]] == rows[q].tolist()
        assert [n["label"] for n in result["neighbours"]] == index.labels[rows[q]].tolist()
        np.testing.assert_allclose(
            [n["distance"] for n in result["neighbours"]], distances[q], rtol=1e-6
        )
    heading = f"the 3 nearest items of {folder / 'gallery.npz'} (euclidean) to each query: rank, "
    assert printed.startswith(heading + "distance, id, label\n"), printed  # what the columns are
    assert f"query {pngs[0]}" in printed and printed.count("\n") == 1 + 5 * 4 + 1  # + "wrote"


def test_search_takes_saved_embeddings_and_checks_their_model(work, tmp_path, capsys):
    folder, run, _ = work
    assert main(["embed", str(run), "--split", "test", "--out", str(tmp_path / "emb")]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "search",
                str(folder / "gallery.npz"),
                str(tmp_path / "emb" / "embeddings.npy"),
                "-k",
                "2",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines()[1] == "query 0"  # row numbers name the queries

    identity = tmp_path / "emb" / "model.json"
    identity.write_text(json.dumps({"model": "0" * 64, "run": "elsewhere"}))
    err = one_line_error(
        capsys,
        ["search", str(folder / "gallery.npz"), str(tmp_path / "emb" / "embeddings.npy")],
        "search",
    )
    assert "embedded by another model" in err


def test_search_refuses_a_run_whose_model_is_not_the_gallerys(work, tmp_path, capsys):
    folder, _, pngs = work
    other = train(tmp_path / "other", seed=1)
    err = one_line_error(
        capsys, ["search", str(folder / "gallery.npz"), str(pngs[0]), "--run", str(other)], "search"
    )
    assert "was made by another model than the one of" in err


@pytest.mark.parametrize("method", ["kmeans", "aas"])
def test_cluster_save_then_assign_gives_the_fitted_labels_back(work, tmp_path, capsys, method):
    _, run, pngs = work
    assert main(["embed", str(run), "--split", "test", "--out", str(tmp_path / "emb")]) == 0
    emb = tmp_path / "emb" / "embeddings.npy"
    k = ["--n-clusters", "10"] if method == "kmeans" else []
    argv = ["cluster", str(emb), "--clustering", method, *k, "--out", str(tmp_path / "c.npy")]
    assert main([*argv, "--save", str(tmp_path / "part.npz")]) == 0
    fitted = np.load(tmp_path / "c.npy")
    assert Partition.load(tmp_path / "part.npz").labels_.tolist() == fitted.tolist()

    out = tmp_path / "assigned.json"
    assert main(["assign", str(tmp_path / "part.npz"), str(emb), "--json", str(out)]) == 0
    assert [item["cluster"] for item in json.loads(out.read_text())["items"]] == fitted.tolist()

    capsys.readouterr()
    assert main(["assign", str(tmp_path / "part.npz"), str(run), str(pngs[0].parent)]) == 0
    printed = capsys.readouterr().out
    assert printed.count(".png") == 5 and "assigned 5 items" in printed


def test_assign_refuses_another_models_items(work, tmp_path, capsys):
    """A partition remembers whose embeddings it clustered: another run's model, or embeddings
    whose model.json names another model, are refused, as `search` refuses them."""
    _, run, pngs = work
    other = train(tmp_path / "other", seed=1)
    for source, folder in ((run, "emb"), (other, "other-emb")):
        assert main(["embed", str(source), "--out", str(tmp_path / folder)]) == 0
    emb, other_emb = (tmp_path / f / "embeddings.npy" for f in ("emb", "other-emb"))
    part = tmp_path / "part.npz"
    argv = ["cluster", str(emb), "--n-clusters", "10", "--out", str(tmp_path / "c.npy")]
    assert main([*argv, "--save", str(part)]) == 0
    assert (
        Partition.load(part).model == json.loads((emb.with_name("model.json")).read_text())["model"]
    )
    by_run = one_line_error(capsys, ["assign", str(part), str(other), str(pngs[0])], "assign")
    assert "another model" in by_run
    by_file = one_line_error(capsys, ["assign", str(part), str(other_emb)], "assign")
    assert "another model" in by_file and "model.json" in by_file
    assert main(["assign", str(part), str(run), str(pngs[0])]) == 0


def test_cluster_a_run_saves_its_model_and_scores_its_labels(work, tmp_path, capsys):
    """`cluster RUN` clusters the split the run embeds in its own view: the partition keeps the
    run's model (assign takes that run's items), and the split's labels score it."""
    from clusterable.trained_run import TrainedRun

    _, run, pngs = work
    part = tmp_path / "part.npz"
    argv = ["cluster", str(run), "--n-clusters", "10", "--out", str(tmp_path / "c.npy")]
    assert main([*argv, "--save", str(part)]) == 0
    printed = capsys.readouterr().out
    assert "NMI" in printed and "k-means++ seeding" in printed
    trained = TrainedRun.load(run, device="cpu")
    assert Partition.load(part).model == trained.model_id
    expected = Partition.load(part).predict(trained.embed(trained.split("test")).embeddings)
    assert np.load(tmp_path / "c.npy").tolist() == expected.tolist()
    assert main(["assign", str(part), str(run), str(pngs[0])]) == 0
    saved = ["cluster", str(tmp_path / "c.npy"), "--split", "train"]
    err = one_line_error(capsys, saved, "cluster")
    assert "--split picks the items a run embeds" in err


def test_export_writes_a_checked_model_with_its_description(work, tmp_path, capsys):
    _, run, _ = work
    assert (
        main(["export", str(run), "--format", "torchscript", "--out", str(tmp_path / "m.pt")]) == 0
    )
    sidecar = json.loads((tmp_path / "m.pt.json").read_text())
    assert (
        sidecar["input"]["shape"] == ["batch", 1, 8, 8]
        and sidecar["parity_max_abs_difference"] <= 1e-5
    )


def test_bad_input_gets_one_line_errors(work, tmp_path, capsys):
    folder, run, pngs = work
    gallery = str(folder / "gallery.npz")
    size = len(EmbeddingIndex.load(gallery))
    assert f"choose 1 <= k <= {size}" in one_line_error(
        capsys, ["search", gallery, str(pngs[0]), "-k", "5000"], "search"
    )
    np.save(tmp_path / "wide.npy", np.zeros((2, 9), np.float32))
    assert "expects grayscale images" in one_line_error(
        capsys, ["search", gallery, str(tmp_path / "wide.npy")], "search"
    )
    assert "does not exist" in one_line_error(
        capsys, ["search", str(tmp_path / "none.npz"), str(pngs[0])], "search"
    )
    cut = tmp_path / "cut.npz"
    cut.write_bytes((folder / "gallery.npz").read_bytes()[:5000])
    assert "rebuild it with `clusterable index`" in one_line_error(
        capsys, ["search", str(cut), str(pngs[0])], "search"
    )

    np.save(tmp_path / "points.npy", np.random.default_rng(0).normal(size=(30, 3)))
    assert (
        main(
            [
                "cluster",
                str(tmp_path / "points.npy"),
                "--n-clusters",
                "2",
                "--out",
                str(tmp_path / "c.npy"),
                "--save",
                str(tmp_path / "p3.npz"),
            ]
        )
        == 0
    )
    err = one_line_error(
        capsys, ["assign", str(tmp_path / "p3.npz"), str(tmp_path / "wide.npy")], "assign"
    )
    assert "not a .npy of 3-dimensional embeddings" in err
    err = one_line_error(
        capsys, ["assign", str(tmp_path / "p3.npz"), str(run), str(pngs[0])], "assign"
    )
    assert "fitted on 3-dimensional points" in err
    assert "does not exist" in one_line_error(
        capsys,
        ["index", str(tmp_path / "norun"), "--data", "digits", "--out", str(tmp_path / "i.npz")],
        "index",
    )


def test_an_interrupted_index_leaves_no_file(work, tmp_path, monkeypatch):
    _, run, _ = work

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    argv = ["index", str(run), "--data", "digits", "--out", str(tmp_path / "out" / "i.npz")]
    assert main(argv) == 130  # Ctrl-C: one line, exit 130
    assert list((tmp_path / "out").iterdir()) == []


def test_an_unwritable_index_path_fails_before_embedding(work, tmp_path, capsys):
    _, run, _ = work
    (tmp_path / "file").write_text("not a folder")
    err = one_line_error(
        capsys,
        ["index", str(run), "--data", "digits", "--out", str(tmp_path / "file" / "i.npz")],
        "index",
    )
    assert "cannot write" in err and "embedded" not in capsys.readouterr().out


def test_evaluate_refuses_counts_beyond_the_split_before_embedding_it(work, capsys):
    """The audit's ``--ks 1000`` and ``--n-clusters 10000`` were refused only after the test
    split was embedded (minutes with an image backbone)."""
    _, run, _ = work
    for flags, said in (
        (["--ks", "1,1000"], "K = 1000 but only 538 candidate neighbour(s) exist"),
        (["--n-clusters", "10000"], "cannot make 10000 clusters from 539 points"),
    ):
        with pytest.raises(SystemExit):
            main(["evaluate", str(run), *flags])
        printed = capsys.readouterr()
        assert said in printed.err and "embedding" not in printed.out, printed


def test_search_and_assign_take_the_split_of_a_data_set(work, tmp_path, capsys):
    """``--split`` picks the queries of a data set, as classify's does: digits' 539 test items,
    not all of them; beside saved embeddings it is refused."""
    folder, run, _ = work
    gallery = str(folder / "gallery.npz")
    hits = tmp_path / "hits.json"
    argv = ["search", gallery, "digits", "--split", "test", "-k", "1", "--json", str(hits)]
    assert main(argv) == 0
    assert len(json.loads(hits.read_text())["queries"]) == 539
    assert main(["embed", str(run), "--split", "test", "--out", str(tmp_path / "emb")]) == 0
    emb = tmp_path / "emb" / "embeddings.npy"
    partition = tmp_path / "part.npz"
    argv = ["cluster", str(emb), "--n-clusters", "10", "--out", str(tmp_path / "c.npy")]
    assert main([*argv, "--save", str(partition)]) == 0
    out = tmp_path / "assigned.json"
    argv = ["assign", str(partition), str(run), "digits", "--split", "test", "--json", str(out)]
    assert main(argv) == 0
    assert len(json.loads(out.read_text())["items"]) == 539
    capsys.readouterr()
    err = one_line_error(capsys, ["search", gallery, str(emb), "--split", "test"], "search")
    assert "drop --split" in err
    argv = ["assign", str(partition), str(emb), "--split", "test"]
    assert "drop --split" in one_line_error(capsys, argv, "assign")
