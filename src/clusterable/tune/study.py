"""Hyper-parameter search by cross-validation on the training split, with Optuna.

Each trial draws its values (TPE sampler, seeded), trains one model per fold on the other folds
and scores the held-out fold with one metric of the evaluation table (or k-NN accuracy from the
fold's training items); the trial's value is the mean over folds. After each fold the running
mean is reported, so that Optuna's median pruner stops a trial that is already worse than the
median of earlier trials at the same fold, while folds are left to train (after its last, the
trial has its score). The study lives in SQLite (``study.db`` in the output folder): a killed
search resumes where it stopped, and a trial that was running when it was killed runs again; one
that raised an error ends the search, is kept as failed and is never run again (as Optuna never
retries a failed trial), and the resumed search says why it failed. The best configuration is
written as a YAML file that ``clusterable train --config`` takes, and the search as a plot of the
objective against each parameter.

Reference: T. Akiba et al., "Optuna: a next-generation hyperparameter optimization framework",
KDD 2019. Protocols: K. Musgrave, S. Belongie and S.-N. Lim, "A metric learning reality check",
ECCV 2020 (class-disjoint folds); MsDNN (sigma by 5-fold cross-validation).
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from clusterable._optional import require
from clusterable.data import LabelledDataset, load_dataset
from clusterable.evaluate import evaluate_embeddings, knn_accuracy, metric_of_key, table_keys
from clusterable.evaluate.registry import lower_is_better
from clusterable.mining.samplers import ClassBalancedBatchSampler
from clusterable.plots._figure import new_figure, save_figure
from clusterable.recipe import RunSpec, build, build_trainer, check_before_data
from clusterable.train.config import (
    TrainConfig,
    check_batches_exceed_dimensions,
    check_batches_hold_pairs,
)
from clusterable.train.embed import embed_dataset
from clusterable.tune.folds import Protocol, cross_validation_folds
from clusterable.tune.space import Parameter

#: File names in the output folder.
STUDY_FILE, BEST_FILE, PLOT_FILE = "study.db", "best.yaml", "search.png"
#: Every file a search writes in its folder: the study, the files SQLite keeps beside it while
#: it writes (left there by a kill), the best settings and the plot. A folder holding anything
#: else is not a search's alone, and is never resumed.
SEARCH_FILES = frozenset(
    {
        STUDY_FILE,
        *(f"{STUDY_FILE}-{kind}" for kind in ("journal", "wal", "shm")),
        BEST_FILE,
        PLOT_FILE,
    }
)

#: Training settings that change how a trial reports, not what it trains: a resumed search may
#: give other values (``--progress``) than the search it resumes.
_FREE_ON_RESUME = ("progress", "verbose")

#: Training settings that decide a class-balanced sampler's batches, which it rounds to whole
#: classes: a trial that searches one says the batches it trained (`_batches_drawn`).
_BATCH_SETTINGS = ("batch_size", "items_per_class", "sampler", "sampler_args")

#: An integer range of at most this many values has each of them checked before the first trial;
#: a longer one, the `_END_VALUES` at each end and `_SPREAD_VALUES` spread between them.
_MOST_WHOLE_VALUES = 32
#: Consecutive values checked at each end of a long integer range: a rule that a value be a
#: multiple of up to this many (the pairs-hard-negatives sampler's batch of a multiple of 4, a
#: convolution's odd kernel) refuses one of them if it refuses any.
_END_VALUES = 8
_SPREAD_VALUES = 16
#: The checked values of every parameter are checked in every combination when there are at most
#: this many; else in combinations that hold every pair of two parameters' values.
_MOST_COMBINATIONS = 256


class SearchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a search: what was kept, and how to resume, in its message (one line).

    A :class:`KeyboardInterrupt`, so that code which stops on one stops on it too; the command
    line prints its message alone (``clusterable.cli.main``), exit status 130."""


def searchable_metrics() -> list[str]:
    """What a search can maximise: every key of the evaluation table, read from the metric
    registry (so a metric registered by a user too; ``recall@K`` for each K), and ``knn@K``,
    K-NN accuracy of the held-out fold from the fold's training items."""
    return [*table_keys(), "knn@K"]


#: The study's name inside its SQLite file.
STUDY_NAME = "clusterable-tune"
#: The user attribute of a trial that raised an error: the error, in one line. A failed trial
#: without it was interrupted (Ctrl-C), and runs again on resume; one with it does not, as
#: Optuna never retries a failed trial: the same values would most likely fail the same way.
ERROR_ATTR = "error"
#: Failed trials named in a line (their values and error); more are counted.
_FAILURES_SHOWN = 3
#: The longest error of a failed trial kept, in characters.
_ERROR_CHARACTERS = 200


@dataclass
class TuneResult:
    """The best trial of a search and where its files are."""

    best_values: dict[str, Any]  # "target.name" -> value, e.g. {"loss.sigma": 0.5}
    best_score: float  # mean of the metric over the folds
    spec: RunSpec  # the run with the best values applied
    config: TrainConfig
    completed: int  # trials that ran every fold
    pruned: int  # trials stopped early by the pruner
    folder: Path | None  # study.db, best.yaml, search.png
    #: Each trial that raised an error (not Ctrl-C), of this search or an earlier one in
    #: ``folder``: its values and the error in one line. Never run again.
    failed: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    #: The batches the best settings draw from the training split, where a class-balanced
    #: sampler rounds the drawn ``batch_size`` or ``items_per_class`` to whole classes
    #: (``10 classes x 7 items, 70``); None where they draw the batches the settings say.
    batches: str | None = None

    def tally(self) -> str:
        """The trials in words: ``3 trials completed, 1 pruned, 1 failed (lr=0.1: ValueError:
        ...)``; failures only where there are any."""
        trials = "trial" if self.completed == 1 else "trials"
        said = f"{self.completed} {trials} completed, {self.pruned} pruned"
        if not self.failed:
            return said
        return f"{said}, {len(self.failed)} failed ({_failed_in_words(self.failed)})"


def tune(
    spec: RunSpec,
    space: Sequence[Parameter],
    *,
    config: TrainConfig | None = None,
    data: LabelledDataset | None = None,
    folds: int = 3,
    protocol: Protocol = "stratified",
    trials: int = 20,
    metric: str = "map@r",
    out: str | Path | None = None,
    seed: int = 0,
    report: Callable[[str], None] = print,
) -> TuneResult:
    """Search ``space`` for the run ``spec`` by ``folds``-fold cross-validation on its training
    split; ``trials`` in all, counting those of an earlier, interrupted search in ``out``.

    Parameters
    ----------
    spec : RunSpec
        The run to tune: its data, model and loss; the searched settings override it.
    space : sequence of Parameter
        What to search (:func:`~clusterable.tune.space.parse_parameter`, ``parse_space``).
    config : TrainConfig, optional
        Training settings of every trial (the searched ones are overridden); its ``progress``
        shows each fold's progress bars (default: none).
    data : LabelledDataset, optional
        The training data to fold (a subset, a relabelled view); default: ``spec``'s training
        split.
    folds : int
        How many cross-validation folds each trial trains and scores.
    protocol : {"stratified", "class-disjoint"}
        Stratified k-fold, or folds that hold out whole classes (zero-shot protocols).
    trials : int
        How many trials in all, those of an interrupted search in ``out`` included.
    metric : str
        A key of :func:`~clusterable.evaluate.evaluate_embeddings` (``"map@r"``,
        ``"recall@1"``, ``"nmi"``, ...) or ``"knn@K"``: K-NN accuracy of the held-out fold
        from the fold's training items. Maximised.
    out : path, optional
        Folder for ``study.db``, ``best.yaml`` and ``search.png``; without it the study is kept
        in memory only.
    seed : int
        Seed of the folds, of the sampler of trial values and of every training.
    report : callable
        Receives what the search is about to do once every check has passed, the resume
        notice, and one line per trial.

    Raises
    ------
    ValueError
        On an empty space, an unsupervised spec, an unknown metric, k-NN accuracy
        (``knn@K``) with class-disjoint folds (it would score 0), an ``out`` that holds other
        files than a search's (:func:`check_study_folder`) or a search of other settings, or
        values a trial's loss, run, sampler or trainer would refuse (every value of a choice, the
        ends and the inside of a range, alone and together, checked as ``train`` checks them
        before the first trial: :func:`_check_space`).
    SearchInterrupted
        On Ctrl-C: the interrupted trial is kept as failed and runs again on resume.
    Exception
        Any error a trial raises ends the search: the trial is kept as failed, with the error
        (`ERROR_ATTR`), and a resumed search goes on with new trials.
    """
    optuna = _optuna()
    folder = Path(out) if out is not None else None
    if folder is not None:
        check_study_folder(folder)
    if not space:
        raise ValueError("nothing to search: give at least one --param NAME=KIND:...")
    _check_searched_once(space)
    if spec.unsupervised:
        raise ValueError("tune searches supervised runs: its folds are scored with the labels")
    config = config or TrainConfig(progress=False)
    train = data
    if train is None:
        train = load_dataset(spec.data, root=spec.root, split="train", labels=spec.labels)
    train = train.labelled()  # distractors are never scored
    if len(train) == 0:
        raise ValueError(
            f"tune scores its folds with the classes of the training split, and {spec.data} has "
            "no labelled item: give it classes (class sub-folders, a label column or array)"
        )
    splits = cross_validation_folds(train.labels, folds, protocol, seed)
    _check_metric(metric)
    _check_protocol(metric, protocol)
    _check_neighbours(metric, splits)
    # Every value the search can draw must train, before hours of training.
    _check_space(spec, config, space, train, [train.labels[rows] for rows, _ in splits])

    settings = {
        "spec": asdict(spec),
        "items": len(train),  # a search on other data (``data``) is another search
        "config": config.to_dict(),
        "space": [asdict(p) for p in space],
        "folds": folds,
        "protocol": protocol,
        "metric": metric,
        "seed": seed,
    }
    study, resumed = _open_study(folder, settings, seed, minimise=lower_is_better(metric))
    # Said once every check has passed: a refused search says its error alone.
    report(_start_line(spec, space, trials, folds, protocol, metric, folder))
    if resumed:
        _rerun_interrupted(study, folder, report)

    batches_searched = any(p.target == "train" and p.name in _BATCH_SETTINGS for p in space)

    def batches_of(values: dict[str, Any]) -> str | None:
        """The batches a trial of ``values`` trained on its folds, where a searched batch
        setting was rounded to whole classes; None otherwise."""
        if not batches_searched:
            return None
        settings_of_trial = _settings_of(spec, config, values)[1]
        drawn = {_batches_drawn(settings_of_trial, train.labels[rows]) for rows, _ in splits}
        return "; ".join(sorted(d for d in drawn if d is not None)) or None

    def scored(trial: Any) -> float:
        values = {f"{p.target}.{p.name}": p.suggest(trial) for p in space}
        run, settings_of_trial = _apply(spec, config, values, train)
        scores = []
        for fold, (fit_rows, held_rows) in enumerate(splits):
            scores.append(
                _fold_score(run, settings_of_trial, train, fit_rows, held_rows, metric, seed)
            )
            trial.report(float(np.mean(scores)), step=fold)
            # Pruning saves the folds still to train; after the last, the trial has its score.
            if fold < len(splits) - 1 and trial.should_prune():
                raise optuna.TrialPruned(f"pruned after fold {fold + 1}")
        return float(np.mean(scores))

    def objective(trial: Any) -> float:
        try:
            return scored(trial)
        except optuna.TrialPruned:
            raise
        except Exception as error:  # not Ctrl-C: a KeyboardInterrupt leaves the trial unmarked
            trial.set_user_attr(ERROR_ATTR, _error_line(error))
            if folder is not None:  # the error itself goes on to the caller
                report(
                    f"a trial failed ({values_in_words(trial.params)}); it is kept as failed in "
                    f"{folder / STUDY_FILE}, and the same command again goes on with new trials"
                )
            raise

    done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    # Each trial run here finishes (complete or pruned) or raises: the search ends with
    # ``trials`` finished trials, an interrupted one run again among them.
    remaining = trials - len(study.get_trials(deepcopy=False, states=done))
    if remaining > 0:
        try:
            with _failed_trials_unlogged():
                study.optimize(
                    objective,
                    n_trials=remaining,
                    callbacks=[_progress(trials, metric, report, batches_of)],
                )
        except KeyboardInterrupt:
            raise SearchInterrupted(_interrupted_message(study, folder, trials)) from None
    finished = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not finished:
        raise ValueError("no trial finished (all were pruned or failed); widen the space")
    best = study.best_trial
    run, best_config = _apply(spec, config, best.params, train)
    result = TuneResult(
        best_values=dict(best.params),
        best_score=float(best.value),
        spec=run,
        config=best_config,
        completed=len(finished),
        pruned=len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.PRUNED,))),
        folder=folder,
        failed=_failures(study),
        batches=_batches_drawn(best_config, train.labels) if batches_searched else None,
    )
    if folder is not None:
        write_best_yaml(result, folder / BEST_FILE, metric)
        plot_search(study, space, metric, folder / PLOT_FILE)
    return result


def _optuna() -> Any:
    return require("optuna", "clusterable tune (hyper-parameter search)")


def _start_line(
    spec: RunSpec,
    space: Sequence[Parameter],
    trials: int,
    folds: int,
    protocol: str,
    metric: str,
    folder: Path | None,
) -> str:
    """What the search is about to do, in one line: its space, run, folds and metric."""
    aim = "minimising" if lower_is_better(metric) else "maximising"
    kept = f"study in {folder}" if folder is not None else "study kept in memory only"
    return (
        f"searching {', '.join(p.describe() for p in space)} for {spec.loss} on {spec.data}: "
        f"{trials} trials, {folds} {protocol} folds of the training split, {aim} {metric}; {kept}"
    )


def _open_study(
    folder: Path | None, settings: dict[str, Any], seed: int, minimise: bool
) -> tuple[Any, bool]:
    """A new study, or the one in ``folder`` when it was started with the same settings, and
    whether it is that one (resumed); ``minimise`` for an error rate (FNMR), whose best trial is
    the smallest."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        storage = f"sqlite:///{(folder / STUDY_FILE).resolve()}"
    study = optuna.create_study(
        study_name=STUDY_NAME,
        storage=storage,
        direction="minimize" if minimise else "maximize",
        load_if_exists=True,
        pruner=optuna.pruners.MedianPruner(n_startup_trials=3),
    )
    # Seeded by the seed and the trials the study holds: a new study draws as its seed says; a
    # resumed one draws new values (a sampler seeded as before would replay the draws of its
    # first trials), and the same ones each time it is resumed from the same point.
    held = len(study.get_trials(deepcopy=False))
    study.sampler = optuna.samplers.TPESampler(seed=_sampler_seed(seed, held))
    stored = study.user_attrs.get("settings")
    settings = json.loads(json.dumps(settings))  # as SQLite gives it back (tuples as lists)
    if stored is None:
        study.set_user_attr("settings", settings)
        return study, False
    if _compared(stored) != _compared(settings):
        changed = _settings_changed(_compared(stored), _compared(settings))
        raise ValueError(
            f"{folder} holds a search with other settings ({'; '.join(changed)}): give "
            "the same settings to resume it, or another --out for a new search"
        )
    return study, True


def _settings_changed(stored: dict[str, Any], given: dict[str, Any]) -> list[str]:
    """The settings that differ between a stored search and the one given, in words: a run or
    training setting by its name and both values (``lr 0.001 in the search, 0.01 given``), the
    others by their names (``folds, metric differ``)."""
    changed, others = [], []
    for key in sorted(given):
        if given[key] == stored.get(key):
            continue
        if key in ("spec", "config") and isinstance(stored.get(key), dict):
            changed += [
                f"{name} {stored[key].get(name)!r} in the search, {given[key].get(name)!r} given"
                for name in sorted(set(given[key]) | set(stored[key]))
                if given[key].get(name) != stored[key].get(name)
            ]
        else:
            others.append(key)
    return changed + ([f"{', '.join(others)} differ"] if others else [])


def _sampler_seed(seed: int, held: int) -> int:
    """The sampler's seed for a study that holds ``held`` trials: ``seed`` itself for a new one."""
    if held == 0:
        return seed
    return int(np.random.SeedSequence([seed, held]).generate_state(1)[0])


def _compared(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that must agree for a search to resume: all but how trials report."""
    config = {k: v for k, v in settings.get("config", {}).items() if k not in _FREE_ON_RESUME}
    return {**settings, "config": config}


def check_study_folder(folder: Path) -> None:
    """Refuse an output folder that is a file, or holds anything but a search of ``tune``: a run
    folder of ``train`` (``run.json``, ``checkpoints/``), any other files, or a search beside
    other files (a search writes only `SEARCH_FILES`), as ``train --out`` takes only an absent
    or empty folder unless told to resume. New, empty, or a search alone (its ``study.db``
    holds the study), which resumes, pass.

    Raises
    ------
    ValueError
        Naming the folder, what it holds that a search does not write, and what to do.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder} is a file; give a folder for the search")
    if not folder.is_dir() or not any(folder.iterdir()):
        return
    held = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    study_file = folder / STUDY_FILE
    if not (study_file.is_file() and _holds_a_search(study_file)):
        raise ValueError(
            f"--out {folder} already holds files ({_some(held)}) and no search of `clusterable "
            "tune` to resume; give a new or empty folder for the search"
        )
    others = [name for name in held if name not in SEARCH_FILES]
    if others:
        raise ValueError(
            f"--out {folder} holds a search of `clusterable tune` and files a search never "
            f"writes ({_some(others)}); move them out of {folder} to resume the search there, "
            "or give a new or empty folder for a new search"
        )


def _some(names: Sequence[str]) -> str:
    """The first four of ``names``, and "..." for more."""
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


def _holds_a_search(study_file: Path) -> bool:
    """Whether the SQLite file ``study_file`` holds the study of a search (read, not changed)."""
    import sqlite3

    try:
        with sqlite3.connect(f"{study_file.resolve().as_uri()}?mode=ro", uri=True) as db:
            names = {row[0] for row in db.execute("SELECT study_name FROM studies")}
    except sqlite3.Error:
        return False
    return STUDY_NAME in names


@contextmanager
def _failed_trials_unlogged() -> Iterator[None]:
    """Optuna's two warnings for a trial that raised (the first with a traceback), left out:
    the error itself goes on to the caller (the command line says it in one line), and Ctrl-C is
    said as :class:`SearchInterrupted`. A trial that fails without raising is still logged."""
    logger = logging.getLogger("optuna.study._optimize")
    raised: set[str] = set()  # "Trial N " of each trial whose failure came with its exception

    def keep(record: logging.LogRecord) -> bool:
        message = record.getMessage()
        trial = " ".join(message.split()[:2]) + " "
        if record.exc_info is not None and message.startswith("Trial "):
            raised.add(trial)
            return False
        return not (trial in raised and message.startswith(f"{trial}failed with value"))

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def _interrupted_message(study: Any, folder: Path | None, trials: int) -> str:
    import optuna

    state = optuna.trial.TrialState
    kept = len(study.get_trials(deepcopy=False, states=(state.COMPLETE, state.PRUNED)))
    if folder is None:
        return (
            f"interrupted after {kept} of {trials} trials (a search without a folder: kept nowhere)"
        )
    return (
        f"interrupted: {kept} of {trials} trials kept in {folder / STUDY_FILE}; run the same "
        "command again to resume (the interrupted trial runs again)"
    )


def _rerun_interrupted(study: Any, folder: Path | None, report: Callable[[str], None]) -> None:
    """Queue again the values of trials a kill (left running) or Ctrl-C (failed, without an
    `ERROR_ATTR`) cut short; a trial that raised an error is not run again, and said."""
    import optuna

    state = optuna.trial.TrialState
    rerun = set(study.user_attrs.get("rerun", []))
    interrupted = [
        t
        for t in study.get_trials(deepcopy=False, states=(state.RUNNING, state.FAIL))
        if t.number not in rerun and ERROR_ATTR not in t.user_attrs
    ]
    for trial in interrupted:
        if trial.state == state.RUNNING:
            study.tell(trial.number, state=state.FAIL)
        study.enqueue_trial(trial.params)
    study.set_user_attr("rerun", sorted(rerun | {t.number for t in interrupted}))
    kept = sum(t.state in (state.COMPLETE, state.PRUNED) for t in study.get_trials(deepcopy=False))
    failed = _failures(study)
    report(
        f"resuming the search in {folder}: {kept} earlier trials kept"
        + (f", {len(interrupted)} interrupted one(s) run again" if interrupted else "")
        + (
            f", {len(failed)} failed one(s) not run again ({_failed_in_words(failed)})"
            if failed
            else ""
        )
    )


def _failures(study: Any) -> list[tuple[dict[str, Any], str]]:
    """The values and error of each trial of ``study`` that raised an error (`ERROR_ATTR`)."""
    import optuna

    failed = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,))
    return [
        (dict(t.params), t.user_attrs[ERROR_ATTR]) for t in failed if ERROR_ATTR in t.user_attrs
    ]


def _failed_in_words(failed: Sequence[tuple[dict[str, Any], str]]) -> str:
    """``lr=0.1: ValueError: ...; lr=0.2: ...``, the first `_FAILURES_SHOWN` of ``failed``."""
    said = [f"{values_in_words(values)}: {error}" for values, error in failed[:_FAILURES_SHOWN]]
    more = len(failed) - _FAILURES_SHOWN
    return "; ".join(said) + (f"; and {more} more" if more > 0 else "")


def _error_line(error: BaseException) -> str:
    """``error`` in one line: its type and message, cut at `_ERROR_CHARACTERS`."""
    line = " ".join(f"{type(error).__name__}: {error}".split())
    return line if len(line) <= _ERROR_CHARACTERS else line[: _ERROR_CHARACTERS - 3] + "..."


def _progress(
    trials: int,
    metric: str,
    report: Callable[[str], None],
    batches_of: Callable[[dict[str, Any]], str | None] = lambda values: None,
) -> Callable:
    """One line per finished trial, numbered among the finished trials (a failed one, run again,
    is not counted twice), ``N/trials``; after its values, the batches it trained where
    ``batches_of`` them says the sampler rounded them (:func:`_batches_drawn`)."""

    def after_trial(study: Any, trial: Any) -> None:
        import optuna

        state = optuna.trial.TrialState
        finished = [
            t.number
            for t in study.get_trials(deepcopy=False, states=(state.COMPLETE, state.PRUNED))
        ]
        values = values_in_words(trial.params)
        batches = batches_of(trial.params)
        if batches is not None:
            values += f" (trained batches of {batches})"
        if trial.state == optuna.trial.TrialState.PRUNED:
            steps = trial.intermediate_values
            outcome = f"pruned after fold {len(steps)} ({metric} {steps[max(steps)]:.4f} so far)"
        else:
            outcome = f"{metric} {trial.value:.4f}"
        best = study.best_trial
        report(
            f"trial {finished.index(trial.number) + 1}/{trials}: {values} -> {outcome} "
            f"(best {best.value:.4f}, trial {finished.index(best.number) + 1})"
        )

    return after_trial


def values_in_words(values: dict[str, Any]) -> str:
    """A trial's values (``"target.name"`` -> value, as ``TuneResult.best_values``) in
    words, as every line of a search names them: the setting without its target, a float to 4
    significant digits. The one wording of a search's values, for the command line's summary
    and the paper reproductions' notes too.

    >>> values_in_words({"loss.margin": 0.5, "train.lr": 0.00123456, "train.sampler": "random"})
    'margin=0.5, lr=0.001235, sampler=random'
    """
    return ", ".join(f"{k.split('.', 1)[1]}={_short(v)}" for k, v in values.items())


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _apply(
    spec: RunSpec, config: TrainConfig, values: dict[str, Any], train: LabelledDataset
) -> tuple[RunSpec, TrainConfig]:
    """``spec`` and ``config`` with ``values`` set; the pieces are built once to check them."""
    run, settings = _settings_of(spec, config, values)
    build(run, train.input_shape, train.num_classes)  # raises on a value it refuses
    return run, settings


def _settings_of(
    spec: RunSpec, config: TrainConfig, values: dict[str, Any]
) -> tuple[RunSpec, TrainConfig]:
    """``spec`` and ``config`` with ``values`` (``"target.name"`` -> value) set."""
    run_values = {k[4:]: v for k, v in values.items() if k.startswith("run.")}
    train_values = {k[6:]: v for k, v in values.items() if k.startswith("train.")}
    loss_values = {k[5:]: v for k, v in values.items() if k.startswith("loss.")}
    model_values = {k[6:]: v for k, v in values.items() if k.startswith("model.")}
    run = replace(
        spec,
        **run_values,
        loss_args={**spec.loss_args, **loss_values},
        model_args={**spec.model_args, **model_values},
    )
    settings = replace(config, **train_values)
    return run, settings


def _check_space(
    spec: RunSpec,
    config: TrainConfig,
    space: Sequence[Parameter],
    train: LabelledDataset,
    fold_labels: Sequence[np.ndarray],
) -> None:
    """Refuse, before any trial, values the search can draw that a ``train`` with them would
    refuse. Each parameter's checked values (:func:`_checked_values`: every choice; the ends of a
    range, and its inside: every value of a short integer range, a fraction inside a float one)
    are checked in every combination when there are few (`_MOST_COMBINATIONS`), else in
    combinations that hold every pair of two parameters' values (:func:`_pairwise_combinations`),
    so that two values refused together (``batch_size`` against ``items_per_class``) are found;
    each combination is one the search can draw. Checked as ``train`` checks a run
    (:func:`_check_trains`)."""
    keys = [f"{p.target}.{p.name}" for p in space]
    values = [_checked_values(p) for p in space]
    if math.prod(len(v) for v in values) <= _MOST_COMBINATIONS:
        combinations: Iterable[Sequence[Any]] = itertools.product(*values)
    else:
        combinations = _pairwise_combinations(values)
    losses: dict[str, Any] = {}  # the loss of each run checked, by its settings
    for combination in combinations:
        drawn = dict(zip(keys, combination, strict=True))
        try:
            _check_trains(spec, config, drawn, train, fold_labels, losses)
        except ValueError as error:
            named = values_in_words(drawn)
            reason = _whole_numbers_refused(spec, config, space, drawn) or f"train refuses: {error}"
            raise ValueError(f"the search can draw {named}, which {reason}") from None


def _check_trains(
    spec: RunSpec,
    config: TrainConfig,
    values: dict[str, Any],
    train: LabelledDataset,
    fold_labels: Sequence[np.ndarray],
    losses: dict[str, Any],
) -> None:
    """The checks of ``train`` for ``spec`` and ``config`` with ``values`` on each fold: the run's
    loss, model and settings built; the batches of each fold's training items against the loss
    (:func:`check_batches_hold_pairs`, :func:`check_batches_exceed_dimensions`). ``losses`` keeps
    the loss of each run built, by its settings, so that values of the training settings alone
    build no model."""
    run, settings = _settings_of(spec, config, values)
    built = json.dumps(asdict(run), sort_keys=True, default=repr)
    if built not in losses:
        losses[built] = build(run, train.input_shape, train.num_classes).loss  # raises on refusal
    loss = losses[built]
    check_before_data(run, settings)  # a device, precision or frozen BatchNorm it cannot run
    check_batches_exceed_dimensions(settings, run.embedding_dim, loss)
    for labels in fold_labels:
        check_batches_hold_pairs(settings, settings.batch_sampler(labels), labels, loss)


def _batches_drawn(config: TrainConfig, labels: np.ndarray) -> str | None:
    """The batches ``config``'s sampler draws from ``labels`` where it rounds them (a class-
    balanced sampler takes ``batch_size // items_per_class`` classes, at most as many as there
    are, and fills the batch with whole classes): ``10 classes x 7 items, 70``; None where they
    are the ``batch_size`` and ``items_per_class`` the settings say, or the sampler draws no
    classes."""
    sampler = config.batch_sampler(labels)
    if not isinstance(sampler, ClassBalancedBatchSampler):
        return None
    classes, items = sampler.classes_per_batch, sampler.items_per_class
    if classes * items == config.batch_size and items == config.items_per_class:
        return None
    return f"{classes} classes x {items} items, {classes * items}"


def _checked_values(parameter: Parameter) -> list[Any]:
    """The values of ``parameter`` checked before the first trial: every choice; every value of
    an integer range of at most `_MOST_WHOLE_VALUES`, else the `_END_VALUES` at each end and
    `_SPREAD_VALUES` between (evenly on the range's scale, log for ``logint``); the ends of a
    float range and a fraction inside it (a setting of whole numbers refuses it)."""
    if parameter.kind == "choice":
        return list(parameter.choices)
    low, high = parameter.low, parameter.high
    if parameter.kind in ("int", "logint"):
        first, last = int(low), int(high)
        if last - first < _MOST_WHOLE_VALUES:
            return list(range(first, last + 1))
        ends = [*range(first, first + _END_VALUES), *range(last - _END_VALUES + 1, last + 1)]
        between = np.geomspace if parameter.kind == "logint" else np.linspace
        spread = between(first + _END_VALUES, last - _END_VALUES, _SPREAD_VALUES)
        return sorted({*ends, *(int(v) for v in spread.round())})
    return [low, _fraction_inside(low, high, log=parameter.kind == "log"), high]


def _fraction_inside(low: float, high: float, log: bool) -> float:
    """A value strictly between ``low`` and ``high`` that is not a whole number: the middle (on a
    log scale for ``log``), or, if that is whole, a half beside it or the middle of its lower
    half (one of them is a fraction inside the range)."""
    middle = math.sqrt(low * high) if log else (low + high) / 2
    beside = (math.floor(middle) + 0.5, middle, (low + middle) / 2)
    return next((v for v in beside if low < v < high and not v.is_integer()), middle)


def _whole_numbers_refused(
    spec: RunSpec, config: TrainConfig, space: Sequence[Parameter], drawn: dict[str, Any]
) -> str | None:
    """Where a float range of ``space`` drew, in ``drawn``, a fraction for a setting that takes
    whole numbers (its settings refuse the fraction and take a whole number beside it): that, and
    what to search instead; None otherwise."""
    for parameter in space:
        key = f"{parameter.target}.{parameter.name}"
        value = drawn[key]
        if parameter.kind in ("choice", "int", "logint") or float(value).is_integer():
            continue
        whole = [w for w in (math.floor(value), math.ceil(value)) if parameter.low <= w]
        whole = [w for w in whole if w <= parameter.high]
        if not whole or _settings_refuse(spec, config, {key: value}) is None:
            continue
        if _settings_refuse(spec, config, {key: whole[0]}) is None:
            low, high = math.ceil(parameter.low), math.floor(parameter.high)
            kind = "logint" if parameter.kind == "log" else "int"  # the range's scale kept
            return (
                f"{parameter.name} refuses: it takes whole numbers, and a {parameter.kind} range "
                f"draws fractions; search it as {kind}:{low}:{high} (YAML {{{kind}: [{low}, "
                f"{high}]}}) or as a choice of whole numbers"
            )
    return None


def _settings_refuse(
    spec: RunSpec, config: TrainConfig, values: dict[str, Any]
) -> ValueError | None:
    """Why the settings refuse ``values`` alone (typed and checked as ``train`` reads them);
    None where they take them."""
    try:
        _settings_of(spec, config, values)
    except ValueError as error:
        return error
    return None


def _pairwise_combinations(values: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Combinations of one of each of ``values`` (one list per parameter) that hold every pair of
    two parameters' values at least once (a covering array of strength 2), built greedily: each
    combination starts from the first pair not yet held and takes, for every other parameter,
    the value that holds the most pairs not yet held. Far fewer than all combinations: about the
    product of the two longest lists."""
    count = len(values)
    if count < 2:
        return [(value,) for value in values[0]] if values else []
    wanted = [
        ((i, a), (j, b))
        for i, j in itertools.combinations(range(count), 2)
        for a in range(len(values[i]))
        for b in range(len(values[j]))
    ]
    missing = set(wanted)
    combinations = []
    for pair in wanted:
        if pair not in missing:
            continue
        (i, a), (j, b) = pair
        chosen = {i: a, j: b}  # parameter -> the index of its value
        for k in range(count):
            if k not in chosen:
                holds = functools.partial(_pairs_missing, missing, chosen, k)
                chosen[k] = max(range(len(values[k])), key=holds)
        missing -= set(itertools.combinations(sorted(chosen.items()), 2))
        combinations.append(tuple(values[k][chosen[k]] for k in range(count)))
    return combinations


def _pairs_missing(
    missing: set[tuple[tuple[int, int], tuple[int, int]]], chosen: dict[int, int], k: int, c: int
) -> int:
    """How many of the ``missing`` pairs value ``c`` of parameter ``k`` would hold beside the
    values ``chosen`` so far (parameter -> the index of its value)."""
    return sum(
        (((m, v), (k, c)) if m < k else ((k, c), (m, v))) in missing for m, v in chosen.items()
    )


def _check_searched_once(space: Sequence[Parameter]) -> None:
    """Refuse a setting searched twice (``--param`` and ``search:``, ``lr`` and ``train.lr``):
    a trial draws one value for it, from one range."""
    seen: dict[str, Parameter] = {}
    for parameter in space:
        key = f"{parameter.target}.{parameter.name}"
        if key in seen:
            raise ValueError(
                f"{key} is searched twice ({seen[key].describe()}; {parameter.describe()}), by "
                "--param or the --config file's search:; give each setting one range or choice"
            )
        seen[key] = parameter


def _check_metric(metric: str) -> None:
    name, _, k = metric.partition("@")
    if metric_of_key(metric) is not None or (name == "knn" and k.isdigit() and int(k) >= 1):
        return
    raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(searchable_metrics())}")


def _check_protocol(metric: str, protocol: str) -> None:
    """Refuse k-NN accuracy on class-disjoint folds: a held-out fold's classes have no training
    items, so every neighbour from the training items has another class and every fold scores
    0, whatever the trial."""
    if protocol == "class-disjoint" and metric.startswith("knn@"):
        raise ValueError(
            f"metric {metric} classifies the held-out items by their neighbours among the "
            "training items, but class-disjoint folds hold out whole classes, so those "
            "neighbours never share a held-out item's class and every fold would score 0: use "
            "--protocol stratified with knn@K, or a metric that scores the held-out classes "
            "among themselves (map@r, precision@1, recall@K, nmi)"
        )


def _check_neighbours(metric: str, splits: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
    """Refuse a metric of K neighbours that a fold has too few items for: ``knn@K`` looks among
    the fold's training items, a per-K key (``recall@K``) among the other held-out items."""
    if metric.startswith("knn@"):
        wanted, held, among = int(metric[4:]), min(len(fit) for fit, _ in splits), "training"
    elif metric_of_key(metric) != metric:
        wanted = int(metric.rpartition("@")[2])
        held, among = min(len(rows) for _, rows in splits) - 1, "other held-out"
    else:
        return
    if wanted > held:
        raise ValueError(
            f"metric {metric} needs {wanted} neighbours, but a fold has {held} {among} items; "
            f"use --metric {metric.rpartition('@')[0]}@{held} or lower"
        )


def _fold_score(
    spec: RunSpec,
    config: TrainConfig,
    train: LabelledDataset,
    fit_rows: np.ndarray,
    held_rows: np.ndarray,
    metric: str,
    seed: int,
) -> float:
    """Train on ``fit_rows`` of ``train``, score ``held_rows`` with ``metric``: the training, the
    search and k-means on ``config.device``. A score that is not finite (NaN: the embeddings
    collapsed) is the worst there is: infinite, of the sign the search avoids."""
    fit, held = train.subset(fit_rows), train.subset(held_rows)
    quiet = replace(config, eval_every=0, checkpoint_every=0)  # progress bars if asked
    trainer = build_trainer(spec, quiet, fit, num_classes=train.num_classes)
    trainer.fit()
    model = trainer.model.eval()
    held_emb, held_y = embed_dataset(model, held)
    if metric.startswith("knn@"):
        fit_emb, fit_y = embed_dataset(model, fit)
        return knn_accuracy(
            fit_emb, fit_y, held_emb, held_y, k=int(metric[4:]), device=config.device
        )
    # Only the metric searched for: a Recall@K needs no clustering, NMI no kNN search.
    name = metric_of_key(metric)
    assert name is not None  # _check_metric accepted the metric
    if name != metric:  # a per-K metric (recall@K): that K alone
        ks = (int(metric.rpartition("@")[2]),)
        table = evaluate_embeddings(
            held_emb, held_y, metrics=[name], ks=ks, seed=seed, device=config.device
        )
    else:
        table = evaluate_embeddings(
            held_emb, held_y, metrics=[metric], seed=seed, device=config.device
        )
    score = float(table[metric])
    if math.isfinite(score):
        return score
    return float("inf") if lower_is_better(metric) else float("-inf")  # the worst, either way


def write_best_yaml(result: TuneResult, path: Path, metric: str) -> Path:
    """The best configuration as a ``clusterable train --config`` file; how the search's trials
    reported (`_FREE_ON_RESUME`: a search trains without progress bars) is left to ``train``."""
    settings = asdict(result.spec)
    trained = result.config.to_dict()
    settings["train"] = {k: v for k, v in trained.items() if k not in _FREE_ON_RESUME}
    header = (
        f"# best of {result.completed} completed trials ({result.pruned} pruned"
        f"{f', {len(result.failed)} failed' if result.failed else ''}): "
        f"{metric} {result.best_score:.4f} by cross-validation\n"
        f"# searched: {', '.join(f'{k}={_short(v)}' for k, v in result.best_values.items())}\n"
    )
    if result.batches is not None:
        header += (
            f"# the class-balanced sampler rounds these to whole classes: batches of "
            f"{result.batches} items, as the search trained them\n"
        )
    path.write_text(header + yaml.safe_dump(settings, sort_keys=False))
    return path


def plot_search(study: Any, space: Sequence[Parameter], metric: str, path: Path) -> Path:
    """The objective of every completed trial against each parameter's value."""
    import optuna

    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    figure, axes = new_figure(columns=len(space), size=3.6)
    for ax, parameter in zip(axes, space, strict=True):
        key = f"{parameter.target}.{parameter.name}"
        values = [t.params[key] for t in done]
        scores = [t.value for t in done]
        if parameter.kind == "choice":
            labels = [str(c) for c in parameter.choices]
            ax.scatter([labels.index(str(v)) for v in values], scores)
            ax.set_xticks(range(len(labels)), labels)
        else:
            ax.scatter(values, scores)
            ax.set_xscale("log" if parameter.kind in ("log", "logint") else "linear")
        ax.set(xlabel=parameter.name, ylabel=f"{metric} (mean over folds)")
    figure.suptitle(f"{len(done)} completed trials")
    return save_figure(figure, path)
