"""Decoding a JPEG at the working resolution (issue 40): images per second on one core, to the
stored size of a 224 px backbone (shorter side 256), with and without PIL's draft mode, and
simplejpeg's scaled decoding (libjpeg-turbo's, as PIL's) for comparison.

Sides, each in its own process with one thread, alternating, ``--repeats`` times, over the same
generated photo-like JPEGs (smooth colour fields, edges and mild noise; quality 90) of each size:

- ``full``: :meth:`StoredForm.read` without draft: the whole image decoded, then resized (what
  the evaluation view reads, and what the training view read before issue 40);
- ``draft``: :meth:`StoredForm.read` with draft: decoded at the smallest DCT scale at or above
  the stored size, then resized (the training view's stored image now);
- ``simplejpeg``: ``simplejpeg.decode_jpeg(min_height=, min_width=)`` (the smallest of
  libjpeg-turbo's n/8 scales at or above), then the same PIL resize.

A side's figure is its best pass's images per second (``--passes`` passes over the photos); the
table gives each side's median over the repeats, the ratio to ``full`` as the median of the
repeats' ratios, and each side's peak RSS.

    .venv/bin/python benchmarks/bench_decode.py [--sizes 1600x1200,400x300] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

SIDES = ("full", "draft", "simplejpeg")


def write_photos(folder: Path, width: int, height: int, count: int) -> list[Path]:
    """``count`` photo-like JPEGs of ``width x height`` at quality 90."""
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:height, 0:width] / max(width, height)  # (H, W) each
    paths = []
    for i in range(count):
        phase = rng.uniform(0.5, 3, 3)
        pixels = 128 + 70 * np.sin(9 * xx[..., None] * phase + 6 * yy[..., None] * phase[::-1])
        centre = rng.uniform(0.2, 0.8, 2)
        disc = (xx - centre[0]) ** 2 + (yy - centre[1]) ** 2 < 0.02  # a sharp-edged object
        pixels[disc] = rng.uniform(0, 255, 3)
        pixels += rng.normal(0, 5, pixels.shape)  # (H, W, 3)
        path = folder / f"{width}x{height}-{i}.jpg"
        Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(path, quality=90)
        paths.append(path)
    return paths


def reader(side: str, shorter_side: int):
    """``read(path)``: the stored image of ``path`` as ``side`` decodes it."""
    from clusterable.data.stored_images import StoredForm

    form = StoredForm(3, shorter_side, draft=side == "draft")
    if side != "simplejpeg":
        return form.read
    import simplejpeg

    def read(path: Path) -> Image.Image:
        with Image.open(path) as header:
            width, height = form.stored_size(*header.size)
        pixels = simplejpeg.decode_jpeg(path.read_bytes(), min_height=height, min_width=width)
        image = Image.fromarray(pixels)
        return image if image.size == (width, height) else image.resize((width, height))

    return read


def run_side(side: str, photos: list[Path], shorter_side: int, passes: int) -> dict:
    """One side in this process: its best pass's images per second, and its peak RSS."""
    read = reader(side, shorter_side)
    read(photos[0])  # warm: imports, the first file's pages
    best = 0.0
    for _ in range(passes):
        start = time.perf_counter()
        for path in photos:
            read(path)
        best = max(best, len(photos) / (time.perf_counter() - start))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB
    return {"images_per_s": best, "peak_rss_mb": peak_mb}


def child(side: str, photos: list[Path], args: argparse.Namespace) -> dict:
    """``side`` run in a process of its own with one thread."""
    argv = [sys.executable, __file__, "--side", side, "--shorter-side", str(args.shorter_side)]
    argv += ["--passes", str(args.passes), "--photos", *map(str, photos)]
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run(
        argv, capture_output=True, text=True, check=True, env={**os.environ, **env}
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", default="1600x1200,400x300", help="WIDTHxHEIGHT, comma-separated"
    )
    parser.add_argument("--count", type=int, default=24, help="photos of each size")
    parser.add_argument("--passes", type=int, default=3, help="passes over the photos per side")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs of every side")
    parser.add_argument("--shorter-side", type=int, default=256, help="the stored shorter side")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--photos", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(run_side(args.side, args.photos, args.shorter_side, args.passes)))
        return
    print(
        f"one core per side, {args.count} photos x {args.passes} passes (best pass), median of "
        f"{args.repeats} repeats; to shorter side {args.shorter_side}"
    )
    print("| photos | side | images/s per core | ms per image | vs full | peak RSS MB |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes.split(","):
            width, height = (int(v) for v in size.split("x"))
            photos = write_photos(Path(folder), width, height, args.count)
            runs: dict[str, list[dict]] = {side: [] for side in SIDES}
            for _ in range(args.repeats):
                for side in SIDES:
                    runs[side].append(child(side, photos, args))
            for side in SIDES:
                rate = statistics.median(r["images_per_s"] for r in runs[side])
                ratio = statistics.median(
                    mine["images_per_s"] / full["images_per_s"]
                    for mine, full in zip(runs[side], runs["full"], strict=True)
                )
                peak = max(r["peak_rss_mb"] for r in runs[side])
                print(
                    f"| {width} x {height} | {side} | {rate:,.0f} | {1000 / rate:.2f} | "
                    f"{ratio:.2f}x | {peak:.0f} |"
                )


if __name__ == "__main__":
    main()
