"""Training throughput: our step against the best plain PyTorch loop, and ``fit`` from JPEG files
against our step (issue 28); ``--losses``: every loss's step on Fashion-MNIST.

Three sides, each in its own process, alternating, ``--repeats`` times. A side's figure is the
median over windows of 5 steps of its items per second; the table gives each side's median over
the repeats, and each ratio as the median of the repeats' ratios (targets: step / plain >= 0.95,
fit / step >= 0.8):

- ``plain``: the best plain loop of the same model and loss (``build`` of the same RunSpec), the
  batch already on the device: on CUDA bf16 autocast and channels_last, on the CPU float32; Adam,
  as the trainer's default; the loss on float32 embeddings, as ours takes it.
- ``step``: :meth:`Trainer.train_step` on the same batch (precision ``auto``: the same choices).
- ``fit``: :meth:`Trainer.fit` over a folder of generated JPEG photos (``--photo-size``), decoded
  and augmented (random resized crop to ``--image-size``, flip; the fine-tuning view) by the
  default workers, class-balanced batches; timed from the start of the second epoch (the first
  starts the workers and decodes the images it caches), windows across epochs included.
  ``--augment-on`` says where its training view is made (``TrainConfig.augment_on``; ``auto``:
  on the device on CUDA, issue 40).
  ``--cache-images auto,none`` makes one fit side of each setting (``TrainConfig.cache_images``),
  alternating with the others. A fit side also reports its peak RSS: the training process's,
  and the largest of its loader workers' (pages shared copy-on-write count in both), and the
  trainer's line on the decoded images.

    .venv/bin/python benchmarks/bench_train.py                   # CPU: corel-cnn, 64 px, batch 64
    python benchmarks/bench_train.py --device cuda --model torchvision:resnet50 --image-size 224 \\
        --batch-size 128                                          # the issue's GPU row
    .venv/bin/python benchmarks/bench_train.py --losses [--steps 20] [--threads 2]

``--side fit --photos DIR --profile FILE`` runs one side alone under cProfile (its main process)
and writes the stats.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from clusterable.data import LabelledDataset, load_dataset
from clusterable.data.transforms import Preprocessing
from clusterable.losses import available_losses
from clusterable.recipe import RunSpec, build, build_trainer
from clusterable.train import TrainConfig, TrainerCallback

SIDES = ("plain", "step", "fit")  # and a fit side per --cache-images
ITEMS_PER_CLASS = 4
#: Steps per timed window; each side's figure is its median window.
WINDOW = 5


# ------------------------------------------------------------------------------------------------
# the data: photos on disk, and one in-memory batch
def write_photos(folder: Path, classes: int, per_class: int, size: tuple[int, int]) -> Path:
    """``classes`` sub-folders of ``per_class`` JPEG photos of ``size`` (width, height): smooth
    colour fields with a few discs and mild noise, which JPEG compresses like photos (pure noise
    would be the decoder's worst case)."""
    rng = np.random.default_rng(0)
    width, height = size
    yy, xx = np.mgrid[0:height, 0:width] / max(width, height)
    for c in range(classes):
        base = rng.uniform(40, 215, 3)
        (folder / f"class{c:03d}").mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            phase = rng.uniform(0.5, 2.0, 3)
            pixels = base + 60 * np.sin(6 * xx[..., None] * phase + 4 * yy[..., None])
            for _ in range(5):
                cx, cy, r = rng.uniform(0, 1, 2).tolist() + [rng.uniform(0.05, 0.25)]
                pixels[(xx - cx) ** 2 + (yy - cy) ** 2 < r * r] = rng.uniform(0, 255, 3)
            pixels += rng.normal(0, 6, pixels.shape)
            image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
            image.save(folder / f"class{c:03d}" / f"{i:03d}.jpg", quality=90)
    return folder


def one_batch(args: argparse.Namespace, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A class-balanced batch ``(B, 3, S, S)`` in [0, 1] with its labels, on ``device``."""
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(args.batch_size, 3, args.image_size, args.image_size, generator=generator)
    y = torch.arange(args.batch_size // ITEMS_PER_CLASS).repeat_interleave(ITEMS_PER_CLASS)
    return x.to(device), y.to(device)


def spec_of(args: argparse.Namespace, data: str = "digits") -> RunSpec:
    return RunSpec(
        data=data,
        model=args.model,
        loss=args.loss,
        embedding_dim=args.embedding_dim,
        image_size=args.image_size,
    )


def config_of(args: argparse.Namespace, **changes: object) -> TrainConfig:
    settings = {
        "batch_size": args.batch_size,
        "items_per_class": ITEMS_PER_CLASS,
        "device": args.device,
        "eval_every": 0,
        "checkpoint_every": 0,
        "progress": False,
        **changes,
    }
    return TrainConfig(**settings)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def window_rate(times: list[float], batch_size: int) -> float:
    """Items per second of the median window of :data:`WINDOW` steps between the ``times``
    (the first: before the first step; then one after each step): a burst of other work on a
    shared machine slows one window, not the figure."""
    if len(times) <= WINDOW:  # too few steps for a window: all of them
        return (len(times) - 1) * batch_size / (times[-1] - times[0])
    ends = times[::WINDOW]
    seconds = [b - a for a, b in itertools.pairwise(ends)]
    return WINDOW * batch_size / statistics.median(seconds)


def timed_steps(step, steps: int, warmup: int, device: torch.device) -> list[float]:
    """The clock before and after each of ``steps`` calls of ``step``, after ``warmup`` untimed
    ones; the device is synchronised at window ends only, as a plain loop would run."""
    for _ in range(warmup):
        step()
    synchronize(device)
    times = [time.perf_counter()]
    for done in range(1, steps + 1):
        step()
        if done % WINDOW == 0:
            synchronize(device)
        times.append(time.perf_counter())
    return times


# ------------------------------------------------------------------------------------------------
# the three sides, each run in its own process
def plain_side(args: argparse.Namespace, device: torch.device) -> float:
    """Items per second of the best plain loop of the same model and loss."""
    x, y = one_batch(args, device)
    num_classes = args.batch_size // ITEMS_PER_CLASS
    pieces = build(spec_of(args), tuple(x.shape[1:]), num_classes, seed=0)
    model, loss = pieces.model.to(device), pieces.loss.to(device)
    cuda = device.type == "cuda"
    if cuda:
        model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam([*model.parameters(), *loss.parameters()], lr=1e-3)
    model.train()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
            embeddings = model(x)  # (B, d)
        loss(embeddings.float(), y).backward()
        optimizer.step()

    return window_rate(timed_steps(step, args.steps, args.warmup, device), args.batch_size)


def step_side(args: argparse.Namespace, device: torch.device) -> float:
    """Items per second of :meth:`Trainer.train_step` on the same batch."""
    x, y = one_batch(args, device)
    batch = LabelledDataset("batch", x.cpu().numpy(), y.cpu().numpy())  # shapes and classes
    trainer = build_trainer(spec_of(args), config_of(args), batch)
    times = timed_steps(lambda: trainer.train_step(x, y), args.steps, args.warmup, device)
    return window_rate(times, args.batch_size)


class EpochClock(TrainerCallback):
    """The clock at the start of epoch ``first`` (0-based) and after each step from then on."""

    def __init__(self, first: int) -> None:
        self.first, self.times = first, []

    def on_epoch_start(self, trainer) -> None:
        if trainer.epoch == self.first:
            self.times.append(time.perf_counter())

    def after_step(self, trainer, loss: float) -> None:
        if self.times:
            self.times.append(time.perf_counter())  # train_step returned the loss: it is done


def peak_rss_mb(who: int) -> float:
    """``resource.getrusage(who)``'s peak resident set in MB (Linux gives kB, macOS bytes)."""
    peak = resource.getrusage(who).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def fit_side(args: argparse.Namespace, device: torch.device) -> dict:
    """Items per second of :meth:`Trainer.fit` from the photos, epochs 2 onwards; the peak RSS
    of this process and of its largest worker, and the trainer's note on the decoded images."""
    spec = spec_of(args, data=f"folder:{args.photos}")
    data = spec.load("all")  # a backbone's preprocessing, else plain resizing
    preprocessing = data.x.preprocessing or Preprocessing(size=args.image_size)
    train = data.replace(
        x=data.x.replace(size=args.image_size, preprocessing=preprocessing, augment_seed=0)
    )
    clock = EpochClock(first=1)
    config = config_of(
        args,
        epochs=args.epochs,
        workers=args.workers,
        cache_images=args.cache_images,
        augment_on=args.augment_on,
        verbose=True,  # its lines: the note on the decoded images, one per epoch
    )
    trainer = build_trainer(spec, config, train)
    trainer.callbacks.append(clock)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        trainer.fit()  # its workers have ended (and been waited for) when it returns
    notes = [line for line in printed.getvalue().splitlines() if line.startswith("images ")]
    return {
        "items_per_s": window_rate(clock.times, args.batch_size),
        "peak_rss_mb": peak_rss_mb(resource.RUSAGE_SELF),
        "peak_worker_rss_mb": peak_rss_mb(resource.RUSAGE_CHILDREN),
        "images": " ".join(notes),
    }


def run_side(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    side = {"plain": plain_side, "step": step_side, "fit": fit_side}[args.side]
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        result = profiler.runcall(side, args, device)
        profiler.dump_stats(args.profile)
    else:
        result = side(args, device)
    found = result if isinstance(result, dict) else {"items_per_s": result}
    print(json.dumps({"side": args.side, **found}))


# ------------------------------------------------------------------------------------------------
# the comparison: sides alternating, each in a fresh process
def child_argv(args: argparse.Namespace, side: str, cache_images: str) -> list[str]:
    keep = ("device", "model", "loss", "embedding_dim", "image_size", "batch_size", "steps")
    keep += ("warmup", "epochs", "threads", "photos", "workers", "augment_on")
    argv = [sys.executable, __file__, "--side", side, "--cache-images", cache_images]
    for name in keep:
        if getattr(args, name) is not None:
            argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return argv


def sides_of(args: argparse.Namespace) -> dict[str, tuple[str, str]]:
    """Each side's name in the table: its child's ``--side`` and ``--cache-images``; one fit
    side for each of the comma-separated ``--cache-images``."""
    caches = args.cache_images.split(",")
    fits = {("fit" if len(caches) == 1 else f"fit[{c}]"): ("fit", c) for c in caches}
    return {"plain": ("plain", caches[0]), "step": ("step", caches[0]), **fits}


def compare(args: argparse.Namespace) -> None:
    sides = sides_of(args)
    with tempfile.TemporaryDirectory() as scratch:
        if args.photos is None:
            width, height = (int(v) for v in args.photo_size.split("x"))
            started = time.perf_counter()
            args.photos = write_photos(
                Path(scratch) / "photos", args.classes, args.per_class, (width, height)
            )
            print(
                f"wrote {args.classes * args.per_class} JPEGs of {args.photo_size} in "
                f"{time.perf_counter() - started:.0f} s",
                flush=True,
            )
        results: dict[str, list[dict]] = {name: [] for name in sides}
        for repeat in range(args.repeats):
            order = list(sides) if repeat % 2 == 0 else list(sides)[::-1]  # against drift
            for name in order:
                done = subprocess.run(
                    child_argv(args, *sides[name]), capture_output=True, text=True, check=False
                )
                if done.returncode != 0:
                    sys.exit(f"side {name} failed:\n{done.stderr}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                results[name].append(result)
                line = f"repeat {repeat + 1}: {name:<9} {result['items_per_s']:8.1f} items/s"
                if "peak_rss_mb" in result:
                    line += (
                        f"; peak RSS {result['peak_rss_mb']:.0f} MB, largest worker "
                        f"{result['peak_worker_rss_mb']:.0f} MB; {result['images']}"
                    )
                print(line, flush=True)
    rates = {name: [r["items_per_s"] for r in found] for name, found in results.items()}
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(describe_setup(args))
    print(
        f"\n| side | items/s, median of {args.repeats} | runs | peak RSS, MB: training process"
        " / largest worker (medians) |\n|---|---|---|---|"
    )
    for name, found in results.items():
        runs = ", ".join(f"{v:.0f}" for v in rates[name])
        peaks = ""
        if "peak_rss_mb" in found[0]:
            main = statistics.median(r["peak_rss_mb"] for r in found)
            worker = statistics.median(r["peak_worker_rss_mb"] for r in found)
            peaks = f"{main:.0f} / {worker:.0f}"
        print(f"| {name} | {median[name]:.1f} | {runs} | {peaks} |")
    # Each repeat's ratio, of sides run one after the other: other work on a shared machine
    # tends to slow neighbours alike, where it skews the medians of the rates apart.
    pairs = [("step / plain loop", ("step", "plain"), 0.95)]
    pairs += [
        (f"{name} from files / step", (name, "step"), 0.8) for name in sides if name[:3] == "fit"
    ]
    for title, (top, bottom), target in pairs:
        ratios = [a / b for a, b in zip(rates[top], rates[bottom], strict=True)]
        print(
            f"\n{title}: {statistics.median(ratios):.3f}x, the median of the repeats' ratios "
            f"({', '.join(f'{r:.2f}' for r in ratios)}); of the medians "
            f"{median[top] / median[bottom]:.3f}x (target >= {target})"
        )


def describe_setup(args: argparse.Namespace) -> str:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    device = args.device
    if device.startswith("cuda"):
        device = torch.cuda.get_device_name(torch.device(device))
    return (
        f"\n{args.model}, {args.image_size} px, batch {args.batch_size} "
        f"({args.batch_size // ITEMS_PER_CLASS} classes x {ITEMS_PER_CLASS}), {args.loss}, "
        f"{args.embedding_dim}-d; {device}, {cpus} CPUs, {args.threads} torch thread(s); "
        f"median of {WINDOW}-step windows; step sides: {args.steps} steps after "
        f"{args.warmup}; fit: epochs 2-"
        f"{args.epochs}; torch {torch.__version__}, {platform.python_version()}"
    )


# ------------------------------------------------------------------------------------------------
# --losses: every loss's step on Fashion-MNIST
def median_seconds(step, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_loss(name: str, data, steps: int) -> tuple[float, float, int]:
    """(seconds per training step, seconds of the loss alone, batch size)."""
    spec = RunSpec(model="corel-cnn", loss=name, embedding_dim=128)
    config = TrainConfig(batch_size=128, items_per_class=12, progress=False, eval_every=0)
    trainer = build_trainer(spec, config, data)
    model, loss = trainer.model, trainer.loss
    batch = next(iter(trainer.sampler))
    x = torch.from_numpy(np.asarray(data.x[np.asarray(batch)]))
    y = torch.from_numpy(data.labels[np.asarray(batch)])
    for _ in range(3):  # warm-up
        trainer.train_step(x, y)
    step = median_seconds(lambda: trainer.train_step(x, y), steps)
    with torch.no_grad():
        embeddings = model(x)

    def loss_alone() -> None:
        leaf = embeddings.clone().requires_grad_()
        loss(leaf, y).backward()

    return step, median_seconds(loss_alone, steps), len(batch)


def every_loss(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    data = load_dataset("fashion-mnist", split="train").subset(np.arange(6000))
    print(f"COREL CNN, Fashion-MNIST 28x28, embedding 128, {args.threads} thread(s),")
    print(f"median of {args.steps} steps; torch {torch.__version__}\n")
    print(
        f"{'loss':<18}{'items/s':>10}{'vs CE':>8}{'step ms':>10}{'loss ms':>10}{'loss share':>12}"
    )
    results = {name: measure_loss(name, data, args.steps) for name in available_losses()}
    ce_rate = results["cross-entropy"][2] / results["cross-entropy"][0]
    for name, (step, loss_time, batch) in results.items():
        rate = batch / step
        print(
            f"{name:<18}{rate:>10.0f}{rate / ce_rate:>8.2f}{1000 * step:>10.1f}"
            f"{1000 * loss_time:>10.2f}{100 * loss_time / step:>11.1f}%"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--losses", action="store_true", help="every loss's step instead")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # a child process
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default="corel-cnn")
    parser.add_argument("--loss", default="lifted")
    parser.add_argument("--embedding-dim", type=int, default=128)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30, help="timed steps of a step side")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before them")
    parser.add_argument("--epochs", type=int, default=3, help="fit: the first is not timed")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--workers", type=int, help="fit: loader processes (default: the run's)")
    parser.add_argument(
        "--cache-images",
        default="auto",
        help="fit: TrainConfig.cache_images (auto, none, ram); several, comma-separated, are "
        "one fit side each, e.g. auto,none",
    )
    parser.add_argument(
        "--augment-on",
        default="auto",
        help="fit: TrainConfig.augment_on (auto, device, loader): where the training view is made",
    )
    parser.add_argument("--photos", type=Path, help="a folder of class sub-folders of photos")
    parser.add_argument("--photo-size", default="400x300", help="generated photos, WxH")
    parser.add_argument("--classes", type=int, default=32)
    parser.add_argument("--per-class", type=int, default=40)
    parser.add_argument("--profile", help="the side's cProfile stats to this file")
    args = parser.parse_args()
    if args.losses:
        every_loss(args)
    elif args.side:
        run_side(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
