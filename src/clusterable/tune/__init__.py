"""Hyper-parameter search as the papers searched: cross-validation on the training split, Optuna.

:func:`tune` runs a search; :func:`parse_parameter` and :func:`parse_space` read a search space
from ``--param`` flags or a YAML ``search:`` mapping; :func:`cross_validation_folds` makes the
stratified or class-disjoint folds. Ctrl-C during a search raises :class:`SearchInterrupted` (a
:class:`KeyboardInterrupt`) saying how to resume.
"""

from clusterable.tune.folds import cross_validation_folds
from clusterable.tune.space import Parameter, parse_parameter, parse_space
from clusterable.tune.study import SearchInterrupted, TuneResult, tune

__all__ = [
    "Parameter",
    "SearchInterrupted",
    "TuneResult",
    "cross_validation_folds",
    "parse_parameter",
    "parse_space",
    "tune",
]
