"""Embedding a folder of photos, as every evaluation of a run on image files does: decoded in the
main process (the float items, as before issue 28's change) against decoded by loader workers as
uint8 pixels (``embed_dataset``'s default), each side in its own process, alternating.

    .venv/bin/python benchmarks/bench_embed.py [--photo-size 400x300] [--image-size 64]
        [--model corel-cnn] [--device cpu] [--repeats 3]

Both sides embed the same photos with the same model and give the same embeddings (the pixel
path's floats are the float items bit for bit, tests/train/test_embed.py); the figure is items
per second of the whole pass, after one untimed pass over 64 photos.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from bench_train import write_photos
from torch.utils.data import DataLoader

from clusterable.device import resolve_device
from clusterable.recipe import RunSpec, build
from clusterable.train import embed_dataset

SIDES = ("main process", "workers")


def old_embed(model: torch.nn.Module, dataset, device: torch.device) -> None:
    """The float items through a DataLoader in this process: the path before workers."""
    with torch.no_grad():
        for x, _ in DataLoader(dataset, batch_size=512, shuffle=False):
            model(x.to(device)).float().cpu()


def side(args: argparse.Namespace) -> None:
    device = resolve_device(args.device)
    spec = RunSpec(data=f"folder:{args.photos}", model=args.model, image_size=args.image_size)
    dataset = spec.load("all")
    model = build(spec, dataset.input_shape, dataset.num_classes, seed=0).model.to(device).eval()
    run = (
        (lambda ds: old_embed(model, ds, device))
        if args.child == SIDES[0]
        else (lambda ds: embed_dataset(model, ds, device=device))
    )
    run(dataset.subset(range(64)))  # untimed: threads, cuDNN, first pages
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    run(dataset)
    if device.type == "cuda":
        torch.cuda.synchronize()
    print(json.dumps({"items_per_s": len(dataset) / (time.perf_counter() - start)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photo-size", default="400x300")
    parser.add_argument("--photos", type=Path, help="a folder of class sub-folders of photos")
    parser.add_argument("--classes", type=int, default=32)
    parser.add_argument("--per-class", type=int, default=40)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--model", default="corel-cnn")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side(args)
        return
    with tempfile.TemporaryDirectory() as scratch:
        if args.photos is None:
            size = tuple(int(v) for v in args.photo_size.split("x"))
            args.photos = write_photos(Path(scratch) / "photos", args.classes, args.per_class, size)
        rates: dict[str, list[float]] = {name: [] for name in SIDES}
        for repeat in range(args.repeats):
            for name in SIDES if repeat % 2 == 0 else SIDES[::-1]:
                command = [sys.executable, __file__, "--child", name, "--photos", str(args.photos)]
                command += ["--image-size", str(args.image_size), "--model", args.model]
                command += ["--device", args.device]
                out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
                rates[name].append(json.loads(out.strip().splitlines()[-1])["items_per_s"])
                print(f"repeat {repeat + 1}: {name:12s} {rates[name][-1]:8.1f} items/s", flush=True)
    old, new = (statistics.median(rates[name]) for name in SIDES)
    print(
        f"\n{args.model} at {args.image_size} px, {args.classes * args.per_class} photos of "
        f"{args.photo_size}, {args.device}, torch {torch.__version__}: main process {old:.0f}, "
        f"workers {new:.0f} items/s (medians of {args.repeats}); workers / main {new / old:.2f}x"
    )


if __name__ == "__main__":
    main()
