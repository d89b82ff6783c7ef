"""``cluster`` and ``evaluate`` with a method's own options (``--clustering-arg``), and the
headings that say how the partition was made."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clusterable.cli import main
from clusterable.cluster import fit


@pytest.fixture(scope="module")
def blobs(tmp_path_factory) -> tuple[Path, Path]:
    """200 points of 5 Gaussian blobs in 16-d (x = N(0, 1) + 3 onehot(class)), the case where AAS
    with the paper's defaults leaves nearly every point alone."""
    folder = tmp_path_factory.mktemp("blobs")
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(5), 40)
    points = rng.normal(size=(200, 16)) + 3.0 * np.eye(16)[labels]
    np.save(folder / "emb.npy", points.astype(np.float32))
    np.save(folder / "labels.npy", labels)
    return folder / "emb.npy", folder / "labels.npy"


def one_line_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_cluster_passes_the_methods_options_and_names_them(blobs, tmp_path, capsys):
    emb, labels = blobs
    out = tmp_path / "clusters.npy"
    argv = ["cluster", str(emb), "--clustering", "aas", "--labels", str(labels), "--out", str(out)]
    main([*argv, "--clustering-arg", "eps=0.3", "--clustering-arg", "k_graph=20"])
    want = fit(np.load(emb), "aas", k_graph=20, eps=0.3).labels_
    np.testing.assert_array_equal(np.load(out), want)
    heading = next(line for line in capsys.readouterr().out.splitlines() if "scored" in line)
    assert heading.endswith(f"{len(set(want.tolist()))} clusters found (eps 0.3, k_graph 20)")


def test_evaluate_passes_the_methods_options(blobs, capsys):
    emb, labels = blobs
    main(["evaluate", str(emb), str(labels), "--clustering", "aas", "--clustering-arg", "eps=0.3"])
    found = len(set(fit(np.load(emb), "aas", eps=0.3).labels_.tolist()))
    assert f"{found} clusters found (eps 0.3)" in capsys.readouterr().out


def test_kmeans_options_update_its_rule_and_its_heading(blobs, tmp_path, capsys):
    emb, labels = blobs
    argv = ["cluster", str(emb), "--labels", str(labels), "--out", str(tmp_path / "c.npy")]
    main([*argv, "--clustering-arg", "n_init=3"])
    assert "(k-means++ seeding, 3 restarts of at most 20 iterations" in capsys.readouterr().out


@pytest.mark.parametrize(
    "pair,words",
    [
        ("epss=0.3", "--clustering-arg: --clustering aas takes no argument epss; its arguments"),
        ("eps=abc", "--clustering-arg eps=abc is not a float"),
        ("k_graph=2.5", "--clustering-arg k_graph=2.5 is not a int"),
        ("eps=-1", "--clustering-arg (--clustering aas): eps must be >= 0"),
        ("seed=3", "--clustering-arg seed: set by --seed"),
        ("eps", "--clustering-arg takes name=value, got 'eps'; e.g. --clustering-arg eps=0.3"),
    ],
)
def test_bad_clustering_args_are_one_line_errors_before_any_work(
    blobs, tmp_path, capsys, pair, words
):
    emb, _ = blobs
    out = tmp_path / "clusters.npy"
    argv = ["cluster", str(emb), "--clustering", "aas", "--out", str(out), "--clustering-arg", pair]
    assert words in one_line_error(capsys, argv)
    assert not out.exists()


def test_the_headings_count_the_noise(blobs, tmp_path, capsys):
    emb, labels = blobs
    out = tmp_path / "clusters.npy"
    argv = ["--clustering", "hdbscan"]
    main(["cluster", str(emb), "--labels", str(labels), "--out", str(out), *argv])
    noise = int((np.load(out) < 0).sum())
    main(["evaluate", str(emb), str(labels), *argv])
    printed = capsys.readouterr().out
    assert noise > 0 and printed.count(f"clusters found, {noise} items noise") == 2


def test_cluster_states_the_spectral_k_means_step_as_evaluate_does(blobs, tmp_path, capsys):
    emb, labels = blobs
    argv = ["--clustering", "spectral"]
    main(["cluster", str(emb), "--labels", str(labels), "--out", str(tmp_path / "c.npy"), *argv])
    main(["evaluate", str(emb), str(labels), *argv])
    printed = capsys.readouterr().out
    assert printed.count("clusters found (k-means of the spectral rows: k-means++ seeding") == 2


def test_aas_leaving_most_points_alone_says_why_and_what_to_set(blobs, tmp_path, capsys):
    emb, _ = blobs
    main(["cluster", str(emb), "--clustering", "aas", "--out", str(tmp_path / "c.npy")])
    err = capsys.readouterr().err
    assert "clusterable: warning: AAS left" in err and "--clustering-arg eps=0.3" in err


def test_assign_says_when_no_item_got_a_cluster(blobs, tmp_path, capsys):
    emb, _ = blobs
    saved = tmp_path / "p.npz"
    argv = ["--n-clusters", "5", "--save", str(saved), "--out", str(tmp_path / "c.npy")]
    main(["cluster", str(emb), *argv])
    far = tmp_path / "far.npy"
    np.save(far, np.load(emb)[:3] + 100.0)
    capsys.readouterr()
    main(["assign", str(saved), str(far), "--max-distance", "1"])
    assert "items per cluster: none, no item was assigned a cluster" in capsys.readouterr().out
