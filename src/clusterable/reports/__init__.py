"""Self-contained HTML reports of a training run, a clustering and a reproduction.

One page each that opens offline (figures and thumbnails inline, no script, no network request):
:func:`write_run_report` (``clusterable report RUN``), :func:`write_clustering_report`
(``clusterable report PARTITION --embeddings EMB.npy``) and :func:`write_reproduction_report`
(written by ``clusterable reproduce`` beside each experiment's results).
"""

from clusterable._optional import require

# The check first, so that a missing matplotlib names the extra to install.
require("matplotlib", "HTML reports (their figures)")

from clusterable.reports.clustering_report import write_clustering_report  # noqa: E402
from clusterable.reports.reproduction_report import write_reproduction_report  # noqa: E402
from clusterable.reports.run_report import write_run_report  # noqa: E402

__all__ = ["write_clustering_report", "write_reproduction_report", "write_run_report"]
