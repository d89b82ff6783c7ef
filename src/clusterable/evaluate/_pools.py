"""numpy's BLAS on one thread for an evaluation's small products.

numpy's OpenBLAS (pthreads) keeps its worker threads spinning for about 0.1 s after each product
that used them, whatever the thread count is set to afterwards. On a 2-core machine the next
faiss search (the next evaluation's, or the caller's) then shares a core with a spinning thread:
2,000 x 64 searched for 126 neighbours took 42-44 ms within 0.1 s of a two-thread numpy product,
22-24 ms after a pause. Products too small to gain much from a second thread are therefore
computed on one (`clusterable.evaluate.table.ONE_THREAD_PRODUCT`; benchmarks/README.md,
"Evaluation"); numpy's results do not depend on the thread count.

The libraries are found once, when this module is imported: threadpoolctl reads the path of every
loaded library (3-10 ms with torch loaded), which no evaluation then pays.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import threadpoolctl


def _pthreads_blas() -> tuple[Any, ...]:
    """The loaded OpenBLAS libraries whose threads are pthreads (numpy's and scipy's wheels),
    not OpenMP ones (faiss's, whose pool is its own)."""
    return tuple(
        lib
        for lib in threadpoolctl.ThreadpoolController().lib_controllers
        if lib.internal_api == "openblas" and getattr(lib, "threading_layer", "") == "pthreads"
    )


#: Found once, at import (numpy, and so its BLAS, is loaded before this module).
_PTHREADS_BLAS = _pthreads_blas()


@contextmanager
def blas_on_one_thread(one: bool = True) -> Iterator[None]:
    """Run the block with numpy's (and scipy's) OpenBLAS at one thread when ``one``; the previous
    thread counts come back after it."""
    if not one:
        yield
        return
    previous = [lib.get_num_threads() for lib in _PTHREADS_BLAS]
    for lib in _PTHREADS_BLAS:
        lib.set_num_threads(1)
    try:
        yield
    finally:
        for lib, count in zip(_PTHREADS_BLAS, previous, strict=True):
            lib.set_num_threads(count)
