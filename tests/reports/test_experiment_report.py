"""The report model of an experiment: rows average over seeds, cells in percent, the report
round-trips through JSON and reads as Markdown."""

from __future__ import annotations

from clusterable.reports import Claim, ExperimentReport, Row, write_report


def make_report(name: str) -> ExperimentReport:
    return ExperimentReport(
        name=name,
        title="A title",
        paper="A paper",
        setup="What was run.",
        metrics=["nmi", "f1"],
        rows=[
            Row.from_runs(
                "ours", [{"nmi": 0.5, "f1": 0.25}, {"nmi": 0.7, "f1": 0.35}], {"nmi": 0.8}
            ),
            Row("baseline", {"nmi": 0.4, "f1": 0.2}),
        ],
        claims=[Claim("ours beats the baseline", True, "NMI 60.0 vs 40.0")],
        plots=["figure.png"],
        record={"seeds": [0, 1], "wall_time_s": 1.0},
    )


def test_rows_average_over_seeds():
    row = make_report("x").rows[0]
    assert row.ours == {"nmi": 0.6, "f1": 0.3}
    assert abs(row.std["nmi"] - 0.1) < 1e-12


def test_json_round_trip_and_markdown(tmp_path):
    report = make_report("aas-synthetic")
    write_report(report, tmp_path / "aas-synthetic")
    again = ExperimentReport.from_json(tmp_path / "aas-synthetic" / "results.json")
    assert again == report
    text = report.markdown(plot_prefix="results/aas-synthetic/")
    assert "| ours | 60.00 ± 10.00 | 30.00 ± 5.00 | 80.00 |" in text
    assert "| ours beats the baseline | yes | NMI 60.0 vs 40.0 |" in text
    assert "![figure.png](results/aas-synthetic/figure.png)" in text


def test_a_cell_is_percent_with_the_spread_over_seeds():
    ours, baseline = make_report("x").rows
    assert ours.cell("nmi") == "60.00 ± 10.00"
    assert baseline.cell("nmi") == "40.00"  # one run: no spread
    assert baseline.cell("recall@1") == "—"


def test_the_claims_say_at_which_budget_they_were_judged():
    report = make_report("x")
    report.budget = "quick budget: 1 epoch(s) on 400 training items, seeds [0]"
    assert "Claims judged at the quick budget: 1 epoch(s)" in report.markdown()


def test_the_budget_round_trips(tmp_path):
    report = make_report("x")
    report.budget = "default budget"
    write_report(report, tmp_path)
    assert ExperimentReport.from_json(tmp_path / "results.json").budget == "default budget"
