"""The report of a reproduction: paper beside ours, claims with their verdicts, figures inline."""

from __future__ import annotations

import numpy as np
from PIL import Image

from clusterable.cli import main
from clusterable.reports import Claim, ExperimentReport, Row, write_report

from _html import decoded_png, image_sources, section_ids


def experiment(folder) -> ExperimentReport:
    Image.fromarray(np.full((30, 50, 3), 200, np.uint8)).save(folder / "map.png")
    return ExperimentReport(
        name="toy",
        title="A toy experiment",
        paper="A. Author, A paper, 2020",
        setup="Two methods, one seed.",
        metrics=["nmi", "f1"],
        rows=[
            Row("ours-a", {"nmi": 0.5, "f1": 0.25}, {"nmi": 0.01}, {"nmi": 0.6}),
            Row("ours-b", {"nmi": 0.7, "f1": 0.5}),
        ],
        claims=[
            Claim("a beats b", False, "50.00 < 70.00"),
            Claim("b clusters", True, "f1 50.00"),
            Claim("c exists", None, "not run"),
        ],
        plots=["map.png"],
        notes=["scaled down"],
        record={"command": "clusterable reproduce toy", "seeds": [0]},
    )


def test_the_table_and_claims_match_the_markdown(tmp_path):
    report = experiment(tmp_path)
    write_report(report, tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert section_ids(page) == ["results", "claims", "notes", "figures", "record"]
    _, rows = report.table()
    assert rows[0] == ["ours-a", "50.00 ± 1.00", "25.00", "60.00"]
    for cells in rows:
        assert "".join(f"<td>{c}</td>" for c in cells) in page
        assert "| " + " | ".join(cells) + " |" in (tmp_path / "results.md").read_text()
    assert '<tr class="bad"><td>a beats b</td><td>does not hold</td>' in page
    assert '<tr class="good"><td>b clusters</td><td>holds</td>' in page
    assert "<td>c exists</td><td>not checked</td>" in page
    assert decoded_png(image_sources(page)[0]).size == (50, 30)


def test_the_command_rebuilds_it_from_the_json(tmp_path, capsys):
    write_report(experiment(tmp_path), tmp_path)
    (tmp_path / "report.html").unlink()
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "again.html")]) == 0
    assert "A toy experiment" in (tmp_path / "again.html").read_text()
    assert not (tmp_path / "report.html").exists()
