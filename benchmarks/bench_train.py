"""Training throughput: our step against the best plain PyTorch loop, and ``fit`` from JPEG files
against our step (issues 28 and 40); ``--losses``: every loss's step on Fashion-MNIST.

Three sides, each in its own process, alternating, ``--repeats`` times. A side's figure is the
median over windows of 5 steps of its items per second; the table gives each side's median over
the repeats, and each ratio as the median of the repeats' ratios (targets: step / plain >= 0.95,
issue 28; fit / step >= 0.9, issue 40):

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
  alternating with the others; ``--fit-case 20480:1600x1200:disk`` (repeatable) one fit side of
  that many photos of that size through that setting instead. Generated photos are
  ``--distinct-photos`` drawn ones and hard links to them (each file is decoded on its own). Each
  side's disk caches go to a fresh folder of its own (``$CLUSTERABLE_CACHE_DIR``), so a disk
  cache is built by the side's first run and nothing is left in the user's. A fit side also
  reports its peak RSS: the training process's, and the largest of its loader workers' (pages
  shared copy-on-write count in both), and the trainer's line on the decoded images (how many,
  where, and the seconds their decoding took). ``--budget`` stops starting sides after that many
  seconds, and an interrupt (SIGINT) ends the side running; the table then gives what ran.

    .venv/bin/python benchmarks/bench_train.py                   # CPU: corel-cnn, 64 px, batch 64
    python benchmarks/bench_train.py --device cuda --model torchvision:resnet50 --image-size 224 \\
        --batch-size 128 --augment-on device --fit-case 6000:1600x1200:ram \\
        --fit-case 20480:1600x1200:disk --repeats 1 --epochs 2  # issue 40's rows (gpu_check g)
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
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from clusterable.data import LabelledDataset, load_dataset
from clusterable.data.image_cache import CACHE_DIR_VARIABLE
from clusterable.data.transforms import Preprocessing
from clusterable.losses import available_losses
from clusterable.recipe import RunSpec, build, build_trainer
from clusterable.train import TrainConfig, TrainerCallback

SIDES = ("plain", "step", "fit")  # and a fit side per --fit-case or --cache-images
#: Targets of the ratios: our step against the plain loop (issue 28), ``fit`` from files against
#: our step (issue 40; issue 28's was 0.8).
STEP_TARGET, FIT_TARGET = 0.95, 0.9
ITEMS_PER_CLASS = 4
#: Steps per timed window; each side's figure is its median window.
WINDOW = 5


# ------------------------------------------------------------------------------------------------
# the data: photos on disk, and one in-memory batch
def _write_photo(path: Path, size: tuple[int, int], seed: int) -> None:
    """One JPEG photo of ``size`` (width, height): a smooth colour field with a few discs and mild
    noise, which JPEG compresses like photos (pure noise would be the decoder's worst case)."""
    rng = np.random.default_rng(seed)
    width, height = size
    yy, xx = np.mgrid[0:height, 0:width] / max(width, height)
    phase = rng.uniform(0.5, 2.0, 3)
    pixels = rng.uniform(40, 215, 3) + 60 * np.sin(6 * xx[..., None] * phase + 4 * yy[..., None])
    for _ in range(5):
        cx, cy, r = rng.uniform(0, 1, 2).tolist() + [rng.uniform(0.05, 0.25)]
        pixels[(xx - cx) ** 2 + (yy - cy) ** 2 < r * r] = rng.uniform(0, 255, 3)
    pixels += rng.normal(0, 6, pixels.shape)
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(path, quality=90)


def write_photos(
    folder: Path, classes: int, per_class: int, size: tuple[int, int], distinct: int | None = None
) -> Path:
    """``classes`` sub-folders of ``per_class`` JPEG photos of ``size`` (width, height).

    ``distinct`` photos are drawn (by every CPU at once) and the others are hard links to them:
    each file is still decoded on its own, as a set of that many photos would be, but 20,000
    photos of 1600 x 1200 take seconds to write instead of an hour (about 0.3 s a photo on this
    machine's cores).
    """
    total = classes * per_class
    digits = max(3, len(str(classes - 1)))
    paths = [
        folder / f"class{i // per_class:0{digits}d}" / f"{i % per_class:03d}.jpg"
        for i in range(total)
    ]
    for path in paths[::per_class]:
        path.parent.mkdir(parents=True, exist_ok=True)
    drawn = total if distinct is None else max(1, min(distinct, total))
    with ProcessPoolExecutor() as pool:
        list(pool.map(_write_photo, paths[:drawn], itertools.repeat(size), range(drawn)))
    for i, path in enumerate(paths[drawn:]):
        os.link(paths[i % drawn], path)
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
@dataclass(frozen=True)
class FitCase:
    """One ``fit`` side: ``photos`` generated JPEGs of ``size`` (width, height), or the folder of
    ``--photos`` (``photos`` None), read through ``cache`` (``TrainConfig.cache_images``)."""

    photos: int | None
    size: tuple[int, int] | None
    cache: str

    @classmethod
    def parse(cls, text: str) -> FitCase:
        """``"6000:400x300:ram"``: 6,000 photos of 400 x 300 through ``cache_images: ram``."""
        try:
            photos, size, cache = text.split(":")
            width, height = (int(v) for v in size.lower().split("x"))
            case = cls(int(photos), (width, height), cache)
            TrainConfig(cache_images=cache)  # its owner's check of the setting
        except ValueError as error:
            raise SystemExit(
                f"--fit-case takes PHOTOS:WxH:CACHE such as 6000:400x300:ram, got {text!r}: {error}"
            ) from None
        if case.photos < 1 or min(width, height) < 1:
            raise SystemExit(f"--fit-case {text!r}: photos and sizes must be positive")
        return case

    def describe(self) -> str:
        if self.photos is None or self.size is None:
            return self.cache
        return f"{self.photos:,} {self.size[0]}x{self.size[1]} {self.cache}"


def fit_cases(args: argparse.Namespace) -> list[FitCase]:
    """``--fit-case``s, else one case of ``--classes`` x ``--per-class`` photos of
    ``--photo-size`` (or ``--photos``) for each of the comma-separated ``--cache-images``."""
    if args.fit_case:
        if args.photos is not None:
            raise SystemExit("--fit-case generates its photos: give it or --photos, not both")
        return [FitCase.parse(text) for text in args.fit_case]
    if args.photos is not None:
        return [FitCase(None, None, cache) for cache in args.cache_images.split(",")]
    width, height = (int(v) for v in args.photo_size.split("x"))
    photos = args.classes * args.per_class
    return [FitCase(photos, (width, height), cache) for cache in args.cache_images.split(",")]


def sides_of(cases: list[FitCase]) -> dict[str, FitCase | None]:
    """Each side's name in the table and its fit case (None: the plain loop and our step)."""
    fits = {"fit": cases[0]} if len(cases) == 1 else {f"fit[{c.describe()}]": c for c in cases}
    return {"plain": None, "step": None, **fits}


def child_argv(args: argparse.Namespace, side: str, photos: Path | None, cache: str) -> list[str]:
    keep = ("device", "model", "loss", "embedding_dim", "image_size", "batch_size", "steps")
    keep += ("warmup", "epochs", "threads", "workers", "augment_on")
    argv = [sys.executable, __file__, "--side", side, "--cache-images", cache]
    argv += [] if photos is None else ["--photos", str(photos)]
    for name in keep:
        if getattr(args, name) is not None:
            argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return argv


def photo_folders(args: argparse.Namespace, cases: list[FitCase], scratch: Path) -> list[Path]:
    """Each case's folder of photos: ``--photos``, or generated once per count and size."""
    written: dict[tuple[int, tuple[int, int]], Path] = {}
    for case in cases:
        if case.photos is None or case.size is None:
            continue
        key = (case.photos, case.size)
        if key not in written:
            started = time.perf_counter()
            folder = scratch / f"photos-{case.photos}-{case.size[0]}x{case.size[1]}"
            classes = -(-case.photos // args.per_class)
            write_photos(folder, classes, args.per_class, case.size, args.distinct_photos)
            written[key] = folder
            print(
                f"wrote {classes * args.per_class:,} JPEGs of {case.size[0]}x{case.size[1]} "
                f"({args.distinct_photos} drawn, the rest linked) in "
                f"{time.perf_counter() - started:.0f} s",
                flush=True,
            )
    return [
        args.photos if c.photos is None or c.size is None else written[(c.photos, c.size)]
        for c in cases
    ]


def run_child(
    args: argparse.Namespace,
    name: str,
    case: FitCase | None,
    photos: Path | None,
    cache: Path,
    repeat: int,
) -> dict:
    """Side ``name`` in its own process, its disk caches under ``cache``; prints its line."""
    started = time.monotonic()
    argv = child_argv(args, "fit" if case else name, photos, case.cache if case else "auto")
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, CACHE_DIR_VARIABLE: str(cache)},
    )
    if done.returncode != 0:
        sys.exit(f"side {name} failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    seconds = time.monotonic() - started
    line = f"repeat {repeat + 1}: {name:<9} {result['items_per_s']:8.1f} items/s ({seconds:.0f} s)"
    if "peak_rss_mb" in result:
        line += (
            f"; peak RSS {result['peak_rss_mb']:.0f} MB, largest worker "
            f"{result['peak_worker_rss_mb']:.0f} MB; {result['images']}"
        )
    print(line, flush=True)
    return result


def compare(args: argparse.Namespace) -> None:
    """Every side in its own process, ``--repeats`` rounds, until ``--budget`` is spent; then the
    table and the ratios of the rounds that ran both sides."""
    cases = fit_cases(args)
    sides = sides_of(cases)
    # An interrupt ends the side running and prints what ran, even where this process was
    # started with SIGINT ignored (a shell's background job).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    results: dict[str, dict[int, dict]] = {name: {} for name in sides}
    not_run: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        folders = dict(zip(cases, photo_folders(args, cases, Path(scratch)), strict=True))
        rounds = [
            (r, list(sides) if r % 2 == 0 else list(sides)[::-1]) for r in range(args.repeats)
        ]
        try:
            for repeat, order in rounds:  # alternating against drift
                for name in order:
                    if args.budget is not None and time.monotonic() - started > args.budget:
                        not_run.append(f"{name} (repeat {repeat + 1})")
                        continue
                    case = sides[name]
                    # A fresh cache folder per side: its first run builds a disk cache, and
                    # nothing is left in the user's own.
                    cache = Path(scratch) / f"cache-{list(sides).index(name)}"
                    photos = None if case is None else folders[case]
                    results[name][repeat] = run_child(args, name, case, photos, cache, repeat)
        except KeyboardInterrupt:  # gpu_check past its budget: the table of what ran
            not_run.append("the side interrupted and those after it")
    print(describe_setup(args))
    print_table(results)
    if not_run:
        print(f"\nnot run (budget spent or interrupted): {', '.join(not_run)}")


def print_table(results: dict[str, dict[int, dict]]) -> None:
    """The sides' median rates and peak memory, then each ratio against its target."""
    rates = {
        name: {r: v["items_per_s"] for r, v in found.items()} for name, found in results.items()
    }
    print(
        "\n| side | items/s, median of the repeats | runs | peak RSS, MB: training process"
        " / largest worker (medians) |\n|---|---|---|---|"
    )
    for name, found in results.items():
        if not found:
            print(f"| {name} | not run | | |")
            continue
        runs = ", ".join(f"{v:.0f}" for v in rates[name].values())
        peaks = ""
        if "peak_rss_mb" in next(iter(found.values())):
            main = statistics.median(r["peak_rss_mb"] for r in found.values())
            worker = statistics.median(r["peak_worker_rss_mb"] for r in found.values())
            peaks = f"{main:.0f} / {worker:.0f}"
        print(f"| {name} | {statistics.median(rates[name].values()):.1f} | {runs} | {peaks} |")
    # Each repeat's ratio, of sides run one after the other: other work on a shared machine
    # tends to slow neighbours alike, where it skews the medians of the rates apart.
    pairs = [("step / plain loop", ("step", "plain"), STEP_TARGET)]
    pairs += [
        (f"{name} from files / step", (name, "step"), FIT_TARGET)
        for name in results
        if name[:3] == "fit"
    ]
    for title, (top, bottom), target in pairs:
        both = sorted(set(rates[top]) & set(rates[bottom]))
        if not both:
            continue
        ratios = [rates[top][r] / rates[bottom][r] for r in both]
        print(
            f"\n{title}: {statistics.median(ratios):.3f}x, the median of the repeats' ratios "
            f"({', '.join(f'{r:.2f}' for r in ratios)}) (target >= {target})"
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
        help="fit: TrainConfig.cache_images (auto, none, ram, disk); several, comma-separated, "
        "are one fit side each, e.g. auto,none",
    )
    parser.add_argument(
        "--fit-case",
        action="append",
        metavar="PHOTOS:WxH:CACHE",
        help="a fit side over PHOTOS generated JPEGs of WxH through cache_images CACHE, e.g. "
        "20480:1600x1200:disk; repeat for several (instead of --classes, --photo-size and "
        "--cache-images)",
    )
    parser.add_argument(
        "--distinct-photos",
        type=int,
        default=128,
        help="generated photos drawn; the others are hard links to them",
    )
    parser.add_argument(
        "--budget", type=float, help="seconds after which no further side is started"
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
