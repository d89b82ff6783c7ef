"""The load's check of each image file of a ``folder:PATH`` (`clusterable.data.generic`): what a
JPEG's end-of-image check adds to PIL's ``open`` and ``verify``, per file.

Sides, each in its own process, alternating, ``--repeats`` times, over the same generated
photo-like JPEGs (smooth colour fields and mild noise; quality 90) of each size:

- ``verify``: ``Image.open`` and ``verify`` alone (the load's check before the end check);
- ``ours``: the same and `_jpeg_is_cut_short` (the file's last two bytes; a segment walk where
  bytes follow the image);
- ``whole``: the same and a search of the whole file's bytes for the last scan marker (the end
  check's first form, which read every JPEG whole);
- ``ours, padded``: ``ours`` on the same files with 64 zero bytes after their end marker (as
  some cameras write), which takes the segment walk.

The table gives each side's median milliseconds per file and its peak RSS.

    .venv/bin/python benchmarks/bench_image_check.py [--sizes 1600x1200,400x300] [--files 200]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

SIDES = ("verify", "ours", "whole", "ours, padded")


def photo(width: int, height: int, rng: np.random.Generator) -> Image.Image:
    """A photo-like image: a smooth colour field with mild noise."""
    y, x = np.mgrid[0:height, 0:width] / max(width, height)
    field = np.stack([np.sin(6 * x + c) * np.cos(4 * y - c) for c in (0.0, 1.0, 2.0)], axis=-1)
    noisy = 127 + 100 * field + rng.normal(0, 8, field.shape)
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def whole_read_is_cut_short(path: Path) -> bool:
    """The end check's first form: the whole file's bytes searched."""
    data = path.read_bytes()
    last_scan = data.rfind(b"\xff\xda")
    return last_scan < 0 or data.find(b"\xff\xd9", last_scan) < 0


def run_side(side: str, folder: Path) -> dict[str, float]:
    """One side over every file of ``folder``: ms per file and peak RSS (MB)."""
    from clusterable.data.generic import _jpeg_is_cut_short

    end_check = {"ours": _jpeg_is_cut_short, "whole": whole_read_is_cut_short}.get(
        side.removesuffix(", padded")
    )
    files = sorted(folder.glob("*.jpg"))
    start = time.perf_counter()
    for path in files:
        with Image.open(path) as image:
            image.verify()
        if end_check is not None and end_check(path):
            raise SystemExit(f"{path} taken for cut short")
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"ms": 1e3 * seconds / len(files), "peak_mb": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1600x1200,400x300")
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(run_side(args.side, Path(args.folder))))
        return
    rng = np.random.default_rng(0)
    print("| JPEG | side | ms per file | peak RSS |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for size in args.sizes.split(","):
            width, height = (int(side) for side in size.split("x"))
            plain, padded = Path(scratch, size), Path(scratch, size + "-padded")
            plain.mkdir()
            padded.mkdir()
            for i in range(args.files):
                photo(width, height, rng).save(plain / f"{i}.jpg", quality=90)
                data = (plain / f"{i}.jpg").read_bytes()
                (padded / f"{i}.jpg").write_bytes(data + b"\0" * 64)
            runs: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
            for _ in range(args.repeats):
                for side in SIDES:
                    folder = padded if side.endswith("padded") else plain
                    argv = [sys.executable, __file__, "--side", side, "--folder", str(folder)]
                    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
                    runs[side].append(json.loads(out))
            for side in SIDES:
                ms = statistics.median(run["ms"] for run in runs[side])
                peak = max(run["peak_mb"] for run in runs[side])
                print(f"| {size} | {side} | {ms:.3f} | {peak:.0f} MB |")


if __name__ == "__main__":
    main()
