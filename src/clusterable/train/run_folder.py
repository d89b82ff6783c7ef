"""A run folder that holds one run: checked before work starts, resumed as it was set up.

``clusterable train --out RUN`` writes ``run.json`` (the settings), ``log.jsonl``,
``checkpoints/`` and the results into one folder. The rules that keep that record true:

- a new run goes into a folder that is absent or empty (or ``overwrite`` clears it first, once
  the new run is read and built, so a run refused before then leaves the old one whole), so two
  runs never mix their checkpoints and logs;
- a resumed run takes its settings from its own ``run.json``; a setting given again must agree
  with it, except those a continuation may change (:data:`CHANGEABLE_ON_RESUME`), and its epochs
  may grow but never fall below those its latest checkpoint has trained;
- the folder is checked writable before any data is read, and a failed write says why (disk full,
  permission denied) in one line;
- temporaries of an interrupted checkpoint write are removed when the run resumes.
"""

from __future__ import annotations

import errno
import json
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from clusterable.train.checkpoint import resolve_checkpoint

RUN_RECORD = "run.json"
#: The run's test table, written at the end of training.
TEST_METRICS = "test_metrics.json"
#: The test table of where the run started (``train --before-training``), written before training.
BEFORE_TRAINING = "before_training.json"
#: The run's record of every step and epoch (read back by ``plot`` and ``report``).
RUN_LOG = "log.jsonl"
#: The trainer's summary of the run.
RUN_RESULT = "result.json"
#: The files of a run folder that ``train`` writes and the verbs read back: no verb's output
#: flag may name one (``report RUN --out RUN/run.json`` would destroy the run's record).
RUN_OWNED_FILES = frozenset({RUN_RECORD, TEST_METRICS, BEFORE_TRAINING, RUN_LOG, RUN_RESULT})
#: The folders of a run folder that ``train`` writes (checkpoints, loggers): nothing else goes in.
RUN_OWNED_FOLDERS = frozenset({"checkpoints", "tensorboard", "mlruns"})

#: Training settings a resumed run may change: more epochs, how it reports, how it loads data,
#: where it runs (a run started on a GPU may go on on another machine's), and in how many chunks
#: it embeds a batch (the same gradient in less memory: a run out of GPU memory goes on).
CHANGEABLE_ON_RESUME = frozenset(
    {
        "epochs",
        "chunk_size",
        "before_training",
        "progress",
        "verbose",
        "workers",
        "num_workers",
        "cache_images",
        "device",
        "tensorboard",
        "mlflow",
    }
)


class RunFolderError(Exception):
    """A run folder that cannot hold the run asked for; the message says what to do."""


def describe_os_error(error: OSError, path: Path | str | None = None) -> str:
    """One line for a failed file operation: the path and the reason in words."""
    where = error.filename if error.filename is not None else path
    if error.errno == errno.ENOSPC:
        reason = "disk full: free some space (or choose another folder) and run again"
    elif error.errno in (errno.EACCES, errno.EPERM):
        reason = "permission denied: choose a folder you may write to"
    elif error.errno == errno.EROFS:
        reason = "read-only file system: choose a folder on a writable disk"
    elif error.errno == errno.ENOTDIR:
        reason = "a part of the path is a file, not a folder"
    else:
        reason = (error.strerror or str(error)).lower()
    return f"{where}: {reason}" if where else reason


def check_writable(folder: Path | str, keep: bool = True) -> Path:
    """Create ``folder`` if needed and prove a file can be written in it.

    ``keep=False``: the folders this call created are removed again, so that a run refused
    before its first write (a setting, the data) leaves nothing behind; the run's first write
    creates them.

    Raises
    ------
    RunFolderError
        The folder cannot be created or written; the message names it and the reason.
    """
    folder = Path(folder)
    created = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder) as probe:
            probe.write(b"clusterable")
            probe.flush()
    except OSError as error:
        raise RunFolderError(f"cannot write in {describe_os_error(error, folder)}") from None
    finally:
        if not keep:
            for path in created:  # deepest first
                try:
                    path.rmdir()
                except OSError:
                    break
    return folder


def check_parent_writable(file: Path | str, flag: str | None = None) -> Path:
    """:func:`check_writable` for the folder a file will be written in, and ``file`` no folder
    (the write at the end of the work would fail on it); ``flag`` names it in the message.

    Raises
    ------
    RunFolderError
        ``file`` is a folder, or its folder cannot be written.
    """
    path = Path(file)
    if path.is_dir():
        given = f"{flag} {path}" if flag else str(path)
        raise RunFolderError(f"{given} is a folder, not a file: name the file to write in it")
    check_writable(path.parent)
    return path


def checkpoint_run_folder(checkpoint: Path | str) -> Path | None:
    """The run folder that holds ``checkpoint`` (``RUN/checkpoints/NAME``, ``RUN`` holding its
    ``run.json``), absolute; None for a checkpoint outside any run folder (copied elsewhere)."""
    folder = Path(checkpoint).resolve().parent
    if folder.name == "checkpoints" and (folder.parent / RUN_RECORD).is_file():
        return folder.parent
    return None


def run_owner(path: Path | str) -> str | None:
    """What ``path`` is to the run folder it lies in, when it is one of the files the run owns
    (`RUN_OWNED_FILES`) or lies in one of its folders (`RUN_OWNED_FOLDERS`, checkpoints); None
    when it is not in a run folder (one holding ``run.json``), or is free to write there (as
    ``report RUN`` writes ``RUN/report.html``)."""
    path = Path(path).absolute()
    for folder in path.parents:
        if (folder / RUN_RECORD).is_file():
            inside = path.relative_to(folder).parts
            if len(inside) == 1 and inside[0] in RUN_OWNED_FILES:
                return f"the run folder {folder}'s own {inside[0]}"
            if len(inside) > 1 and inside[0] in RUN_OWNED_FOLDERS:
                return f"inside the run folder {folder}'s {inside[0]}/"
            return None
        if folder.name in RUN_OWNED_FOLDERS and (folder.parent / RUN_RECORD).is_file():
            return f"inside the run folder {folder.parent}'s {folder.name}/"
    return None


def check_output_file(
    file: Path | str, flag: str, suffixes: tuple[str, ...] = (), kind: str = ""
) -> Path:
    """:func:`check_parent_writable` for a file an output flag writes, before any work: it must
    not be one of the files a run folder owns (:func:`run_owner`), and must end in one of
    ``suffixes`` (none: any name); ``kind`` says what is written, "the table is".

    A ``.npy`` output is refused by its suffix first, a folder included: numpy would add
    ``.npy`` to any other name. Any other is refused as a folder first.

    Raises
    ------
    RunFolderError
        The file is a run's own, has another suffix, is a folder, or cannot be written.
    """
    path = Path(file)
    owner = run_owner(path)
    if owner is not None:
        raise RunFolderError(
            f"{flag} {path} is {owner}, which the run needs; write {flag} somewhere else"
        )
    if path.is_dir() and suffixes != (".npy",):
        check_parent_writable(path, flag)  # says it is a folder
    if suffixes and path.suffix.lower() not in suffixes:
        example = path.with_name(path.stem + suffixes[0]).name
        raise RunFolderError(
            f"{flag} {path}: {kind or 'it is'} written as a {' or '.join(suffixes)} file; name "
            f"one (e.g. {example})"
        )
    return check_parent_writable(path, flag)


def remove_temporaries(run_dir: Path) -> list[Path]:
    """Delete the hidden folders and files an interrupted checkpoint write leaves behind."""
    root = run_dir / "checkpoints"
    if not root.is_dir():
        return []
    removed = []
    for path in root.glob(".*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def read_run_record(run_dir: Path, purpose: str = "--resume") -> dict[str, Any]:
    """The ``spec`` and ``config`` a run was started with, from its ``run.json``: the one reader
    of that file (resume, and every verb through :class:`clusterable.trained_run.TrainedRun`).

    ``purpose`` starts the messages: ``"--resume"``, or what the reading verb does.

    Raises
    ------
    RunFolderError
        The folder holds no ``run.json``, or a damaged one.
    """
    record = Path(run_dir) / RUN_RECORD
    if not record.is_file():
        remedy = (
            "so there is no run to continue; drop --resume to start a run there"
            if purpose == "--resume"
            else "so it is not a run folder; give the folder `clusterable train` wrote"
        )
        raise RunFolderError(f"{purpose}: {run_dir} holds no {RUN_RECORD}, {remedy}")
    try:
        stored = json.loads(record.read_text())
        return {"spec": dict(stored["spec"]), "config": dict(stored["config"])}
    except (ValueError, KeyError, TypeError) as error:
        raise RunFolderError(
            f"{purpose}: {record} is damaged ({error}); "
            + (
                "start a new run in another folder"
                if purpose == "--resume"
                else "train the run again, or give its checkpoint folder"
            )
        ) from None


def check_resume_settings(
    stored: Mapping[str, Any],
    wanted: Mapping[str, Any],
    given: Iterable[str],
    what: str,
    changeable: frozenset[str] = frozenset(),
) -> None:
    """Every setting named in ``given`` must keep its stored value, but the ``changeable`` ones.

    Parameters
    ----------
    stored, wanted : mapping
        Setting name -> value of the run as started, and as this command would have it; both
        typed (so ``1e-3`` and ``0.001`` compare equal).
    given : iterable of str
        The settings this command names.
    what : str
        ``"run setting"`` or ``"training setting"``, for the message.
    changeable : frozenset of str
        The settings a resumed run may change (not checked).

    Raises
    ------
    RunFolderError
        Settings that differ from the run's; the message lists each with both values.
    """
    conflicts = [
        f"{name}={wanted[name]!r} (the run has {stored.get(name)!r})"
        for name in given
        if name not in changeable and wanted[name] != stored.get(name)
    ]
    if conflicts:
        raise RunFolderError(
            f"--resume continues the run as it was started, but these {what}s differ from it: "
            f"{'; '.join(conflicts)}. Drop them to resume, or start a new run with another --out"
        )


def check_resume_epochs(run_dir: Path | str, epochs: int, given: bool = True) -> None:
    """A resumed run goes on to ``epochs``: never fewer than its latest checkpoint has trained,
    which would train nothing and leave ``run.json`` claiming epochs the run does not have.

    ``given``: the command names the epochs (``--epochs``); else they are ``run.json``'s. A run
    without a readable checkpoint is left to :func:`prepare_run_folder` to refuse.

    Raises
    ------
    RunFolderError
        ``epochs`` below the epoch of the run's latest checkpoint; the message says how many to
        give instead.
    """
    trained = last_checkpoint_epoch(run_dir)
    if trained is None or epochs >= trained:
        return
    remedy = f"give --epochs {trained} or more to go on"
    if given:
        raise RunFolderError(
            f"--epochs {epochs} is below the {trained} epochs {run_dir} has already trained; "
            f"{remedy}, or train a new run with another --out"
        )
    raise RunFolderError(
        f"--resume: {Path(run_dir) / RUN_RECORD} asks for {epochs} epochs, below the {trained} "
        f"{run_dir} has already trained; {remedy}"
    )


def prepare_run_folder(out: Path | str, resume: bool = False, overwrite: bool = False) -> Path:
    """Make ``out`` ready for a run before any data is read or anything is written in it.

    A new run needs ``out`` absent or empty, or ``overwrite``: what it holds is then deleted by
    :func:`clear_run_folder` just before the run's first write, so a run refused while it reads
    its data or builds its pieces leaves the old run whole. An absent ``out`` is proven writable
    but not created: the run's first write creates it, so such a refused run leaves no empty
    folder. ``resume`` needs the run's ``run.json`` and a checkpoint, and removes the
    temporaries of an interrupted write.

    Raises
    ------
    RunFolderError
        ``out`` holds another run, has nothing to resume, or cannot be written.
    """
    out = Path(out)
    if resume and overwrite:
        raise RunFolderError("--resume and --overwrite contradict each other: choose one")
    if resume:
        read_run_record(out)
        try:
            resolve_checkpoint(out)
        except FileNotFoundError:
            raise RunFolderError(
                f"--resume: {out} holds no checkpoint yet (the run stopped before its first one); "
                "start it again with --overwrite"
            ) from None
        check_writable(out)
        remove_temporaries(out)
        return out
    if out.is_file():
        raise RunFolderError(f"--out {out} is a file; give a folder for the run")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise RunFolderError(
                f"--out {out} already holds files (another run?); add --resume to continue the "
                "run there, or --overwrite to delete it and start again, or choose another --out"
            )
    # Proven writable, but not made: a run refused before its first write leaves no folder.
    return check_writable(out, keep=False)


def clear_run_folder(out: Path | str) -> None:
    """Delete what ``out`` holds (``--overwrite``), once the new run is read and built: its
    first write follows."""
    out = Path(out)
    for path in out.iterdir() if out.is_dir() else ():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def last_checkpoint_epoch(run_dir: Path | str) -> int | None:
    """The epoch of the run's latest checkpoint, or None when it has none."""
    try:
        checkpoint = resolve_checkpoint(Path(run_dir))
        return int(json.loads((checkpoint / "meta.json").read_text())["epoch"])
    except (FileNotFoundError, OSError, ValueError, KeyError):
        return None


def interrupted_message(run_dir: Path | str) -> str:
    """What a user should know after Ctrl-C: what was kept, and how to continue."""
    epoch = last_checkpoint_epoch(run_dir)
    if epoch is None:
        return (
            f"interrupted before the first checkpoint: nothing to resume in {run_dir}; "
            "start again with --overwrite"
        )
    return (
        f"interrupted: the last checkpoint is epoch {epoch} in {run_dir}; continue with "
        f"`clusterable train --out {run_dir} --resume`"
    )


def default_run_folder(data: str, loss: str) -> Path:
    """``runs/<data>-<loss>``, where ``folder:PATH`` and ``table:PATH`` data are named after the
    folder or file (``runs/fm-lifted`` for ``folder:/tmp/fm``), never nested along the path."""
    kind, _, path = data.partition(":")
    name = Path(path.rstrip("/")).stem if path else kind
    return Path("runs") / f"{name or kind}-{loss}"
