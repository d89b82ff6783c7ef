"""The training view of a batch (issue 40): made by the loader (PIL, item by item) against made on
the device (each item's crop cut on the host, then one batched resize,
:mod:`clusterable.data.device_augment`), from images held decoded at the working resolution
(``cache_images``), as a worker and the training step see them.

Sides, each in its own process, alternating, ``--repeats`` times, over the same generated
photo-like stored images (shorter side ``resize``, half landscape 4:3, half portrait):

- ``loader``: ``PixelItems`` items (``ImageFiles.pixels``: crop, resize, flip with PIL) and
  ``collate_pixels``: the uint8 batch a loader worker hands over;
- ``device``: ``CropItems`` items (the same draws; the crop's pixels cut) and ``collate_crops``
  on the host (``host ms``), then ``resized_crops`` on ``--device`` (``resize ms``; CUDA
  synchronised).

A side's figure is its median batch time over ``--batches`` batches (epochs 0, 1, ...); the
table gives each side's median over the repeats, the ratio as the median of the repeats'
ratios (loader / device: above 1, the device side is faster), and each side's peak RSS (and
peak CUDA memory). ``--threads`` torch threads (1: what one loader worker has).

    .venv/bin/python benchmarks/bench_augment.py [--sizes 128:256:224,32:73:64] [--repeats 3]
    python benchmarks/bench_augment.py --device cuda --threads 8
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

from clusterable.data import ImageFiles, LabelledDataset
from clusterable.data.device_augment import CropItems, collate_crops, resized_crops
from clusterable.data.stored_images import DecodedImages
from clusterable.data.transforms import Preprocessing
from clusterable.train.loading import PixelItems, collate_pixels

SIDES = ("loader", "device")


def stored_set(batch: int, resize: int, size: int) -> LabelledDataset:
    """``batch`` photo-like images held decoded, as ``cache_images`` holds a training set's:
    shorter side ``resize`` (half 4:3 landscape, half 3:4 portrait), for a view of ``size``."""
    rng = np.random.default_rng(0)
    shapes = np.array(
        [(resize, resize * 4 // 3) if i % 2 else (resize * 4 // 3, resize) for i in range(batch)],
        dtype=np.int64,
    )
    images = []
    for height, width in shapes:
        yy, xx = np.mgrid[0:height, 0:width] / max(height, width)  # (H, W) each
        phase = rng.uniform(0.5, 3, 3)
        pixels = 128 + 70 * np.sin(9 * xx[..., None] * phase + 6 * yy[..., None] * phase[::-1])
        images.append(np.clip(pixels + rng.normal(0, 4, pixels.shape), 0, 255).astype(np.uint8))
    prep = Preprocessing(size=size, crop_fraction=size / resize)
    files = ImageFiles([f"{i}.jpg" for i in range(batch)], size, preprocessing=prep, augment_seed=0)
    sizes = shapes.prod(axis=1) * 3
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    buffer = np.concatenate([image.reshape(-1) for image in images])
    decoded = DecodedImages(buffer, offsets, shapes, files.stored_form)
    return LabelledDataset("stored", files.replace(decoded=decoded), np.arange(batch) % 8)


def run_side(side: str, batch: int, resize: int, size: int, batches: int, device: str) -> dict:
    """Median milliseconds per batch of ``side`` (and its parts), and its peak memory."""
    data = stored_set(batch, resize, size)
    target = torch.device(device)
    host, resize_ms, total = [], [], []
    for epoch in range(batches + 1):  # the first batch warms up
        at = [(i, epoch) for i in range(batch)]
        started = time.perf_counter()
        if side == "loader":
            items = PixelItems(data)
            collate_pixels([items[i] for i in at])
            cut = time.perf_counter()
        else:
            crops = CropItems(data)
            cropped, _ = collate_crops([crops[i] for i in at], crops.size, crops.interpolation)
            cut = time.perf_counter()
            resized_crops(cropped.to(target))
            if target.type == "cuda":
                torch.cuda.synchronize()
        done = time.perf_counter()
        if epoch:
            host.append(1000 * (cut - started))
            resize_ms.append(1000 * (done - cut))
            total.append(1000 * (done - started))
    cuda_peak = torch.cuda.max_memory_allocated() / 2**20 if target.type == "cuda" else 0.0
    return {
        "ms": statistics.median(total),
        "host_ms": statistics.median(host),
        "resize_ms": statistics.median(resize_ms),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "cuda_mb": cuda_peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="128:256:224,32:256:224,128:73:64",
        help="batch:stored shorter side:view size, comma-separated",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--size", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.side:
        batch, resize, size = (int(v) for v in args.size.split(":"))
        print(json.dumps(run_side(args.side, batch, resize, size, args.batches, args.device)))
        return
    print(f"torch {torch.__version__}, device {args.device}, {args.threads} thread(s)")
    print(
        "| batch | stored -> view | side | ms per batch | host ms | resize ms | "
        "loader / device | peak RSS MB | peak CUDA MB |\n|---|---|---|---|---|---|---|---|---|"
    )
    for spec in args.sizes.split(","):
        results: dict[str, list[dict]] = {side: [] for side in SIDES}
        for _ in range(args.repeats):
            for side in SIDES:
                command = [
                    sys.executable,
                    __file__,
                    "--side",
                    side,
                    "--size",
                    spec,
                    "--batches",
                    str(args.batches),
                    "--device",
                    args.device,
                    "--threads",
                    str(args.threads),
                ]
                output = subprocess.run(command, check=True, capture_output=True, text=True)
                results[side].append(json.loads(output.stdout))
        ratio = statistics.median(
            loader["ms"] / device["ms"]
            for loader, device in zip(results["loader"], results["device"], strict=True)
        )
        batch, resize, size = spec.split(":")
        for side in SIDES:
            rows = results[side]
            figures = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
            shown = f"**{ratio:.2f}x**" if side == "device" else ""
            print(
                f"| {batch} | {resize} -> {size} | {side} | {figures['ms']:.1f} | "
                f"{figures['host_ms']:.1f} | {figures['resize_ms']:.1f} | {shown} | "
                f"{figures['rss_mb']:.0f} | {figures['cuda_mb']:.0f} |"
            )


if __name__ == "__main__":
    main()
