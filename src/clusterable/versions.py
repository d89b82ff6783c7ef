"""The versions of Python and the libraries that decide a result, recorded beside every result."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

from clusterable import __version__

#: Packages, beside clusterable itself, whose version can change a number we report.
PACKAGES = ("torch", "numpy", "scikit-learn", "faiss-cpu", "openTSNE")


def library_versions() -> dict[str, str]:
    """``{"python": ..., package: version or "not installed"}``."""
    # clusterable's is the running code's own, not an editable install's metadata of its set-up.
    found = {"python": platform.python_version(), "clusterable": __version__}
    for package in PACKAGES:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found
