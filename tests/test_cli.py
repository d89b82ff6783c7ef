"""The command line end to end: exit codes, files written, one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clusterable.cli import main


@pytest.fixture
def saved_embeddings(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 10)
    embeddings = rng.normal(size=(40, 5)) + 6.0 * np.eye(5)[labels]
    np.save(tmp_path / "emb.npy", embeddings)
    np.save(tmp_path / "labels.npy", labels)
    return tmp_path


def test_evaluate_prints_and_writes_the_table(saved_embeddings, capsys):
    out = saved_embeddings / "table.json"
    code = main(
        [
            "evaluate",
            str(saved_embeddings / "emb.npy"),
            str(saved_embeddings / "labels.npy"),
            "--json",
            str(out),
        ]
    )
    assert code == 0
    table = json.loads(out.read_text())
    assert table["recall@1"] == pytest.approx(1.0)
    assert table["nmi"] == pytest.approx(1.0)
    assert "recall@8 (retrieval)" in capsys.readouterr().out


def test_evaluate_queries_rank_the_gallery(saved_embeddings, capsys):
    from clusterable.evaluate import evaluate_embeddings

    emb, labels = np.load(saved_embeddings / "emb.npy"), np.load(saved_embeddings / "labels.npy")
    flags = np.arange(40) % 3 == 0
    np.save(saved_embeddings / "is_query.npy", flags)
    out = saved_embeddings / "table.json"
    args = [str(saved_embeddings / name) for name in ("emb.npy", "labels.npy")]
    queries = ["--queries", str(saved_embeddings / "is_query.npy")]
    assert main(["evaluate", *args, *queries, "--json", str(out)]) == 0
    want = evaluate_embeddings(emb, labels, queries=flags)
    assert json.loads(out.read_text()) == pytest.approx(want, abs=1e-12)
    assert "14 queries ranking the gallery" in capsys.readouterr().out
    np.save(saved_embeddings / "is_query.npy", flags.astype(int))
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", *args, *queries])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "give 40 booleans" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.npy", "does not exist"),
        (lambda d: (d / "text.npy").write_text("hello") and d / "text.npy", "is not a NumPy array"),
    ],
    ids=["missing", "not-an-array"],
)
def test_evaluate_bad_files_exit_with_one_line(saved_embeddings, capsys, make, message):
    path = make(saved_embeddings)
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", str(path), str(saved_embeddings / "labels.npy")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_evaluate_shape_mismatch_is_a_one_line_error(saved_embeddings, capsys):
    np.save(saved_embeddings / "short.npy", np.zeros(39, dtype=int))
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", str(saved_embeddings / "emb.npy"), str(saved_embeddings / "short.npy")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "39" in err and "40" in err and "Traceback" not in err


def test_demo_without_the_plots_extra_is_refused_before_it_trains(tmp_path, capsys, monkeypatch):
    """An installed wheel without clusterable[plots]: one line naming the extra, nothing trained."""
    import sys

    import clusterable.demo as demo

    def never(*args, **kwargs):
        raise AssertionError("the demo trained before it checked its extras")

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    monkeypatch.setattr(demo, "_run_demo", never)
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--quick", "--out", str(tmp_path / "demo")])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'clusterable[plots]'" in err


def test_demo_quick_writes_its_report(tmp_path, capsys):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "results.json").read_text())
    from clusterable.losses import available_losses

    assert set(report["results"]) == {"raw pixels", *available_losses()}
    for row in report["results"].values():
        assert all(0.0 <= row[c] <= 1.0 for c in ("recall@1", "map@r", "nmi", "f1"))
    assert "| lifted |" in (tmp_path / "results.md").read_text()
    captured = capsys.readouterr()
    printed = captured.out
    assert "wrote" in printed
    assert printed.rstrip().endswith(f"report (open it in a browser): {tmp_path / 'report.html'}")
    assert "training each loss" not in captured.err  # no progress bar off a terminal, as train
    page = (tmp_path / "report.html").read_text()
    assert "<td>lifted" in page and page.count('alt="tsne-') == len(available_losses())


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    code = main(
        [
            "train",
            "--data",
            "digits",
            "--loss",
            "lifted",
            "--loss-arg",
            "margin=0.5",
            "--embedding-dim",
            "16",
            "--epochs",
            "2",
            "--batch-size",
            "60",
            "--no-progress",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    return out


def test_train_writes_a_complete_run_folder(trained_run):
    names = {p.name for p in trained_run.iterdir()}
    assert {"run.json", "log.jsonl", "result.json", "test_metrics.json", "checkpoints"} <= names
    spec = json.loads((trained_run / "run.json").read_text())["spec"]
    assert spec["loss_args"] == {"margin": 0.5} and spec["embedding_dim"] == 16
    metrics = json.loads((trained_run / "test_metrics.json").read_text())
    assert 0.5 < metrics["recall@1"] <= 1.0 and "knn@5" in metrics


def test_evaluate_embed_cluster_plot_a_trained_run(trained_run, tmp_path, capsys):
    table = tmp_path / "table.json"
    assert main(["evaluate", str(trained_run), "--json", str(table)]) == 0
    expected = json.loads((trained_run / "test_metrics.json").read_text())
    assert json.loads(table.read_text())["recall@1"] == pytest.approx(expected["recall@1"])

    assert main(["embed", str(trained_run), "--out", str(tmp_path / "emb")]) == 0
    embeddings = np.load(tmp_path / "emb" / "embeddings.npy")
    labels = np.load(tmp_path / "emb" / "labels.npy")
    assert embeddings.shape == (len(labels), 16)

    # embed's labels.npy beside its embeddings: given or not, the same table
    saved, beside = str(tmp_path / "emb" / "embeddings.npy"), str(tmp_path / "emb" / "labels.npy")
    tables = []
    for argv in ([saved, beside], [saved]):
        argv += ["--json", str(table), "--overwrite"]
        assert main(["evaluate", *argv, "--metrics", "nmi", "map@r"]) == 0
        tables.append(json.loads(table.read_text()))
    assert tables[0] == tables[1] and set(tables[0]) == {"nmi", "map@r"}
    assert f"labels: {beside} (beside the embeddings)" in capsys.readouterr().out
    moved = tmp_path / "elsewhere.npy"
    moved.write_bytes((tmp_path / "emb" / "embeddings.npy").read_bytes())
    with pytest.raises(SystemExit):
        main(["evaluate", str(moved)])
    assert "no labels.npy lies beside it: give its labels too" in capsys.readouterr().err

    clusters = tmp_path / "clusters.npy"
    args = ["cluster", str(tmp_path / "emb" / "embeddings.npy"), "--clustering", "spectral"]
    assert (
        main(
            [
                *args,
                "--n-clusters",
                "10",
                "--labels",
                str(tmp_path / "emb" / "labels.npy"),
                "--out",
                str(clusters),
            ]
        )
        == 0
    )
    assert np.load(clusters).shape == labels.shape
    assert "NMI (clusters)" in capsys.readouterr().out

    assert main(["plot", str(trained_run), "--out", str(tmp_path / "plots")]) == 0
    from PIL import Image

    for name in ("tsne.png", "curves.png"):
        with Image.open(tmp_path / "plots" / name) as image:
            assert image.format == "PNG" and image.width > 100


def test_cluster_without_k_is_a_one_line_error(saved_embeddings, capsys):
    with pytest.raises(SystemExit) as exit_info:  # gmm cannot choose its own count
        main(["cluster", str(saved_embeddings / "emb.npy"), "--clustering", "gmm"])
    assert exit_info.value.code == 2
    assert "--n-clusters N" in capsys.readouterr().err


def test_cluster_chooses_k_where_the_method_can(saved_embeddings, tmp_path, capsys):
    out = tmp_path / "clusters.npy"
    args = ["cluster", str(saved_embeddings / "emb.npy"), "--n-clusters", "auto", "--out", str(out)]
    assert main(args) == 0
    chosen = capsys.readouterr().out.splitlines()[0]
    assert chosen.startswith("n_clusters = ") and chosen.endswith("chosen by silhouette")
    assert len(np.unique(np.load(out))) == int(chosen.split()[2].rstrip(":"))


def test_train_unknown_loss_argument_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(
            [
                "train",
                "--data",
                "digits",
                "--loss",
                "lifted",
                "--loss-arg",
                "marg=1",
                "--out",
                str(tmp_path),
            ]
        )
    assert "takes no argument marg" in capsys.readouterr().err


def test_reproduce_unknown_experiment_names_the_choices(capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "no-such-experiment"])
    err = capsys.readouterr().err
    assert "invalid choice: 'no-such-experiment' (choose from 'all', 'aas-synthetic'" in err


@pytest.mark.parametrize(
    ("embeddings", "labels", "extra", "message"),
    [
        (np.ones((6, 3)), np.zeros(6, dtype=int), [], "class"),
        (np.array([[np.nan, 0.0]] + [[1.0, 2.0]] * 5), np.array([0, 0, 0, 1, 1, 1]), [], "NaN"),
        (
            np.random.default_rng(0).normal(size=(6, 2)),
            np.array([0, 0, 0, 1, 1, 1]),
            ["--ks", "1", "--n-clusters", "50"],
            "50",
        ),
    ],
    ids=["one-class", "nan-row", "k-too-large"],
)
def test_evaluate_bad_arrays_are_one_line_errors(
    tmp_path, capsys, embeddings, labels, extra, message
):
    np.save(tmp_path / "e.npy", embeddings)
    np.save(tmp_path / "l.npy", labels)
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", str(tmp_path / "e.npy"), str(tmp_path / "l.npy"), *extra])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


@pytest.mark.slow
def test_train_under_torchrun_with_two_processes(tmp_path):
    import subprocess
    import sys

    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "-m",
        "clusterable",
        "train",
        "--data",
        "digits",
        "--loss",
        "spectral",
        "--chunk-size",
        "16",
        "--epochs",
        "1",
        "--batch-size",
        "60",
        "--embedding-dim",
        "16",
        "--no-progress",
        "--out",
        str(tmp_path),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("test split of digits") == 1, "exactly one process reports"
    assert done.stdout.count("data      digits") == 1, "one banner"
    meta = json.loads((tmp_path / "checkpoints" / "epoch-0001" / "meta.json").read_text())
    assert meta["world_size"] == 2
    assert 0.5 < json.loads((tmp_path / "test_metrics.json").read_text())["recall@1"] <= 1.0


def test_evaluate_takes_the_metric_names_its_tables_print(saved_embeddings, capsys):
    """`--metrics recall@1 recall@4 nmi` asks for what the table prints under those names: the
    Ks join the Recall@K list; a typo gets a "did you mean" and the names, in one line."""
    from clusterable.evaluate import evaluate_embeddings

    args = [str(saved_embeddings / name) for name in ("emb.npy", "labels.npy")]
    out = saved_embeddings / "picked.json"
    argv = ["evaluate", *args, "--metrics", "recall@1", "recall@4", "nmi", "--json", str(out)]
    assert main(argv) == 0
    got = json.loads(out.read_text())
    assert set(got) == {"recall@1", "recall@4", "nmi"}
    emb, labels = np.load(args[0]), np.load(args[1])
    want = evaluate_embeddings(emb, labels, metrics=["recall@k", "nmi"], ks=(1, 4))
    assert got == pytest.approx(dict(want), abs=1e-12)
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", *args, "--metrics", "recall@l"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_info.value.code == 2 and "did you mean recall@1?" in err and "map@r" in err


@pytest.mark.parametrize(
    "argv",
    [["evaluate", "e.npy", "--ks", "1,,2"], ["evaluat"], ["search", "i.npz", "q.png", "-k", "0"]],
    ids=["flag-type", "verb", "negative-k"],
)
def test_parse_errors_are_one_line_naming_the_flag(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "usage:" not in err
    assert err.startswith("clusterable") and "error: argument" in err and "--help`" in err
