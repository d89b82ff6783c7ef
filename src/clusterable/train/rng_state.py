"""The state of every random generator a run draws from, kept in its checkpoints.

torch's (and each GPU's), numpy's global generator and Python's: restored on resume, a run draws
what the uninterrupted run drew (dropout, augmentation crops, samplers seeded from them).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def rng_state() -> dict[str, Any]:
    """The state of every generator, for :func:`restore_rng_state`."""
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "numpy": np.random.get_state(),  # noqa: NPY002 -- restored exactly on resume
        "python": random.getstate(),
    }


def restore_rng_state(state: dict[str, Any]) -> None:
    """Put every generator back as :func:`rng_state` found it (the GPUs' where there are any)."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    np.random.set_state(state["numpy"])  # noqa: NPY002
    random.setstate(state["python"])
