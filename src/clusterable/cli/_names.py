"""The names the command line offers (datasets, models, losses, clusterings, metrics, ...),
declared here so that building the parser imports none of their implementations:
``clusterable --help`` and ``clusterable VERB --help`` import no torch, scikit-learn or faiss.

Each listing holds its registry's names; ``tests/test_cli_startup.py`` fails, naming the
difference, when one drifts from its registry. Where the registry's module is already imported
(a program or a test that registered its own loss or metric, then called `clusterable.cli.main`),
the registry itself answers, so a registered name reaches the command line with no edit here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Listing:
    """The names of one registry: ``ask(module)`` where ``module`` is imported, else ``names``."""

    module: str  # the module that holds the registry's listing function
    ask: Callable[[ModuleType], list[str]]  # that function's call
    names: tuple[str, ...]  # what it returns with the package's own components

    def current(self) -> list[str]:
        """The registry's answer when its module is imported, else the declared names."""
        module = sys.modules.get(self.module)
        return list(self.names) if module is None else list(self.ask(module))

    def registered(self) -> list[str]:
        """The registry's own answer (imports its module: for the tests)."""
        __import__(self.module)
        return list(self.ask(sys.modules[self.module]))


#: The metric registry's names, in table order, and those the default table leaves out.
METRIC_NAMES = (
    "recall@k",
    "precision@1",
    "map@r",
    "r_precision",
    "nmi",
    "precision",
    "recall",
    "f1",
    "accuracy",
    "ari",
    "v_measure",
    "silhouette",
    "roc_auc",
    "fnmr@fmr",
)
OFF_BY_DEFAULT = ("v_measure", "roc_auc", "fnmr@fmr")
#: Those asked with a rate, ``NAME=EPS`` (the registry's table keys ending in ``=EPS``).
PARAMETERISED_METRICS = ("fnmr@fmr",)
#: The accuracy of a run's trained classifier (`clusterable.train.config.CLASSIFICATION_ACCURACY`),
#: which ``evaluate RUN --metrics`` takes beside the registry's.
CLASSIFICATION_ACCURACY = "classification_accuracy"

LISTINGS: dict[str, Listing] = {
    "datasets": Listing(
        "clusterable.data",
        lambda m: m.available_datasets(),
        (
            "cars196",
            "cub200",
            "digits",
            "fashion-mnist",
            "image-folder",
            "inshop",
            "mnist",
            "sop",
            "table",
            "usps",
        ),
    ),
    "models": Listing(
        "clusterable.models",
        lambda m: m.available_models(),
        ("corel-cnn", "lenet", "mlp", "msdnn-cnn"),
    ),
    "losses": Listing(
        "clusterable.losses",
        lambda m: m.available_losses(),
        (
            "center",
            "contrastive",
            "cosine-corel",
            "cross-entropy",
            "expected-triplet",
            "gaussian-corel",
            "lifted",
            "msdnn",
            "opml",
            "snn",
            "spectral",
            "triplet",
        ),
    ),
    "samplers": Listing(
        "clusterable.mining",
        lambda m: m.available_samplers(),
        ("random", "class-balanced", "pairs-hard-negatives"),
    ),
    # With the short aliases (``ap``), as ``--clustering`` accepts them.
    "clusterings": Listing(
        "clusterable.cluster",
        lambda m: m.available_clusterings(aliases=True),
        ("aas", "affinity_propagation", "gmm", "hdbscan", "kmeans", "spectral", "ap"),
    ),
    # Their display labels, in name order: the `cluster` verb's description lists them.
    "clustering labels": Listing(
        "clusterable.cluster",
        lambda m: [m.clusterer_info(name).label for name in m.available_clusterings()],
        (
            "AAS",
            "affinity propagation",
            "Gaussian mixture",
            "HDBSCAN",
            "k-means",
            "DSCL spectral clustering",
        ),
    ),
    # Every name ``evaluate_embeddings(metrics=...)`` accepts, in table order.
    "metrics": Listing(
        "clusterable.evaluate.registry", lambda m: m.available_metrics(), METRIC_NAMES
    ),
    # The default table's metrics (``metrics=None``).
    "default metrics": Listing(
        "clusterable.evaluate.registry",
        lambda m: m.select_metrics(None),
        tuple(name for name in METRIC_NAMES if name not in OFF_BY_DEFAULT),
    ),
    # The keys a table can hold (``recall@K``, ``fnmr@fmr=EPS``), as ``tune --metric`` names
    # them.
    "table keys": Listing(
        "clusterable.evaluate.registry",
        lambda m: m.table_keys(),
        tuple(
            {"recall@k": "recall@K", "fnmr@fmr": "fnmr@fmr=EPS"}.get(name, name)
            for name in METRIC_NAMES
        ),
    ),
    "experiments": Listing(
        "clusterable.reproduce",
        lambda m: m.available_experiments(),
        (
            "aas-synthetic",
            "aas-fashion",
            "msdnn-2d",
            "msdnn-subclass",
            "corel-fashion",
            "opml-fashion",
            "zero-shot-fashion",
            "budget-curves",
        ),
    ),
}


def registry_names(kind: str) -> list[str]:
    """The names of registry ``kind`` (a key of :data:`LISTINGS`), as the command line offers
    them."""
    return LISTINGS[kind].current()
