"""The versions of Python and the libraries that decide a result, recorded beside every result."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

#: Packages whose version can change a number we report.
PACKAGES = ("clusterable", "torch", "numpy", "scikit-learn", "faiss-cpu", "openTSNE")


def library_versions() -> dict[str, str]:
    """``{"python": ..., package: version or "not installed"}``."""
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found
