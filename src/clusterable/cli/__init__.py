"""The ``clusterable`` command line: one module per group of verbs, each parser beside its handler.

Examples
--------
::

    clusterable demo
    clusterable train --data fashion-mnist --loss msdnn --loss-arg sigma=0.5 --label-view coarse \\
        --model lenet --epochs 10 --out runs/msdnn
    clusterable evaluate runs/msdnn --json table.json
    clusterable evaluate emb.npy labels.npy --clustering spectral --metrics nmi f1
    torchrun --nproc_per_node 2 -m clusterable train --data digits --loss lifted --out runs/ddp

Where things are:

- ``run.py`` train, tune; ``embeddings.py`` evaluate, embed, cluster, plot; ``use.py`` index,
  search, assign, export; ``decisions.py`` classify, and ``--max-distance``; ``report.py``
  report; ``cache.py`` cache; ``papers.py`` demo, reproduce.
- ``_settings.py``: the run flags, generated from the RunSpec and TrainConfig fields, and the
  settings a command names (``--config`` file, then flags).
- ``_files.py``: what verbs read and write (``.npy`` arrays, labels, JSON, a run's embeddings).
- ``_clusters.py``: how many clusters ``evaluate`` and ``cluster`` ask for.
- ``_parser.py``: the verb factory (description, example, ``--seed``, and ``--device`` for a verb
  that declares it runs a model, a search or a clustering); ``_names.py``: the names the parser
  offers (datasets, losses, metrics, ...), declared without importing their registries.

Building the parser imports no torch, scikit-learn, SciPy, faiss or matplotlib: ``clusterable
--help`` and ``clusterable VERB --help`` start at once, and each handler imports what it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any, NoReturn

from clusterable import __version__
from clusterable.cli import cache, decisions, embeddings, papers, report, run, use
from clusterable.cli._parser import AddVerb, Verbs

#: Every verb, in the order ``clusterable --help`` lists them.
VERBS: tuple[AddVerb, ...] = (
    papers.add_demo,
    run.add_train,
    run.add_tune,
    embeddings.add_evaluate,
    embeddings.add_embed,
    embeddings.add_cluster,
    embeddings.add_plot,
    use.add_index,
    use.add_search,
    use.add_assign,
    decisions.add_classify,
    report.add_report,
    cache.add_cache,
    use.add_export,
    papers.add_reproduce,
)


class OneLineParser(argparse.ArgumentParser):
    """A parser whose errors are one line, as every other error of the command line is: the
    verb, the flag and what it takes, and where to read more (argparse prints its usage block
    first)."""

    def error(self, message: str) -> NoReturn:
        """Exit with status 2 and ``message`` on one line."""
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``clusterable`` parser, with every verb's subparser."""
    parser = OneLineParser(
        prog="clusterable",
        description="Clustering-oriented deep metric learning.",
        epilog="Run `clusterable VERB --help` for a verb's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"clusterable {__version__}")
    verbs = Verbs(parser.add_subparsers(dest="command", required=True, metavar="VERB"))
    for add_verb in VERBS:
        add_verb(verbs)
    return parser


def _one_line_warning(message: Any, category: type, *_: Any, **__: Any) -> None:
    """Warnings as one line, without the library's source path."""
    print(f"clusterable: warning: {message}", file=sys.stderr)


class _ReaderMayLeave:
    """Standard output that stops writing, silently, once its reader has gone (``search ... |
    head``): the verb still finishes its work and writes its files (``--json``), where the broken
    pipe used to end it with "error: broken pipe" and lose them."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.gone = stream, False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.stream.write(text)  # some capturing streams return None, not the count
            except BrokenPipeError:
                self._leave()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._leave()

    def _leave(self) -> None:
        """Point the descriptor at /dev/null, so that what the stream still holds (and the
        interpreter's last flush) goes nowhere instead of failing again."""
        self.gone = True
        nowhere = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(nowhere, self.stream.fileno())
        except (AttributeError, OSError, ValueError):  # a stream without a descriptor
            pass
        finally:
            os.close(nowhere)

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno, ...
        return getattr(self.stream, name)


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); the exit status: 130 after an
    interrupt (Ctrl-C), told in one line (the interrupt's own words where it has them, as a
    verb that can resume says how), never a traceback."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # argparse would name no verb ("clusterable: error: ...")
        parser.exit(
            2,
            f"clusterable {args.command}: error: unrecognized arguments: {' '.join(unknown)} "
            f"(see `clusterable {args.command} --help`)\n",
        )
    try:
        return _run(parser, args)
    except KeyboardInterrupt as stop:
        said = str(stop) or "interrupted"
        print(f"\nclusterable {args.command}: {said}", file=sys.stderr)
        return 130


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The verb of the parsed ``args``; its errors as one line and exit status 2 (a GPU out of
    memory too: training names ``--batch-size``, any other work says to free the GPU); an error
    no check foresaw as one line and status 1, its traceback in a file (:func:`_unforeseen`)."""
    # What the verb runs, imported once the command line is read: `--help` has exited by now.
    from clusterable.device import resolve_device
    from clusterable.train.checkpoint import CheckpointWriteError
    from clusterable.train.run_folder import RunFolderError, describe_os_error

    device = getattr(args, "device", None)
    try:
        resolve_device(device)  # named before any work; each handler hands it down itself
    except ValueError as error:
        parser.exit(2, f"clusterable {args.command}: error: --device {device}: {error}\n")
    stdout, sys.stdout = sys.stdout, _ReaderMayLeave(sys.stdout)
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        try:
            return args.handler(args)
        except (RunFolderError, CheckpointWriteError, FileNotFoundError) as error:
            parser.exit(2, f"clusterable {args.command}: error: {error}\n")
        except OSError as error:
            parser.exit(2, f"clusterable {args.command}: error: {describe_os_error(error)}\n")
        except (ValueError, ImportError) as error:
            parser.exit(2, f"clusterable {args.command}: error: {error}\n")
        except RuntimeError as error:
            torch = sys.modules.get("torch")  # imported by whatever ran out of memory
            if torch is None or not isinstance(error, torch.OutOfMemoryError):
                return _unforeseen(args.command, error)
            from clusterable.device import allocator_words

            said = allocator_words(error)
            parser.exit(
                2,
                f"clusterable {args.command}: error: {said}: free the GPU of other work, or run "
                "this on the CPU (--device cpu)\n",
            )
        except Exception as error:
            return _unforeseen(args.command, error)
        finally:
            sys.stdout = stdout


def _unforeseen(command: str, error: Exception) -> int:
    """An error no check foresaw, in one line with its traceback written to a file (exit status
    1); raised as it is under ``CLUSTERABLE_TRACEBACK=1``."""
    from clusterable.cli import _crash

    if _crash.showing_tracebacks():
        raise error
    print(_crash.internal_error_line(command, error), file=sys.stderr)
    return _crash.INTERNAL_ERROR_STATUS


if __name__ == "__main__":
    sys.exit(main())
