"""The report of a training run: every panel that applies, every image inline, nothing remote."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from clusterable.cli import main
from clusterable.evaluate import evaluate_embeddings, select_threshold
from clusterable.evaluate.pair_sample import pair_distances
from clusterable.metric_table import metric_label
from clusterable.reports import write_run_report
from clusterable.reports.run_report import PANEL_ITEMS
from clusterable.trained_run import TrainedRun

from _html import decoded_png, image_sources, section, section_ids, table_rows
from _pairs import direct_rates, table_cells

PANELS = [
    "settings",
    "versions",
    "metrics",
    "curves",
    "classes",
    "map",
    "retrieval",
    "clusters",
    "verification",
]


def test_an_image_run_shows_every_panel(digits_run):
    page = (digits_run / "report.html").read_text()
    assert section_ids(page) == PANELS
    # Queries framed against their neighbours, and member strips of the clusters.
    assert page.count('class="thumb query"') == 12  # best, worst and random: 4 each
    assert 'class="thumb hit"' in page and 'class="thumb miss"' in page
    assert "majority class" in page and "purity" in page


def test_every_image_is_inline_and_nothing_is_fetched(digits_run):
    page = (digits_run / "report.html").read_text()
    sources = image_sources(page)
    assert len(sources) > 30
    for source in sources:
        assert decoded_png(source).size[0] > 0
    assert not re.search(r'(src|href)="(?!data:|#)', page)  # no file, http or relative link
    assert "default-src 'none'" in page  # the browser refuses any request the page might make


def test_the_metrics_are_the_runs_test_evaluation(digits_run):
    page = (digits_run / "report.html").read_text()
    metrics = json.loads((digits_run / "test_metrics.json").read_text())
    for key in ("recall@1", "map@r", "nmi", "f1", "accuracy"):
        row = f"<td>{metric_label(key)}</td><td>{100 * metrics[key]:.2f}</td>"
        assert row in page.replace("&#x27;", "'"), key


def test_per_class_results_put_the_worst_class_first(digits_run):
    page = (digits_run / "report.html").read_text()
    classes = page.split('<section id="classes">')[1].split("</section>")[0]
    header = re.findall(r"<th>([^<]+)</th>", classes)
    column = header.index("MAP@R")
    rows = re.findall(r"<tr[^>]*>((?:<td[^>]*>[^<]*</td>)+)</tr>", classes)
    values = [float(re.findall(r">([^<]*)</td>", row)[column]) for row in rows]
    assert len(values) == 10 and values == sorted(values)


def test_a_table_run_shows_ids_instead_of_images(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 40)
    features = rng.normal(size=(4, 6))[labels] + 0.3 * rng.normal(size=(160, 6))
    np.savez(tmp_path / "points.npz", x=features.astype(np.float32), y=labels)
    run = tmp_path / "run"
    argv = ["train", "--data", f"table:{tmp_path / 'points.npz'}", "--loss", "lifted"]
    assert main([*argv, "--epochs", "1", "--no-report", "--out", str(run)]) == 0
    assert not (run / "report.html").exists()
    page = write_run_report(run).read_text()
    assert section_ids(page) == PANELS
    assert 'class="thumb' not in page  # no thumbnails of feature rows
    retrieval = page.split('<section id="retrieval">')[1]
    assert '<span class="hit">' in retrieval and "<th>neighbours (class)</th>" in retrieval
    assert "members (a sample)" not in page


def test_a_coarse_run_maps_the_sub_classes_too(tmp_path):
    run = tmp_path / "coarse"
    argv = ["train", "--data", "digits", "--label-view", "coarse", "--loss", "lifted"]
    assert main([*argv, "--epochs", "1", "--no-report", "--out", str(run)]) == 0
    written = write_run_report(run, tmp_path / "page.html")
    assert written == tmp_path / "page.html" and not (run / "report.html").exists()
    page = written.read_text()
    map_image = decoded_png(image_sources(page.split('<section id="map">')[1])[0])
    assert map_image.size[0] > 1.6 * map_image.size[1]  # two panels: by class, by sub-class


def test_a_folder_that_is_not_a_run_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a run folder"):
        write_run_report(tmp_path)


def test_the_report_command_rewrites_the_page_train_wrote(digits_run, tmp_path, capsys):
    assert main(["report", str(digits_run), "--out", str(tmp_path / "again.html")]) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / 'again.html'}\n"
    page, again = (p.read_text() for p in (digits_run / "report.html", tmp_path / "again.html"))
    assert section_ids(again) == section_ids(page) == PANELS


def embedded_pairs(run: TrainedRun, dataset):
    embeddings = run.embed(dataset, progress=False).embeddings
    return pair_distances(embeddings, dataset.labels, seed=run.seed)


def test_the_threshold_is_chosen_on_validation_and_its_rates_read_on_test(digits_run):
    run = TrainedRun.load(digits_run, device="cpu")
    test = run.split("test")
    assert len(test) <= PANEL_ITEMS  # the panels embed every test item
    pairs, held_out = embedded_pairs(run, test), embedded_pairs(run, run.validation_split())
    chosen = select_threshold(held_out.distances, held_out.same, "f1")
    view = section((digits_run / "report.html").read_text(), "verification")
    rows = table_rows(view)
    assert rows["validation (chose it)"] == table_cells(
        len(held_out.distances),
        "f1",
        chosen.threshold,
        direct_rates(held_out.distances, held_out.same, chosen.threshold),
    )
    assert rows["the test split"] == table_cells(
        pairs.total,
        "f1 on validation",
        chosen.threshold,
        direct_rates(pairs.distances, pairs.same, chosen.threshold),
    )
    assert (
        f"Pairs of the test split: all {pairs.total:,} pairs, {pairs.positives:,} same-class"
        in view
    )
    assert "chosen (f1) on the validation split" in view


def test_the_validation_split_is_the_one_the_run_validated_on(digits_run):
    run = TrainedRun.load(digits_run, device="cpu")
    validation = run.validation_split()
    result = json.loads((digits_run / "result.json").read_text())
    best = result["history"][result["best_epoch"] - 1]  # the checkpoint the run keeps
    embeddings = run.embed(validation, progress=False).embeddings
    table = evaluate_embeddings(
        embeddings, validation.labels, metrics=["recall@k", "map@r"], ks=(1,)
    )
    assert (table["recall@1"], table["map@r"]) == pytest.approx((best["recall@1"], best["map@r"]))


def test_a_run_without_validation_chooses_on_the_test_pairs_and_says_so(tmp_path):
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(3), 30)
    features = rng.normal(size=(3, 5))[labels] + 0.5 * rng.normal(size=(90, 5))
    np.savez(tmp_path / "points.npz", x=features.astype(np.float32), y=labels)
    run = tmp_path / "run"
    argv = ["train", "--data", f"table:{tmp_path / 'points.npz'}", "--loss", "contrastive"]
    argv += ["--val-fraction", "0", "--epochs", "1", "--no-progress", "--out", str(run)]
    assert main(argv) == 0
    trained = TrainedRun.load(run, device="cpu")
    assert trained.validation_split() is None
    pairs = embedded_pairs(trained, trained.split("test"))
    own = select_threshold(pairs.distances, pairs.same, "f1")
    view = section((run / "report.html").read_text(), "verification")
    assert table_rows(view) == {
        "the test split": table_cells(
            pairs.total,
            "f1",
            own.threshold,
            direct_rates(pairs.distances, pairs.same, own.threshold),
        )
    }
    assert "The run has no validation split" in view and "not held out" in view
