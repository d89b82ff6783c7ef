"""The report of an experiment: our numbers beside the paper's, the paper's claims checked.

Every reproduction (``clusterable reproduce``) returns an :class:`ExperimentReport`, and so does
``clusterable demo``; :func:`~clusterable.reports.reproduction_report.write_report` writes it as
``results.md``, ``results.json`` and ``report.html`` in the experiment's folder, with the command,
seeds, library versions and wall time that produced it. Values are fractions in [0, 1]; tables
print percentages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class Row:
    """One method's results: our mean (and std over seeds), and the paper's number if it has one."""

    method: str
    ours: dict[str, float]
    std: dict[str, float] = field(default_factory=dict)
    paper: dict[str, float] = field(default_factory=dict)
    note: str = ""

    @classmethod
    def from_runs(
        cls,
        method: str,
        runs: list[dict[str, float]],
        paper: dict[str, float] | None = None,
        note: str = "",
    ) -> Row:
        """Mean and standard deviation over seeds of each metric the runs share."""
        keys = [k for k in runs[0] if all(k in r for r in runs)]
        ours = {k: float(np.mean([r[k] for r in runs])) for k in keys}
        std = {k: float(np.std([r[k] for r in runs])) for k in keys} if len(runs) > 1 else {}
        return cls(method, ours, std, paper or {}, note)

    def cell(self, metric: str) -> str:
        """Our value of ``metric`` in percent, "mean ± std" when there are several seeds."""
        value = self.ours.get(metric)
        if value is None:
            return "—"
        spread = f" ± {100 * self.std[metric]:.2f}" if metric in self.std else ""
        return f"{100 * value:.2f}{spread}"


@dataclass
class Claim:
    """A claim of the paper and whether it held here (None: could not be checked)."""

    text: str
    holds: bool | None
    evidence: str


@dataclass
class ExperimentReport:
    """The result of one experiment of ``clusterable reproduce``."""

    name: str
    title: str
    paper: str
    setup: str  # data, model, budget; what was scaled down from the paper and why
    metrics: list[str]  # columns of the table, keys of Row.ours
    rows: list[Row] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)  # file names in the experiment folder
    notes: list[str] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)  # command, seeds, versions, wall time
    #: At which budget the claims were judged: epochs, training size, seeds, search.
    budget: str = ""  # empty in reports written before it was recorded

    @classmethod
    def from_json(cls, path: Path) -> ExperimentReport:
        """Read back the ``results.json`` that
        :func:`~clusterable.reports.reproduction_report.write_report` wrote."""
        values = json.loads(Path(path).read_text())
        values["rows"] = [Row(**row) for row in values["rows"]]
        values["claims"] = [Claim(**claim) for claim in values["claims"]]
        return cls(**values)

    def table(self) -> tuple[list[str], list[list[str]]]:
        """The results as ``(header, rows)`` of text cells in percent: ours (mean +- std over
        seeds), then the paper's number for every metric the paper reports."""
        header = ["method"] + [f"{m} (ours)" for m in self.metrics]
        with_paper = [m for m in self.metrics if any(m in r.paper for r in self.rows)]
        header += [f"{m} (paper)" for m in with_paper]
        rows = []
        for row in self.rows:
            cells = [row.method + (f" ({row.note})" if row.note else "")]
            cells += [row.cell(m) for m in self.metrics]
            cells += [f"{100 * row.paper[m]:.2f}" if m in row.paper else "—" for m in with_paper]
            rows.append(cells)
        return header, rows

    def markdown(self, plot_prefix: str = "") -> str:
        """The report as Markdown: table, claims and plots (paths prefixed by ``plot_prefix``)."""
        lines = [f"## {self.title} (`{self.name}`)", "", f"*{self.paper}*", "", self.setup, ""]
        header, rows = self.table()
        lines += ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
        lines += ["| " + " | ".join(cells) + " |" for cells in rows]
        if self.claims:
            if self.budget:
                lines += ["", f"Claims judged at the {self.budget}."]
            lines += ["", "| paper's claim | holds here? | evidence |", "|---|---|---|"]
            verdict = {True: "yes", False: "**no**", None: "not checked"}
            lines += [f"| {c.text} | {verdict[c.holds]} | {c.evidence} |" for c in self.claims]
        lines += [""] + [f"- {note}" for note in self.notes]
        lines += [f"![{p}]({plot_prefix}{p})" for p in self.plots]
        record = self.record
        if record:
            lines += [
                "",
                f"<sub>`{record.get('command', '')}` — seeds {record.get('seeds')}, "
                f"{record.get('wall_time_s', 0):.0f} s, {record.get('versions', {})}</sub>",
            ]
        return "\n".join(lines) + "\n"
