"""clusterable: clustering-oriented deep metric learning.

``clusterable.TrainedRun`` is a trained run put to use (`clusterable.trained_run`); it is imported
when first named, so that ``import clusterable`` (and ``clusterable --help``) loads no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterable.trained_run import TrainedRun

#: The project's one version: pyproject.toml reads it (``[tool.setuptools.dynamic]``), so the
#: wheel's metadata, ``clusterable --version`` and this attribute agree.
__version__ = "0.1.0"

__all__ = ["TrainedRun", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "TrainedRun":
        from clusterable.trained_run import TrainedRun

        return TrainedRun
    raise AttributeError(f"module 'clusterable' has no attribute {name!r}")
