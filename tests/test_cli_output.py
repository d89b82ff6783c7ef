"""What the command line prints: a start banner, a line per epoch, labelled tables, short
warnings, help with defaults; and the figures' legends and axes."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from clusterable.cli import main
from clusterable.device import resolve_device
from clusterable.evaluate import available_metrics


@pytest.fixture(scope="module")
def run_and_output(tmp_path_factory):
    import contextlib
    import io

    out = tmp_path_factory.mktemp("out") / "run"
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["train", "--data", "digits", "--epochs", "3", "--embedding-dim", "8"]
    argv += ["--batch-size", "60", "--out", str(out)]
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        assert main(argv) == 0
    return out, stdout.getvalue(), stderr.getvalue()


def test_train_prints_a_banner_then_one_line_per_epoch(run_and_output):
    out, stdout, _ = run_and_output
    lines = stdout.splitlines()
    first_epoch = next(i for i, line in enumerate(lines) if line.startswith("epoch "))
    banner = "\n".join(lines[:first_epoch])
    where = f"on {resolve_device('auto').type}"  # the device rule's choice: cpu here
    for word in ("digits", "train 1130", "test 539", "mlp", "lifted", where, str(out), "3 epochs"):
        assert word in banner, (word, banner)
    epoch_lines = [line for line in stdout.splitlines() if line.startswith("epoch ")]
    assert len(epoch_lines) == 3 and all("recall@1" in line for line in epoch_lines)


def test_progress_bars_stay_off_a_redirected_stream(run_and_output):
    _, _, stderr = run_and_output
    assert "it/s" not in stderr and "\r" not in stderr


def test_the_test_table_says_split_size_clustering_and_k(run_and_output):
    _, stdout, _ = run_and_output
    heading = next(line for line in stdout.splitlines() if line.startswith("test split"))
    assert "539 items" in heading and "k-means" in heading and "k = 10" in heading
    assert "pairwise precision (clusters)" in stdout and "Hungarian accuracy" in stdout


@pytest.fixture
def blobs(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 20)
    np.save(tmp_path / "e.npy", rng.normal(size=(60, 4)) + 8 * np.eye(4)[labels])
    np.save(tmp_path / "l.npy", labels)
    np.save(tmp_path / "names.npy", np.array(["cat", "dog", "eel"])[labels])
    return tmp_path


def test_evaluate_accepts_text_labels_and_labels_its_table(blobs, capsys):
    assert main(["evaluate", str(blobs / "e.npy"), str(blobs / "names.npy")]) == 0
    out = capsys.readouterr().out
    assert "60 items" in out and "k-means, k = 3" in out and "NMI (clusters)" in out
    assert "pairwise recall (clusters)" in out


def test_evaluate_metrics_computes_only_those(blobs, capsys):
    out = blobs / "t.json"
    argv = ["evaluate", str(blobs / "e.npy"), str(blobs / "l.npy"), "--json", str(out)]
    assert main([*argv, "--metrics", "map@r", "nmi"]) == 0
    assert set(json.loads(out.read_text())) == {"map@r", "nmi"}
    assert "k-means, k = 3" in capsys.readouterr().out

    assert main([*argv, "--metrics", "recall@k", "--clustering", "aas", "--overwrite"]) == 0
    assert set(json.loads(out.read_text())) == {"recall@1", "recall@2", "recall@4", "recall@8"}
    printed = capsys.readouterr().out
    assert "evaluated: 60 items" in printed and "clustering" not in printed


def test_evaluate_metrics_are_the_registered_ones(capsys):
    from clusterable.cli import build_parser

    verbs = build_parser()._subparsers._group_actions[0].choices
    flag = next(a for a in verbs["evaluate"]._actions if "--metrics" in a.option_strings)
    assert [flag.type(name) for name in available_metrics()] == available_metrics()
    with pytest.raises(SystemExit):
        main(["evaluate", "e.npy", "l.npy", "--metrics", "nmx"])
    err = capsys.readouterr().err
    assert "unknown metric 'nmx' (did you mean nmi?)" in err
    assert all(name in err for name in available_metrics())


def test_cluster_scores_its_partition_with_the_evaluation_table(blobs, capsys):
    argv = ["cluster", str(blobs / "e.npy"), "--labels", str(blobs / "l.npy")]
    assert main([*argv, "--out", str(blobs / "c.npy")]) == 0
    out = capsys.readouterr().out
    for label in ("NMI (clusters)", "pairwise F1 (clusters)", "ARI (clusters)"):
        assert label in out
    assert "100.00 %" in out and "retrieval" not in out


def test_evaluate_aas_prints_the_clusters_found(blobs, capsys):
    argv = ["evaluate", str(blobs / "e.npy"), str(blobs / "l.npy"), "--clustering", "aas"]
    assert main(argv) == 0
    assert "clusters found" in capsys.readouterr().out


def test_cluster_kmeans_takes_k_from_the_labels(blobs, capsys):
    argv = ["cluster", str(blobs / "e.npy"), "--labels", str(blobs / "names.npy")]
    assert main([*argv, "--out", str(blobs / "c.npy")]) == 0
    assert len(np.unique(np.load(blobs / "c.npy"))) == 3
    assert "n_clusters = 3" in capsys.readouterr().out


def test_cluster_aas_refuses_k(blobs, capsys):
    with pytest.raises(SystemExit):
        main(["cluster", str(blobs / "e.npy"), "--method", "aas", "--k", "10"])
    assert "drop --n-clusters" in capsys.readouterr().err


def test_cluster_auto_with_a_method_that_cannot_choose_names_the_flags(blobs, capsys):
    with pytest.raises(SystemExit):
        main(["cluster", str(blobs / "e.npy"), "--clustering", "ap", "--n-clusters", "auto"])
    err = capsys.readouterr().err.strip()
    assert err == (
        "clusterable cluster: error: --clustering ap cannot choose its number of clusters: give "
        "--n-clusters N, or --clustering kmeans or spectral with --n-clusters auto"
    )


def test_warnings_are_one_line_without_a_source_path(blobs, capsys, monkeypatch):
    from clusterable import cluster

    fit = cluster.fit

    def warning_fit(*args, **kwargs):
        warnings.warn("affinity propagation did not converge", UserWarning, stacklevel=1)
        return fit(*args, **kwargs)

    monkeypatch.setattr(cluster, "fit", warning_fit)
    argv = ["cluster", str(blobs / "e.npy"), "--n-clusters", "3", "--out", str(blobs / "c.npy")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "did not converge" in err and ".py" not in err and err.count("\n") == 1


def test_evaluate_a_run_on_other_data_says_so(run_and_output, tmp_path, capsys):
    out, _, _ = run_and_output
    np.savez(tmp_path / "t.npz", x=np.ones((40, 5)), y=np.arange(40) % 2)
    with pytest.raises(SystemExit):
        main(["evaluate", str(out), "--data", f"table:{tmp_path / 't.npz'}"])
    err = capsys.readouterr().err
    assert "trained on digits" in err and "(1, 8, 8)" in err and "(5,)" in err


def test_help_shows_defaults_and_defines_the_label_view(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 30)" in text and "(default: digits)" in text and "(default: lifted)" in text
    assert "--label-view" in text and "coarse (MsDNN's merged classes" in text


def test_evaluate_help_prints_a_single_percent_sign(capsys):
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    out = capsys.readouterr().out
    assert "%%" not in out and "(printed in %)" in " ".join(out.split())


def test_embed_help_names_every_file_embed_writes(capsys):
    from clusterable.cli._files import embed_files

    with pytest.raises(SystemExit):
        main(["embed", "--help"])
    text = capsys.readouterr().out
    assert [name for name in embed_files() if name not in text] == []


def test_version(capsys):
    from clusterable import __version__

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and __version__ in capsys.readouterr().out


def captured_figure(monkeypatch, module):
    figures = []
    monkeypatch.setattr(module, "save_figure", lambda figure, path: figures.append(figure) or path)
    return figures


def test_tsne_plot_has_a_legend_of_class_names(monkeypatch, tmp_path):
    from clusterable.plots import tsne

    figures = captured_figure(monkeypatch, tsne)
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 15)
    points = rng.normal(size=(45, 4)) + 5 * np.eye(4)[labels]
    tsne.plot_tsne(points, labels, tmp_path / "t.png", class_names=["cat", "dog", "eel"])
    legend = figures[0].axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["cat", "dog", "eel"]


def test_retrieval_grid_titles_name_the_classes(monkeypatch, tmp_path):
    from clusterable.plots import retrieval_grid as retrieval

    figures = captured_figure(monkeypatch, retrieval)
    labels = np.repeat(np.arange(2), 10)
    images = np.random.default_rng(0).random((20, 1, 8, 8))
    embeddings = np.eye(2)[labels] + 0.01 * np.arange(20)[:, None]
    retrieval.plot_retrieval_grid(
        images, embeddings, labels, tmp_path / "g.png", n_queries=2, k=2, class_names=["a", "b"]
    )
    titles = [ax.get_title() for ax in figures[0].axes]
    assert any(title.startswith("query: ") for title in titles)
    assert all(title.split(": ")[-1] in ("a", "b") for title in titles)


def test_curves_are_in_percent_with_whole_epoch_ticks(monkeypatch, run_and_output):
    from clusterable.plots import curves

    figures = captured_figure(monkeypatch, curves)
    out, _, _ = run_and_output
    curves.plot_training_curves(out / "log.jsonl", out / "c.png")
    loss_ax, metric_ax = figures[0].axes
    assert metric_ax.get_ylim() == (0, 100)
    plotted = metric_ax.get_lines()[0].get_ydata()
    assert max(plotted) > 1.0, "validation scores drawn in %"
    ticks = loss_ax.get_xticks()
    assert np.allclose(ticks, np.round(ticks))


def test_no_progress_still_prints_a_line_per_epoch(tmp_path, capsys):
    argv = ["train", "--data", "digits", "--epochs", "2", "--embedding-dim", "8", "--no-progress"]
    assert main([*argv, "--batch-size", "60", "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("epoch ")] == [
        "1/2",
        "2/2",
    ]


def test_evaluate_and_cluster_state_one_k_means_rule_and_agree(blobs, capsys):
    rule = "(k-means++ seeding, 10 restarts of at most 20 iterations, best inertia)"
    assert main(["evaluate", str(blobs / "e.npy"), str(blobs / "l.npy"), "--metrics", "nmi"]) == 0
    evaluated = capsys.readouterr().out.splitlines()
    assert evaluated[0].endswith(f"k-means, k = 3, 3 clusters found {rule}")
    argv = ["cluster", str(blobs / "e.npy"), "--labels", str(blobs / "l.npy")]
    assert main([*argv, "--out", str(blobs / "c.npy")]) == 0
    scored = capsys.readouterr().out.splitlines()
    heading = next(line for line in scored if line.startswith("scored: 60 items"))
    assert heading.endswith(rule)
    nmi = [line.split()[-2] for line in (*evaluated, *scored) if "NMI" in line]
    assert len(nmi) == 2 and nmi[0] == nmi[1]  # the same NMI from the same partition


def test_a_reader_that_leaves_early_loses_no_file(tmp_path):
    """``search ... --json hits.json | head -2``: the reader goes after two lines; the search
    still writes its JSON and ends without an error (it said "error: broken pipe" and wrote
    nothing)."""
    import subprocess
    import sys

    from clusterable.index import EmbeddingIndex

    rng = np.random.default_rng(0)
    gallery = rng.normal(size=(300, 8)).astype(np.float32)
    EmbeddingIndex.build(gallery, labels=np.arange(300) % 3).save(tmp_path / "g.npz")
    np.save(tmp_path / "queries.npy", gallery)  # 300 queries x 10 lines: far past a pipe's buffer
    search = f"{sys.executable} -m clusterable search g.npz queries.npy -k 9 --json hits.json"
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {search} | head -2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 2  # a note on the queries' model, then query 0
    assert done.stderr == ""
    hits = json.loads((tmp_path / "hits.json").read_text())
    assert len(hits["queries"]) == 300 and len(hits["queries"][-1]["neighbours"]) == 9


def test_messages_name_what_was_given(blobs, tmp_path, capsys):
    """The audit's unclear lines: a missing run called a missing index; an embeddings file called
    "cluster ids only"; a run's own labels called "--labels"."""
    with pytest.raises(SystemExit):
        main(["classify", str(tmp_path / "runs" / "nope"), str(blobs / "e.npy")])
    err = capsys.readouterr().err
    assert "does not exist: give a run folder" in err and "search index file" not in err
    with pytest.raises(SystemExit):
        main(["report", str(blobs / "e.npy")])
    err = capsys.readouterr().err
    assert "neither a run folder nor an experiment folder" in err and "ids only" not in err
    argv = ["cluster", str(blobs / "e.npy"), "--labels", str(blobs / "l.npy")]
    assert main([*argv, "--out", str(tmp_path / "c.npy")]) == 0
    out = capsys.readouterr().out
    assert "n_clusters = 3: the number of classes in the labels (--n-clusters sets it)" in out


def test_an_array_files_error_names_the_file(tmp_path, capsys):
    """The audit's lines said "emb has 20 row(s) with NaN" and "labels has 3 entries": the
    library's argument names, not the files the user gave."""
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(20, 4)).astype(np.float32)
    np.save(tmp_path / "e5.npy", embeddings[:5])
    np.save(tmp_path / "lab3.npy", np.arange(3))
    embeddings[3, 1] = np.nan
    np.save(tmp_path / "nan.npy", embeddings)
    np.save(tmp_path / "lab.npy", np.arange(20) % 2)
    for argv, said in (
        (["nan.npy", "lab.npy"], f"embeddings file {tmp_path / 'nan.npy'} has 1 row(s) with NaN"),
        (["e5.npy", "lab3.npy"], f"labels file {tmp_path / 'lab3.npy'} has 3 entries"),
    ):
        with pytest.raises(SystemExit):
            main(["evaluate", *(str(tmp_path / name) for name in argv)])
        assert said in capsys.readouterr().err


def test_the_command_line_writes_to_a_stream_whose_write_returns_nothing(blobs, tmp_path):
    """sphinx-gallery's capture (the documentation's examples) returns None from ``write``: the
    verb prints through it as through any stream."""
    import contextlib

    class Capture:
        def __init__(self) -> None:
            self.parts: list[str] = []

        def write(self, text: str) -> None:
            self.parts.append(text)

        def flush(self) -> None:
            pass

    capture = Capture()
    argv = ["cluster", str(blobs / "e.npy"), "--labels", str(blobs / "l.npy")]
    with contextlib.redirect_stdout(capture):
        assert main([*argv, "--out", str(tmp_path / "c.npy")]) == 0
    assert "n_clusters = 3" in "".join(capture.parts)


@pytest.mark.parametrize("verb", ["embed", "plot"])
def test_a_refused_source_leaves_no_out_folder(run_and_output, tmp_path, capsys, verb):
    """`embed` and `plot` check `--out` before any work, and a source refused after that check
    (data the run cannot embed) leaves no empty folder behind; a good one still writes there."""
    run, _, _ = run_and_output
    out = tmp_path / "made" / "here"
    with pytest.raises(SystemExit) as stop:
        main([verb, str(run), "--data", "no-such-data", "--out", str(out)])
    assert stop.value.code == 2
    assert "unknown dataset 'no-such-data'" in capsys.readouterr().err
    assert not (tmp_path / "made").exists()
    if verb == "embed":
        assert main([verb, str(run), "--out", str(out)]) == 0
        assert (out / "embeddings.npy").is_file()
