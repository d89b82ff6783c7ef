"""Self-contained HTML reports of a training run, a clustering, an evaluation and a reproduction.

One page each that opens offline (figures and thumbnails inline, no script, no network request):
:func:`write_run_report` (``clusterable report RUN``), :func:`write_clustering_report`
(``clusterable report PARTITION --embeddings EMB.npy``), :func:`write_evaluation_report`
(``clusterable evaluate ... --report PAGE.html``) and :func:`write_reproduction_report` (written by
``clusterable reproduce`` beside each experiment's results).

The report of an experiment is described by an :class:`ExperimentReport` (its :class:`Row` of
results per method and :class:`Claim` checked per claim of the paper), which every reproduction and
``clusterable demo`` return.
"""

from clusterable._optional import require

# The check first, so that a missing matplotlib names the extra to install.
require("matplotlib", "HTML reports (their figures)")

from clusterable.reports.clustering_report import write_clustering_report  # noqa: E402
from clusterable.reports.evaluation_report import write_evaluation_report  # noqa: E402
from clusterable.reports.experiment_report import Claim, ExperimentReport, Row  # noqa: E402
from clusterable.reports.reproduction_report import (  # noqa: E402
    write_report,
    write_reproduction_report,
)
from clusterable.reports.run_report import write_run_report  # noqa: E402

__all__ = [
    "Claim",
    "ExperimentReport",
    "Row",
    "write_clustering_report",
    "write_evaluation_report",
    "write_report",
    "write_reproduction_report",
    "write_run_report",
]
