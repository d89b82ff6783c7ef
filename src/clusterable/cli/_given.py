"""A refused setting named as the user gave it: its flag, its ``--set``, or its ``--config`` line.

The RunSpec and TrainConfig check every value where it enters, and name the field
(:class:`~clusterable.train.config_typing.SettingError`: ``training setting grad_clip=-1.0 must
be above 0``). A command line user never typed ``grad_clip``: :func:`settings_named_as_given`
wraps a verb's handler so that the one-line error names what was typed instead:

- ``--grad-clip -1.0 must be above 0, or none (no clipping)``;
- ``--loss-arg margn=1: loss 'lifted' takes no argument margn; ...``;
- ``--set grad_clip=-1 must be above 0, ...``;
- ``run.yaml, line 4: training setting grad_clip=-1.0 must be above 0, ...``.

A value that came from none of these is named by its flag as the default
(``--batch-size 128 (its default) is not above the 128 embedding dimensions ...``), unless it may
have come from a file or a search (``--config``, ``--param``, a resumed run's own ``run.json``):
then it keeps the field's name.
"""

from __future__ import annotations

import argparse
import functools
from typing import TYPE_CHECKING, Any

from clusterable.cli._parser import Handler
from clusterable.cli._settings import run_flags

if TYPE_CHECKING:
    from clusterable.train.config_typing import SettingError


def settings_named_as_given(handler: Handler) -> Handler:
    """``handler`` whose refused settings (a ``SettingError``) become one-line ``ValueError``\\ s
    naming the flag, ``--set`` or ``--config`` line they came from."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        from clusterable.train.config_typing import SettingError

        try:
            return handler(args)
        except SettingError as error:
            raise ValueError(named_as_given(error, args)) from None

    return run


def _shown(value: Any) -> str:
    """A value as the command line writes it: ``-1.0``, ``recall@l``, ``none``."""
    return "none" if value is None else str(value)


def named_as_given(error: SettingError, args: argparse.Namespace) -> str:
    """The message of ``error`` about the flag, ``--set`` or file line its value came from."""
    flags = {flag.name: flag for flag in run_flags()}
    flag = flags.get(error.setting)
    given = getattr(args, error.setting, None) if flag is not None else None
    if flag is not None and given is not None:
        if error.value is True:  # a switch given: its flag alone says it
            return error.as_given(flag.flag)
        if not flag.is_keywords:
            return error.as_given(f"{flag.flag} {_shown(error.value)}")
        keywords = dict(given)
        if error.key in keywords:
            return error.as_given(f"{flag.flag} {error.key}={_shown(keywords[error.key])}")
    for pair in getattr(args, "set", None) or []:
        name, _, text = pair.partition("=")
        if name.replace("-", "_") == error.setting:
            return error.as_given(f"--set {pair}" if text else f"--set {name}")
    config = getattr(args, "config", None)
    if config:
        from clusterable.train.config_typing import settings_file_line

        section = ("train",) if flag is not None and flag.section == "train" else ()
        keys = (*section, error.setting, *([error.key] if error.key else []))
        line = settings_file_line(config, keys)
        if line is not None:
            return f"{config}, line {line}: {error}"
    settings_read = ("config", "param", "resume")  # files or a search that may hold the value
    if flag is not None and not any(getattr(args, name, None) for name in settings_read):
        return error.as_given(f"{flag.flag} {_shown(error.value)} (its default)")
    return str(error)
