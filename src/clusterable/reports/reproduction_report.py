"""The report of one reproduction: the paper's numbers beside ours, its claims and whether they
hold here, the experiment's figures, and what produced them (``clusterable reproduce``), as
Markdown, JSON and an HTML page."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from pathlib import Path

from clusterable.reports.experiment_report import ExperimentReport
from clusterable.reports.page import Html, Section, escape, note, render, table, write_page
from clusterable.reports.panels import settings_section

#: The report's file name in the experiment's folder.
REPORT_NAME = "report.html"

_VERDICT = {True: ("holds", "good"), False: ("does not hold", "bad"), None: ("not checked", "")}


def write_report(report: ExperimentReport, folder: Path) -> None:
    """Write ``results.md``, ``results.json`` and ``report.html`` of an experiment in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.md").write_text(report.markdown())
    (folder / "results.json").write_text(json.dumps(asdict(report), indent=2))
    write_reproduction_report(report, folder)


def write_reproduction_report(
    report: ExperimentReport, folder: Path, out: Path | None = None
) -> Path:
    """Write the page of ``report`` to ``out`` (``folder/report.html`` by default); its plots are
    read from ``folder``, the experiment's folder."""
    header, rows = report.table()
    sections = [Section("results", "Paper and ours", note(report.setup) + table(header, rows))]
    if report.claims:
        verdicts = [_VERDICT[claim.holds] for claim in report.claims]
        claim_rows = [
            [claim.text, verdict, claim.evidence]
            for claim, (verdict, _) in zip(report.claims, verdicts, strict=True)
        ]
        body = table(
            ["the paper's claim", "here", "evidence"], claim_rows, [k for _, k in verdicts]
        )
        sections.append(Section("claims", "Claims", body))
    if report.notes:
        items = "".join(f"<li>{escape(text)}</li>" for text in report.notes)
        sections.append(Section("notes", "Notes", f"<ul>{items}</ul>"))
    figures = [folder / name for name in report.plots if (folder / name).is_file()]
    if figures:
        images = "".join(_inline_png(path) for path in figures)
        sections.append(Section("figures", "Figures", images))
    if report.record:
        sections.append(settings_section(report.record, "How it was run", "record"))
    page = render(report.title, report.paper, sections, f"clusterable reproduce {report.name}")
    return write_page(page, out if out is not None else folder / REPORT_NAME)


def _inline_png(path: Path) -> Html:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return Html(
        f'<figure><img class="figure" alt="{escape(path.name)}" '
        f'src="data:image/png;base64,{data}"><figcaption>{escape(path.name)}</figcaption></figure>'
    )
