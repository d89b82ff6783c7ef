"""The points as k-means works on them: float32 it can trust, produced block by block
(`clusterable.cluster.kmeans`)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

#: Elements per block of points: bounds the ``(block, k)`` distances of the torch back end and
#: the float64 copies of rescaled blocks.
BLOCK_ELEMENTS = 1 << 24


class KMeansFrame:
    """The points as float32 the assignments can trust, produced block by block.

    k-means is invariant to translating and scaling all points by one factor; its float32
    arithmetic is not: squared distances overflow near 1e19 and vanish near 1e-25, and
    ``|x|^2 + |c|^2 - 2 x.c`` cancels far from the origin. Points that are float32 already, of
    moderate size (`SAFE_PEAK`) and not far from the origin relative to their spread
    (`SAFE_OFFSET`), are used as they are (no copy); any others are centred and scaled into
    ``[-1, 1]`` block by block when used, so no second ``(n, d)`` array is held.
    """

    #: Largest absolute values used without rescaling: squares stay far from float32's limits.
    SAFE_PEAK = (1e-8, 1e8)
    #: Largest centre offset, in units of the spread, used without rescaling: the cancellation
    #: error stays below ``1e-7 * 100 = 1e-5`` of a squared distance.
    SAFE_OFFSET = 10.0

    def __init__(self, points: np.ndarray) -> None:
        self.points = points
        highest, lowest = points.max(axis=0), points.min(axis=0)  # (d,) each; no (n, d) copy
        peak = max(float(highest.max()), -float(lowest.min()))
        self.peak = peak if peak > 0 else 1.0
        self.centre = points.mean(axis=0, dtype=np.float64) / self.peak  # (d,)
        # Half the widest coordinate range: at most the largest deviation from the centre.
        spread = float((highest.astype(np.float64) - lowest).max()) / (2.0 * self.peak)
        self.identity = (
            points.dtype == np.float32
            and self.SAFE_PEAK[0] <= peak <= self.SAFE_PEAK[1]
            and float(np.abs(self.centre).max()) <= self.SAFE_OFFSET * spread
        )
        if not self.identity:  # the largest deviation, which maps the points into [-1, 1]
            spread = 0.0
            for start, stop in self.chunks(points.shape[0]):
                block = points[start:stop] / self.peak - self.centre
                spread = max(spread, float(np.abs(block).max()))
        self.spread = spread if spread > 0 else 1.0
        self._squared_norms: np.ndarray | None = None

    def squared_norms(self) -> np.ndarray:
        """``(n,)`` float32 ``|x|^2`` of every point in the working frame, computed once."""
        if self._squared_norms is None:
            n = self.points.shape[0]
            self._squared_norms = np.empty(n, dtype=np.float32)
            for start, stop in self.chunks(n):
                block = self.rows(slice(start, stop))
                self._squared_norms[start:stop] = np.einsum("nd,nd->n", block, block)
        return self._squared_norms

    def chunks(self, n: int, per_row: int = 8) -> Iterator[tuple[int, int]]:
        """Ranges over ``n`` rows, each bounded to `BLOCK_ELEMENTS` of ``per_row`` rows."""
        step = max(1, BLOCK_ELEMENTS // (per_row * self.points.shape[1]))
        for start in range(0, n, step):
            yield start, min(start + step, n)

    def blocks(self) -> Iterator[tuple[int, int]]:
        """Row ranges to work on: all at once when the points are used as they are."""
        if self.identity:
            yield 0, self.points.shape[0]
        else:
            yield from self.chunks(self.points.shape[0])

    def rows(self, index: np.ndarray | slice) -> np.ndarray:
        """Rows of the points in the working frame, ``(m, d)`` float32."""
        if self.identity:
            return self.points[index]
        block = self.points[index].astype(np.float64) / self.peak
        return ((block - self.centre) / self.spread).astype(np.float32)
