"""What the command line says when a verb fails in a way no check foresaw (a bug, or a library's
own error such as a CUDA device-side assert): one line naming the error and a file that holds
the whole traceback, for a bug report; never the traceback itself on the terminal.

``CLUSTERABLE_TRACEBACK=1`` lets the error through unchanged, traceback and all, for debugging.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback

from clusterable.versions import library_versions

#: Exit status of a verb that failed by an unforeseen error (2 is a refused input or setting;
#: 130 an interrupt).
INTERNAL_ERROR_STATUS = 1
#: The environment variable that lets such an error through with its traceback.
SHOW_TRACEBACK = "CLUSTERABLE_TRACEBACK"


def showing_tracebacks() -> bool:
    """Whether ``CLUSTERABLE_TRACEBACK`` asks for the traceback (any value but empty or 0)."""
    return os.environ.get(SHOW_TRACEBACK, "") not in ("", "0")


def first_line(error: BaseException) -> str:
    """``TypeName: the first line of its message`` (CUDA's errors run over several lines)."""
    lines = str(error).strip().splitlines()
    said = lines[0].strip() if lines else ""
    return f"{type(error).__name__}: {said}" if said else type(error).__name__


def write_crash_report(command: str, error: BaseException) -> str | None:
    """A new file in the temporary folder holding the command line, the versions that decide a
    result and ``error``'s traceback; its path, or None where no file could be written."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        with tempfile.NamedTemporaryFile(
            "w", prefix=f"clusterable-{command}-{stamp}-", suffix=".txt", delete=False
        ) as report:
            report.write(f"command: {' '.join(sys.argv)}\n")
            for package, version in library_versions().items():
                report.write(f"{package}: {version}\n")
            report.write("\n")
            report.write("".join(traceback.format_exception(error)))
            return report.name
    except OSError:
        return None


def internal_error_line(command: str, error: BaseException) -> str:
    """The one line ``clusterable COMMAND`` prints for ``error``, its traceback written aside
    (:func:`write_crash_report`)."""
    where = write_crash_report(command, error)
    aside = (
        f"the traceback is in {where}; please report it with that file"
        if where is not None
        else f"set {SHOW_TRACEBACK}=1 to see the traceback, and please report it"
    )
    return f"clusterable {command}: internal error: {first_line(error)} ({aside})"
