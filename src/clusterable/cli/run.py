"""``clusterable train`` and ``clusterable tune``: a run, or a search over runs, from the settings
a command names (`clusterable.cli._settings`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from clusterable.cli._flag_types import metric_name, whole_number
from clusterable.cli._given import settings_named_as_given
from clusterable.cli._names import registry_names
from clusterable.cli._parser import Verbs
from clusterable.cli._settings import (
    add_run_flags,
    config_file,
    given_settings,
    resumed_settings,
    run_defaults,
)


@settings_named_as_given
def command_train(args: argparse.Namespace) -> int:
    """Run ``clusterable train`` with the parsed ``args``; its exit status."""
    from clusterable.recipe import RunSpec, train_run
    from clusterable.train import TrainConfig
    from clusterable.train.distributed import end_distributed
    from clusterable.train.run_folder import default_run_folder, interrupted_message

    spec_given, train_given = given_settings(args)
    spec = RunSpec.from_dict(spec_given)
    out = Path(args.out) if args.out else default_run_folder(spec.data, spec.loss)
    if args.resume:
        spec, config = resumed_settings(out, spec_given, train_given)
    else:
        config = TrainConfig.from_dict({**train_given, "verbose": True})
    main_process = os.environ.get("RANK", "0") == "0"  # under torchrun, one process reports
    try:
        train_run(spec, config, out=out, resume=args.resume, overwrite=args.overwrite)
    except KeyboardInterrupt:
        if main_process:
            print(f"\nclusterable train: {interrupted_message(out)}", file=sys.stderr)
        return 130
    end_distributed()  # under torchrun: every process has trained and scored the test split
    if main_process:
        print(f"run folder: {out}")
        if args.report:
            _write_report(out, config.device)
        elif args.resume:
            _note_stale_report(out)
    return 0


def _note_stale_report(out: Path) -> None:
    """Say that the report a resumed run kept describes the run before it resumed."""
    from clusterable.reports.run_report import REPORT_NAME

    if (out / REPORT_NAME).is_file():
        print(
            f"note: {out / REPORT_NAME} shows the run before it resumed; write it again with "
            f"`clusterable report {out}`"
        )


def _write_report(out: Path, device: str) -> None:
    """The end-of-run report; a failure is a warning that says how to retry, never the
    training's exit status (the run folder holds the trained model either way)."""
    from clusterable.reports import write_run_report

    try:
        print(f"report (open it in a browser): {write_run_report(out, device=device)}")
    except KeyboardInterrupt:  # said by `clusterable.cli.main`, in one line
        raise KeyboardInterrupt(
            f"the run trained, and its report was interrupted; write it with `clusterable "
            f"report {out}`"
        ) from None
    except Exception as error:  # the training succeeded: report the report's failure only
        print(
            f"clusterable train: warning: the run trained, but its report failed ({error}); "
            f"retry with `clusterable report {out}`",
            file=sys.stderr,
        )


def add_train(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``train`` verb's parser: its flags, defaults and help."""
    spec, config = run_defaults("spec"), run_defaults("train")
    train = verbs(
        "train",
        "train an embedding on a dataset with a loss; checkpoints, logs and test metrics. "
        "Every setting has a default (below): `clusterable train` alone trains "
        f"{spec['data']}/{spec['loss']} for {config['epochs']} epochs",
        "clusterable train --data digits --loss lifted --loss-arg margin=1.0 --epochs 20",
        command_train,
        runs=("model", "search", "clustering"),
        run_settings=True,
    )
    add_run_flags(train)
    train.add_argument(
        "--out",
        help="run folder, absent or empty unless --resume or --overwrite (default: "
        "runs/DATA-LOSS, DATA the folder or file name for folder:/table: data)",
    )
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its latest checkpoint, with its own settings; "
        "only --epochs (to train longer), how it runs (--device, --workers, --cache-images, "
        "--chunk-size) and what it reports (--progress, --tensorboard, --mlflow, --report, "
        "--before-training: a table kept is read back) may "
        "change",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="delete what --out holds, then start a new run (once its data is read and its "
        "model built: a run refused before keeps the old one)",
    )
    train.add_argument(
        "--report",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write RUN/report.html at the end (clusterable report RUN)",
    )
    return train


@settings_named_as_given
def command_tune(args: argparse.Namespace) -> int:
    """Run ``clusterable tune`` with the parsed ``args``; its exit status."""
    from clusterable.recipe import RunSpec
    from clusterable.train import TrainConfig
    from clusterable.train.run_folder import check_writable, default_run_folder
    from clusterable.tune import parse_parameter, parse_space, tune
    from clusterable.tune.study import BEST_FILE, PLOT_FILE, check_study_folder, values_in_words

    file_values = config_file(args)
    search = file_values.pop("search", None)
    spec_given, train_given = given_settings(args, file_values)
    space = [parse_parameter(text) for text in args.param]
    if search is not None:
        try:
            space += parse_space(search)
        except ValueError as error:
            raise ValueError(f"{args.config}: {error}") from None
    spec = RunSpec.from_dict(spec_given)
    # A search trains quietly unless --progress asks for each fold's progress bars.
    config = TrainConfig.from_dict({"progress": False, **train_given})
    default = default_run_folder(spec.data, spec.loss)
    out = Path(args.out or default.with_name(f"tune-{default.name}"))
    check_study_folder(out)  # new, empty, or a search to resume: never a run folder
    # Proved writable, then left as it was: the study's first write makes it, after the search's
    # own checks (a refused search leaves no empty folder).
    out = check_writable(out, keep=False)
    result = tune(  # says what it searches once it has checked everything
        spec,
        space,
        config=config,
        folds=args.folds,
        protocol=args.protocol,
        trials=args.trials,
        metric=args.metric,
        out=out,
        seed=config.seed,
    )
    trained = f" (batches of {result.batches})" if result.batches is not None else ""
    print(
        f"best: {values_in_words(result.best_values)}{trained} ({args.metric} "
        f"{result.best_score:.4f}, "
        f"mean over {args.folds} folds; {result.tally()})\n"
        f"wrote {out / BEST_FILE} and the search plot {out / PLOT_FILE}; train it with "
        f"`clusterable train --config {out / BEST_FILE}`"
    )
    return 0


def add_tune(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``tune`` verb's parser: its flags, defaults and help."""
    tune = verbs(
        "tune",
        "search hyper-parameters by cross-validation on the training split (Optuna); resumes a "
        "killed search; writes the best settings as a YAML file `train --config` takes",
        "clusterable tune --data digits --loss msdnn --param sigma=log:0.001:1000 --trials 20",
        command_tune,
        runs=("model", "search", "clustering"),
        run_settings=True,
    )
    add_run_flags(tune)
    for action in tune._actions:  # a search trains quietly unless asked
        if action.dest == "progress":
            action.help = (
                "each fold's training progress bars (shown only when standard error is a "
                "terminal) (default: off; one line per trial either way)"
            )
    tune.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=KIND:...",
        help="a searched setting: NAME=log:LOW:HIGH, float:LOW:HIGH, int:LOW:HIGH, "
        "logint:LOW:HIGH (whole numbers on a log scale) or choice:A,B,C (repeatable; or a "
        "`search:` mapping in --config); NAME a loss keyword, a training setting or "
        "run.embedding_dim",
    )
    tune.add_argument(
        "--trials", type=whole_number(1), default=20, help="trials in all (default: %(default)s)"
    )
    tune.add_argument(
        "--folds", type=whole_number(2), default=3, help="folds (default: %(default)s)"
    )
    tune.add_argument(
        "--protocol",
        choices=("stratified", "class-disjoint"),
        default="stratified",
        help="stratified folds, or folds of whole classes for zero-shot protocols "
        "(default: %(default)s)",
    )
    tune.add_argument(
        "--metric",
        default="map@r",
        type=metric_name([*registry_names("metrics"), "knn@k"]),
        help=f"what to maximise (an error rate such as fnmr@fmr=EPS: to minimise): "
        f"{', '.join(registry_names('table keys'))}, or knn@K (k-NN accuracy from the fold's "
        "training items) (default: %(default)s)",
    )
    tune.add_argument(
        "--out",
        help="folder of the study (study.db, best.yaml, search.png), absent or empty unless it "
        "holds a search and nothing else, which resumes (default: runs/tune-DATA-LOSS)",
    )
    return tune
