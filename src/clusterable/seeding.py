"""One call that seeds every random source a run draws from."""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and every CUDA device), NumPy's global generator and Python's ``random``.

    Building a model and a loss right after this call gives the same initial weights for the
    same seed, whichever recipe builds them.
    """
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 -- seeds user code that uses the global generator
