"""One compute thread for small models: torch's intra-op pool and the BLAS behind numpy/sklearn.

The library's small networks (digits MLP, Fashion-MNIST CNNs, free 2-D points) run faster on one
thread than on two: thread start-up costs more than the tiny matrix products save, and much more
when the cores are shared (figures: benchmarks/README.md, "Measured defaults").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from threadpoolctl import threadpool_limits


@contextmanager
def single_thread() -> Iterator[None]:
    """Run the block on one torch thread and one BLAS thread, then restore both settings."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(previous)
