"""The papers' experiments: ``clusterable demo`` (every loss on digits) and ``clusterable
reproduce`` (our numbers beside each paper's)."""

from __future__ import annotations

import argparse
from pathlib import Path

from clusterable.cli._flag_types import whole_number
from clusterable.cli._names import registry_names
from clusterable.cli._parser import Verbs


def command_demo(args: argparse.Namespace) -> int:
    """Run ``clusterable demo`` with the parsed ``args``; its exit status."""
    from clusterable.demo import run_demo
    from clusterable.train.run_folder import check_writable

    run_demo(check_writable(args.out), quick=args.quick, seed=args.seed, device=args.device)
    return 0


def add_demo(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``demo`` verb's parser: its flags, defaults and help."""
    demo = verbs(
        "demo",
        "train every loss on the bundled digits, evaluate each, print and write one table",
        "clusterable demo --quick --out /tmp/demo",
        command_demo,
        runs=("model", "search", "clustering"),
    )
    demo.add_argument("--out", default="reports/demo", help="report folder (default: %(default)s)")
    demo.add_argument("--quick", action="store_true", help="a few epochs only (seconds)")
    return demo


def command_reproduce(args: argparse.Namespace) -> int:
    """Run ``clusterable reproduce`` with the parsed ``args``; its exit status."""
    from clusterable.reproduce import Budget, run_all, run_experiment, write_summary

    mode = "quick" if args.quick else "full" if args.full else "default"
    out = Path(args.out)
    if args.experiment == "all":
        if args.from_json:
            reports = write_summary(out)
        else:
            reports = run_all(mode, args.seeds, out, first_seed=args.seed, device=args.device)
        print(f"wrote {out.with_suffix('.md')} and {len(reports)} experiment folders in {out}")
        return 0
    folder = out / args.experiment
    budget = Budget(
        mode=mode, seeds=args.seeds, folder=folder, first_seed=args.seed, device=args.device
    )
    report = run_experiment(args.experiment, budget)
    print(report.markdown())
    print(f"wrote {folder / 'results.md'} and {folder / 'results.json'}")
    return 0


def add_reproduce(verbs: Verbs) -> argparse.ArgumentParser:
    """The ``reproduce`` verb's parser: its flags, defaults and help."""
    reproduce = verbs(
        "reproduce",
        "run a paper's experiment (or all) and print our numbers beside the paper's",
        "clusterable reproduce aas-synthetic --quick",
        command_reproduce,
        runs=("model", "search", "clustering"),
    )
    reproduce.add_argument(
        "experiment",
        choices=["all", *registry_names("experiments")],
        help="an experiment, or all of them",
    )
    budget = reproduce.add_mutually_exclusive_group()
    budget.add_argument("--quick", action="store_true", help="about a minute (for tests)")
    budget.add_argument("--full", action="store_true", help="the paper's own budget")
    reproduce.add_argument(
        "--seeds", type=whole_number(1), help="number of seeds (default: per experiment)"
    )
    reproduce.add_argument(
        "--from-json",
        action="store_true",
        help="with all: rebuild OUT.md from OUT/NAME/results.json files",
    )
    reproduce.add_argument(
        "--out", default="docs/results", help="results folder (default: %(default)s)"
    )
    return reproduce
