"""``clusterable evaluate --report``: the table and the verification view of the evaluated items,
its numbers those of `select_threshold` on the same pairs."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from clusterable.cli import main
from clusterable.evaluate import select_threshold
from clusterable.evaluate.pair_sample import pair_distances
from clusterable.metric_table import metric_label
from clusterable.reports import evaluation_report, write_evaluation_report

from _html import decoded_png, image_sources, section, section_ids, table_rows
from _pairs import direct_rates, table_cells


@pytest.fixture
def saved(tmp_path):
    """Saved embeddings of 90 items in 4 classes, and their labels."""
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), [30, 25, 20, 15])
    embeddings = rng.normal(size=(4, 5))[labels] + 0.9 * rng.normal(size=(90, 5))
    np.save(tmp_path / "emb.npy", embeddings.astype(np.float32))
    np.save(tmp_path / "labels.npy", labels)
    return tmp_path / "emb.npy", tmp_path / "labels.npy"


def own_choice_cells(pairs) -> list[str]:
    """The table row of a threshold chosen on ``pairs`` themselves."""
    own = select_threshold(pairs.distances, pairs.same, "f1")
    rates = direct_rates(pairs.distances, pairs.same, own.threshold)
    return table_cells(len(pairs.distances), "f1", own.threshold, rates)


def test_saved_embeddings_get_the_table_and_the_view_chosen_on_themselves(saved, tmp_path):
    emb, labels = saved
    page_file, table_file = tmp_path / "page.html", tmp_path / "table.json"
    argv = ["evaluate", str(emb), str(labels), "--report", str(page_file)]
    assert main([*argv, "--json", str(table_file)]) == 0
    page = page_file.read_text()
    assert section_ids(page) == ["settings", "metrics", "verification"]
    table = json.loads(table_file.read_text())
    for key in ("recall@1", "map@r", "nmi"):
        assert f"<td>{metric_label(key)}</td><td>{100 * table[key]:.2f}</td>" in page
    pairs = pair_distances(np.load(emb), np.load(labels))
    view = section(page, "verification")
    assert table_rows(view) == {"the evaluated items": own_choice_cells(pairs)}
    assert f"all {pairs.total:,} pairs, {pairs.positives:,} same-class" in view
    assert "Saved embeddings come with no validation split" in view and "not held out" in view
    assert decoded_png(image_sources(view)[0]).size[0] > 500


def test_query_gallery_items_pair_each_query_with_the_gallery(saved, tmp_path):
    emb, labels = saved
    queries = np.arange(90) % 4 == 0
    np.save(tmp_path / "queries.npy", queries)
    argv = ["evaluate", str(emb), str(labels), "--queries", str(tmp_path / "queries.npy")]
    assert main([*argv, "--report", str(tmp_path / "page.html")]) == 0
    view = section((tmp_path / "page.html").read_text(), "verification")
    pairs = pair_distances(np.load(emb), np.load(labels), queries=queries)
    assert pairs.total == queries.sum() * (~queries).sum()
    assert table_rows(view) == {"the evaluated items": own_choice_cells(pairs)}


def test_above_the_cap_the_page_shows_a_seeded_sample_of_pairs(saved, tmp_path, monkeypatch):
    emb, labels = np.load(saved[0]), np.load(saved[1])
    capped = functools.partial(pair_distances, max_pairs=500)
    monkeypatch.setattr(evaluation_report, "pair_distances", capped)
    page = write_evaluation_report({}, emb, labels, tmp_path / "page.html", seed=7).read_text()
    view = section(page, "verification")
    pairs = capped(emb, labels, seed=7)
    assert f"a sample of 500 of {90 * 89 // 2:,} pairs (seed 7)" in view
    assert table_rows(view) == {"the evaluated items": own_choice_cells(pairs)}


def test_a_runs_own_test_split_takes_the_threshold_of_its_validation_split(digits_run, tmp_path):
    assert main(["evaluate", str(digits_run), "--report", str(tmp_path / "page.html")]) == 0
    evaluated = table_rows(section((tmp_path / "page.html").read_text(), "verification"))
    run_report = table_rows(section((digits_run / "report.html").read_text(), "verification"))
    # The run report's view, on the same items (all of the digits test split), the same numbers.
    assert evaluated["validation (chose it)"] == run_report["validation (chose it)"]
    assert evaluated["the evaluated items"] == run_report["the test split"]


def test_another_split_of_a_run_chooses_on_itself_and_says_why(digits_run, tmp_path):
    argv = ["evaluate", str(digits_run), "--split", "train"]
    assert main([*argv, "--report", str(tmp_path / "page.html")]) == 0
    view = section((tmp_path / "page.html").read_text(), "verification")
    assert list(table_rows(view)) == ["the evaluated items"]
    assert "chooses the threshold of its own test split only" in view


def test_an_unwritable_page_is_refused_before_any_work(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    page = tmp_path / "a-file" / "page.html"
    missing = tmp_path / "missing.npy"  # read only after the check: its error must not show
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", str(missing), str(missing), "--report", str(page)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "a-file" in error and "missing.npy" not in error
