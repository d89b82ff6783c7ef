"""What the figure tests share: the figures a module would write, kept open to be read."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[ModuleType], list[Figure]]]:
    """``drawn(module)``: the list the figures ``module`` saves go into from then on, instead of
    their files; every figure is closed after the test."""

    def capture(module: ModuleType) -> list[Figure]:
        figures: list[Figure] = []

        def keep(figure: Figure, path: str | Path) -> Path:
            figures.append(figure)
            return Path(path)

        monkeypatch.setattr(module, "save_figure", keep)
        return figures

    yield capture
    plt.close("all")
