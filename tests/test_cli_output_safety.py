"""No output flag replaces what the user keeps: a command's own inputs, its other outputs, the files
a run folder or an embed folder owns; and each flag writes its own kind of file. Every refusal is
one line, before any work, and leaves the files as they were."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_cli_use import one_line_error, work  # noqa: F401  (tests/: the trained run)

from clusterable.cli import main
from clusterable.trained_run import MODEL_IDENTITY


@pytest.fixture(scope="module")
def saved(work, tmp_path_factory):  # noqa: F811
    """The run's test split embedded into a folder of its own (``embed``), and a partition."""
    folder, run, _ = work
    emb = tmp_path_factory.mktemp("safety") / "emb"
    assert main(["embed", str(run), "--out", str(emb)]) == 0
    partition = emb.parent / "part.npz"
    argv = ["cluster", str(emb / "embeddings.npy"), "--out", str(emb.parent / "c.npy")]
    assert main([*argv, "--save", str(partition)]) == 0
    return folder, run, emb, partition


def snapshot(*paths):
    return {path: path.read_bytes() for path in paths}


def refused(capsys, argv, verb, *kept, says=()):
    """``argv`` stops with one line naming what it says, and every file in ``kept`` is intact."""
    before = snapshot(*kept)
    err = one_line_error(capsys, [str(a) for a in argv], verb)
    assert snapshot(*kept) == before
    for words in says:
        assert words in err, err
    return err


def test_an_output_may_not_be_an_input_of_the_command(saved, capsys):
    folder, _, emb, partition = saved
    index, embeddings, labels = folder / "gallery.npz", emb / "embeddings.npy", emb / "labels.npy"
    # (command line, files it must leave intact, words its one line must hold)
    cases = [
        (["search", index, embeddings, "--json", index], [index], ["--json", "INDEX"]),
        (["evaluate", embeddings, labels, "--json", labels], [labels], ["--json", "LABELS"]),
        (["cluster", embeddings, "--save", embeddings], [embeddings], ["--save", "EMBEDDINGS"]),
        (
            ["assign", partition, embeddings, "--out", embeddings],
            [embeddings, partition],
            ["--out", "SOURCE"],
        ),
        (["classify", index, embeddings, "--output", index], [index], ["--output"]),
    ]
    for argv, kept, says in cases:
        refused(capsys, argv, argv[0], *kept, says=says)


def test_an_input_given_through_another_path_is_still_refused(saved, tmp_path, capsys):
    """The same file under another name: a symbolic link, a hard link, a path with ``..``."""
    _, _, emb, _ = saved
    labels = emb / "labels.npy"
    linked = tmp_path / "linked.npy"
    linked.hardlink_to(labels)
    argv = ["evaluate", emb / "embeddings.npy", linked, "--json", labels]
    refused(capsys, argv, "evaluate", labels)
    roundabout = emb / ".." / emb.name / "labels.npy"
    argv = ["evaluate", emb / "embeddings.npy", roundabout, "--json", labels]
    refused(capsys, argv, "evaluate", labels)


def test_two_outputs_may_not_be_one_file(saved, tmp_path, capsys):
    _, _, emb, _ = saved
    same = tmp_path / "same.npy"
    err = refused(
        capsys, ["cluster", emb / "embeddings.npy", "--out", same, "--save", same], "cluster"
    )
    assert "--save" in err and "--out" in err
    assert not same.exists()


def test_no_output_replaces_a_file_a_run_owns(saved, capsys):
    _, run, emb, _ = saved
    kept = [run / "run.json", run / "test_metrics.json", run / "log.jsonl"]
    refused(capsys, ["report", run, "--out", run / "run.json"], "report", *kept, says=["run.json"])
    argv = ["evaluate", emb / "embeddings.npy", emb / "labels.npy", "--json"]
    refused(capsys, [*argv, run / "test_metrics.json"], "evaluate", *kept)
    refused(capsys, [*argv, run / "checkpoints" / "t.json"], "evaluate", says=["checkpoints"])
    assert not (run / "checkpoints" / "t.json").exists()
    # What a verb writes into a run folder by right is still written there: report.html.
    page = run / "report.html"
    assert main(["report", str(run), "--out", str(page), *(["--overwrite"] * page.exists())]) == 0
    # An existing output of the right kind that is nothing else of the command is replaced
    # when told (--overwrite), and only then (test_an_existing_output_is_refused_...).
    table = emb.parent / "t.json"
    table.write_text("{}")
    assert main([*map(str, argv), str(table), "--metrics", "nmi", "--overwrite"]) == 0
    assert "nmi" in json.loads(table.read_text())


def test_no_output_replaces_a_file_beside_saved_embeddings(saved, capsys):
    _, _, emb, _ = saved
    argv = ["evaluate", emb / "embeddings.npy", emb / "labels.npy", "--json", emb / "model.json"]
    refused(capsys, argv, "evaluate", emb / "model.json", says=["model.json"])
    from clusterable.cli._files import IDENTITY_FILE

    assert IDENTITY_FILE == MODEL_IDENTITY  # the name the CLI protects is the one it reads


@pytest.mark.parametrize(
    ("verb", "flag", "name", "suffix"),
    [
        ("evaluate", "--json", "table.txt", ".json"),
        ("evaluate", "--report", "page.json", ".html"),
        ("cluster", "--save", "part.npy", ".npz"),
        ("cluster", "--json", "clusters.npy", ".json"),
        ("search", "--json", "hits.csv", ".json"),
        ("index", "--out", "gallery.json", ".npz"),
        ("report", "--out", "page.json", ".html"),
        ("export", "--out", "model.txt", ".onnx"),
    ],
)
def test_each_output_flag_writes_its_own_kind(saved, tmp_path, capsys, verb, flag, name, suffix):
    folder, run, emb, _ = saved
    sources = {
        "evaluate": [emb / "embeddings.npy", emb / "labels.npy"],
        "cluster": [emb / "embeddings.npy"],
        "search": [folder / "gallery.npz", emb / "embeddings.npy"],
        "index": [run, "--data", "digits"],
        "report": [run],
        "export": [run],
    }[verb]
    target = tmp_path / name
    refused(capsys, [verb, *sources, flag, target], verb, says=[flag, suffix])
    assert not target.exists()


def test_export_refuses_another_formats_suffix(saved, tmp_path, capsys):
    _, run, _, _ = saved
    argv = ["export", run, "--format", "torchscript", "--out", tmp_path / "model.onnx"]
    refused(capsys, argv, "export", says=[".pt"])
    assert list(tmp_path.iterdir()) == []


def test_embed_refuses_to_write_over_its_own_source(saved, tmp_path, capsys):
    _, run, emb, _ = saved
    copy = tmp_path / "emb"
    copy.mkdir()
    for name in ("embeddings.npy", "labels.npy"):
        (copy / name).write_bytes((emb / name).read_bytes())
    argv = ["embed", copy / "embeddings.npy", copy / "labels.npy", "--out", copy]
    refused(capsys, argv, "embed", copy / "embeddings.npy", copy / "labels.npy")
    refused(capsys, ["embed", run, "--out", run], "embed", run / "run.json", says=["run folder"])
    assert not (run / "embeddings.npy").exists()


def test_embed_removes_the_side_files_it_did_not_write(saved, tmp_path, capsys):
    """An earlier embed's is_query.npy (a query/gallery split) or model.json (a run's) would be
    read back beside the new embeddings as theirs: embed removes them."""
    _, run, emb, _ = saved
    out = tmp_path / "e2"
    assert main(["embed", str(run), "--out", str(out)]) == 0
    rows = len(np.load(out / "labels.npy"))
    np.save(out / "is_query.npy", np.arange(rows) % 2 == 0)  # as a query/gallery embed leaves it
    assert main(["embed", str(run), "--out", str(out), "--overwrite"]) == 0
    assert not (out / "is_query.npy").exists() and (out / "model.json").is_file()
    assert "is_query.npy" in capsys.readouterr().out
    argv = ["embed", str(emb / "embeddings.npy"), str(emb / "labels.npy"), "--out", str(out)]
    argv.append("--overwrite")
    assert main(argv) == 0  # saved arrays: no run made them here, so no model.json
    assert not (out / "model.json").exists()
    assert main(["evaluate", str(out / "embeddings.npy"), str(out / "labels.npy")]) == 0
    assert "query and gallery roles" not in capsys.readouterr().out


def existing_output_cases(saved, target):
    """``case -> (command line, the path its flag names, the existing file it would replace)``
    of every output flag, each writing under the folder ``target``."""
    folder, run, emb, partition = saved
    embeddings, labels = emb / "embeddings.npy", emb / "labels.npy"
    index = folder / "gallery.npz"
    export = ["export", run, "--format", "torchscript", "--out"]
    cases = {
        "evaluate --json": (["evaluate", embeddings, labels, "--json"], "t.json", ""),
        "evaluate --report": (["evaluate", embeddings, labels, "--report"], "p.html", ""),
        "cluster --out": (["cluster", embeddings, "--out"], "c.npy", ""),
        "cluster --save": (["cluster", embeddings, "--save"], "p.npz", ""),
        "cluster --json": (["cluster", embeddings, "--json"], "c.json", ""),
        "embed --out": (["embed", run, "--out"], "emb", "emb/embeddings.npy"),
        "plot --out": (["plot", embeddings, labels, "--out"], "plots", "plots/tsne.png"),
        "index --out": (["index", run, "--data", "digits", "--out"], "g.npz", ""),
        "search --json": (["search", index, embeddings, "--json"], "hits.json", ""),
        "assign --out": (["assign", partition, embeddings, "--out"], "a.npy", ""),
        "assign --json": (["assign", partition, embeddings, "--json"], "a.json", ""),
        "classify --output": (["classify", index, embeddings, "--output"], "l.csv", ""),
        "report --out": (["report", run, "--out"], "page.html", ""),
        "export --out": (export, "m.pt", ""),
        "export --out, FILE.json": (export, "n.pt", "n.pt.json"),
    }
    assert sorted(cases) == sorted(OUTPUT_CASES)
    return {
        case: (argv, target / given, target / (existing or given))
        for case, (argv, given, existing) in cases.items()
    }


#: Every output flag of the verbs (`existing_output_cases`).
OUTPUT_CASES = (
    "evaluate --json",
    "evaluate --report",
    "cluster --out",
    "cluster --save",
    "cluster --json",
    "embed --out",
    "plot --out",
    "index --out",
    "search --json",
    "assign --out",
    "assign --json",
    "classify --output",
    "report --out",
    "export --out",
    "export --out, FILE.json",
)


@pytest.mark.parametrize("case", OUTPUT_CASES)
def test_an_existing_output_is_refused_before_any_work_unless_overwrite(
    saved, tmp_path, capsys, monkeypatch, case
):
    """One rule for every output flag (`clusterable.cli._files.check_outputs`): a file that
    exists already, the one the flag names or one the verb writes in the folder it names or
    beside its file, is refused in one line naming the flag, the file and --overwrite, before a
    run is read or any array loaded; and the file is as it was."""
    from clusterable.trained_run import TrainedRun

    argv, given, existing = existing_output_cases(saved, tmp_path)[case]
    existing.parent.mkdir(parents=True, exist_ok=True)
    existing.write_bytes(b"kept")

    def no_work(*args, **kwargs):
        raise AssertionError("work began before the refusal")

    monkeypatch.setattr(TrainedRun, "load", no_work)
    monkeypatch.setattr(np, "load", no_work)
    flag = str(argv[-1])
    err = refused(capsys, [*argv, given], argv[0], existing, says=[flag, str(given), "--overwrite"])
    assert existing.name in err and ("already" in err or "would replace" in err), err
    left = {path.relative_to(tmp_path) for path in tmp_path.rglob("*")}
    assert left == {existing.relative_to(tmp_path), *existing.relative_to(tmp_path).parents} - {
        Path()
    }, "a refused command wrote something"


def test_overwrite_replaces_an_existing_output(saved, tmp_path):
    _, _, emb, _ = saved
    table, clusters = tmp_path / "t.json", tmp_path / "c.npy"
    table.write_text("{}")
    np.save(clusters, np.zeros(3))
    argv = ["evaluate", emb / "embeddings.npy", emb / "labels.npy", "--metrics", "nmi"]
    assert main([*map(str, argv), "--json", str(table), "--overwrite"]) == 0
    assert set(json.loads(table.read_text())) == {"nmi"}
    argv = ["cluster", str(emb / "embeddings.npy"), "--out", str(clusters), "--overwrite"]
    assert main(argv) == 0
    assert np.load(clusters).shape == np.load(emb / "labels.npy").shape


def test_cluster_refuses_to_replace_its_default_out(saved, tmp_path, monkeypatch, capsys):
    """``cluster``'s ``--out`` has a default (clusters.npy): a second ``cluster`` in the same
    folder would replace the first one's ids."""
    _, _, emb, _ = saved
    monkeypatch.chdir(tmp_path)
    argv = ["cluster", str(emb / "embeddings.npy")]
    assert main(argv) == 0
    first = (tmp_path / "clusters.npy").read_bytes()
    err = refused(capsys, [*argv, "--n-clusters", "3"], "cluster", tmp_path / "clusters.npy")
    assert "--out clusters.npy already exists" in err and "--overwrite" in err
    assert main([*argv, "--n-clusters", "3", "--overwrite"]) == 0
    assert (tmp_path / "clusters.npy").read_bytes() != first


def test_every_verb_that_writes_a_file_takes_overwrite():
    """The verbs whose output flags `check_outputs` checks take ``--overwrite``; ``train`` too (a
    run folder). ``tune`` resumes the search in its ``--out``, and ``demo`` and ``reproduce``
    rewrite their own report folders (`reproduce all --from-json` reads them back)."""
    from test_cli_help_examples import verb_parsers

    output_flags = {"--out", "--json", "--report", "--save", "--output"}
    own_folders = {"tune", "demo", "reproduce"}
    for verb, parser in verb_parsers().items():
        flags = {flag for action in parser._actions for flag in action.option_strings}
        if flags & output_flags and verb not in own_folders:
            assert "--overwrite" in flags, verb
