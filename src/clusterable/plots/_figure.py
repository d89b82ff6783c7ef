"""Headless matplotlib: figures are written to PNG files or bytes, never shown."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")  # before pyplot is imported: no display here
import matplotlib.pyplot as plt
from matplotlib.figure import Figure


def save_figure(figure: Figure, path: str | Path) -> Path:
    """Write ``figure`` to the PNG file ``path`` (its folder made if missing) and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return path


def figure_png(figure: Figure) -> bytes:
    """``figure`` as the bytes of a PNG image, at the resolution a report shows; it is closed."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def new_figure(columns: int = 1, rows: int = 1, size: float = 4.5) -> tuple[Figure, list]:
    """A figure of ``rows`` x ``columns`` square panels of ``size`` inches, and its axes in
    reading order."""
    figure, axes = plt.subplots(rows, columns, figsize=(size * columns, size * rows), squeeze=False)
    return figure, list(axes.flat)


def as_image(item: np.ndarray) -> np.ndarray:
    """An item as ``imshow`` and PIL take it: ``(C, H, W)`` becomes ``(H, W, C)``, one channel
    ``(H, W)``."""
    item = np.asarray(item, dtype=np.float32)
    if item.ndim == 3 and item.shape[0] in (1, 3):  # CHW -> HWC
        item = item.transpose(1, 2, 0)
    return item.squeeze()
