"""Speed and peak memory of the losses, beside pytorch-metric-learning or a reference formula.

Run from the repository root::

    .venv/bin/python benchmarks/bench_losses.py            # full (about 3 minutes on 2 cores)
    .venv/bin/python benchmarks/bench_losses.py --quick    # fewer repeats
    .venv/bin/python benchmarks/bench_losses.py --sections 1,2,5   # some sections only

What is measured, per case, each in a fresh subprocess so that cases cannot share caches:

- time: median wall-clock time of ``loss(x, labels).backward()`` (forward + backward) over the
  repeats (10, or 3 with ``--quick``; a case stops after 5 s once it has 3), after one warm-up
  call on a small batch that loads the kernels, on ``--threads`` CPU threads (default 1: this
  machine's 2 cores are shared, and one thread keeps ratios stable).
- peak: the process's peak resident set size (``VmHWM``, reset through ``/proc/self/clear_refs``)
  during one forward + backward call, minus its resident size just before it (inputs built,
  libraries loaded). It counts every byte the call touches (torch, numpy, LAPACK workspaces), at
  page granularity; it is Linux-only, and is printed as "n/a" elsewhere.

Cases:

1. ``lifted`` (normalize=True, the definition pytorch-metric-learning uses) vs
   ``pytorch_metric_learning.losses.LiftedStructureLoss`` at n=128, d=512. Goal: >= 20x faster.
2. ``lifted`` alone at n=1260, d=100 (DSCL's batch size). Goal: peak < 200 MB.
   pytorch-metric-learning is not run there: its positive-pair x negative-pair masks ask for
   about 33 GB.
3. ``spectral`` at n=1260, d=100, 100 classes (DSCL: d = k) vs autograd through
   ``torch.linalg.pinv`` (thin form ``k - <Y^+ F, (F^+ Y)^T>`` and the dense ``k - tr(C F F^+)``).
   Goal: >= 3x faster than the thin autograd form. The paper reports 1 s for the gradient at
   n=1280, d=100 (GPU era code, 2017).
4. Every registered loss at n=256, d=128 (32 classes x 8), beside pytorch-metric-learning's
   nearest equivalent where one exists: contrastive -> ContrastiveLoss, triplet ->
   TripletMarginLoss + TripletMarginMiner("semihard") on squared distances, snn -> NCALoss,
   lifted -> LiftedStructureLoss. The definitions differ in details (pml's contrastive is not
   squared, NCA is SNN at temperature 1): the ratio compares cost, not values.
5. A cross-batch memory (XBM) of 0, 1k, 8k and 32k past embeddings at batch 128, d=512 (32 classes
   x 4; the memory's labels drawn from the same 32 classes): ``CrossBatchMemory`` around lifted
   (normalize=True), msdnn and contrastive, beside pytorch-metric-learning's ``CrossBatchMemory``
   around its ``LiftedStructureLoss`` and ``ContrastiveLoss``. Each memory is full before timing;
   one step is forward + backward + enqueue. pml's memory is given ``m + 128`` slots, since it
   stores the batch before computing (ours after): both then see the batch plus ``m`` past items.
   pml's lifted is not run where its ``|P| x |N|`` pair masks would exceed 2 GB.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

#: A case stops repeating once this much time is spent (after at least 3 repeats).
TIME_BUDGET_S = 5.0

PML_EQUIVALENT = {
    "contrastive": "ContrastiveLoss",
    "triplet": "TripletMarginLoss+semihard",
    "snn": "NCALoss",
    "lifted": "LiftedStructureLoss",
}


# ---------------------------------------------------------------- child side: one case per process


def _status_kib(field: str) -> int | None:
    status = Path("/proc/self/status")
    if not status.exists():
        return None
    for line in status.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def _reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _pml_loss(name: str) -> LossFn:
    from pytorch_metric_learning import distances, losses, miners

    if name == "LiftedStructureLoss":
        return losses.LiftedStructureLoss(neg_margin=1.0, pos_margin=0)
    if name == "ContrastiveLoss":
        return losses.ContrastiveLoss(pos_margin=0, neg_margin=1.0)
    if name == "NCALoss":
        return losses.NCALoss()
    if name == "TripletMarginLoss+semihard":
        distance = distances.LpDistance(power=2)
        miner = miners.TripletMarginMiner(
            margin=0.2, type_of_triplets="semihard", distance=distance
        )
        triplet = losses.TripletMarginLoss(margin=0.2, distance=distance)
        return lambda x, y: triplet(x, y, miner(x, y))
    raise ValueError(f"no pytorch-metric-learning equivalent called {name!r}")


def _pinv_autograd_loss(dense: bool) -> LossFn:
    """DSCL Eq. (10) differentiated by autograd through torch.linalg.pinv."""

    def loss(features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        onehot = torch.nn.functional.one_hot(torch.unique(labels, return_inverse=True)[1])
        onehot = onehot.to(features)  # (n, k)
        label_pinv = onehot.T / onehot.sum(0)[:, None]  # (k, n)  Y^+
        if dense:
            clustering = onehot @ label_pinv  # (n, n)  C
            return onehot.shape[1] - torch.trace(
                clustering @ features @ torch.linalg.pinv(features)
            )
        class_means = label_pinv @ features  # (k, d)  Y^+ F
        return onehot.shape[1] - (class_means * (torch.linalg.pinv(features) @ onehot).T).sum()

    return loss


def _our_loss(name: str, num_classes: int, dim: int, kwargs: dict[str, object]) -> LossFn:
    from clusterable.losses import build_loss

    return build_loss(name, num_classes=num_classes, embedding_dim=dim, **kwargs)


def _full_memory(spec: dict) -> LossFn:
    """Ours or pml's cross-batch memory around a loss, every slot filled (see case 5)."""
    size, d, classes = spec["memory"], spec["d"], spec["classes"]
    generator = torch.Generator().manual_seed(1)
    stored = torch.randn(size, d, generator=generator)  # (m, d)
    stored_labels = torch.randint(0, classes, (size,), generator=generator)  # (m,)
    if spec["kind"] == "ours-memory":
        from clusterable.losses import CrossBatchMemory

        inner = _our_loss(spec["loss"], classes, d, spec.get("kwargs", {}))
        memory = CrossBatchMemory(inner, size, d)
        memory.enqueue(stored, stored_labels)
        return memory
    from pytorch_metric_learning import losses

    memory = losses.CrossBatchMemory(
        _pml_loss(spec["loss"]), embedding_size=d, memory_size=size + spec["n"]
    )
    memory.embedding_memory[:size] = stored
    memory.label_memory[:size] = stored_labels
    memory.queue_idx = size
    return memory


def pml_lifted_mask_gib(n: int, memory: int, classes: int) -> float:
    """GiB of the float ``|P| x |N|`` pair mask pml's lifted loss builds for a batch of n
    (``classes`` x ``n / classes``) against itself and a memory of ``memory`` items."""
    partners = n + memory
    positives = n * (partners / classes - 1)
    negatives = n * partners * (1 - 1 / classes)
    return positives * negatives * 4 / 2**30


def _build(spec: dict) -> LossFn:
    kind = spec["kind"]
    if kind == "ours":
        return _our_loss(spec["loss"], spec["classes"], spec["d"], spec.get("kwargs", {}))
    if kind in ("ours-memory", "pml-memory"):
        return _full_memory(spec)
    if kind == "pml":
        return _pml_loss(spec["loss"])
    if kind == "pinv-autograd":
        return _pinv_autograd_loss(dense=spec["loss"] == "dense")
    raise ValueError(f"unknown case kind {kind!r}")


def _forward_backward(loss: LossFn, x: torch.Tensor, labels: torch.Tensor) -> float:
    x = x.detach().clone().requires_grad_(True)
    start = time.perf_counter()
    loss(x, labels).backward()
    return time.perf_counter() - start


def run_case(spec: dict) -> dict:
    """Time and peak memory of one case; runs in its own process (see the module docstring)."""
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    n, d, classes = spec["n"], spec["d"], spec["classes"]
    loss = _build(spec)
    labels = torch.arange(n) % classes  # (n,)
    x = torch.randn(n, d)  # (n, d)
    warm = min(classes * 2, n)
    _forward_backward(loss, x[:warm], labels[:warm])
    peak_mib = None
    if _reset_peak_rss():
        before = _status_kib("VmRSS")
        _forward_backward(loss, x, labels)
        after = _status_kib("VmHWM")
        if before is not None and after is not None:
            peak_mib = (after - before) / 1024
    times: list[float] = []
    # pml's lifted loss takes seconds a call at n=256: stop slow cases early, after 3 repeats.
    while len(times) < spec["repeats"] and (len(times) < 3 or sum(times) < TIME_BUDGET_S):
        times.append(_forward_backward(loss, x, labels))
    return {"ms": 1000 * statistics.median(times), "peak_mib": peak_mib}


# ---------------------------------------------------------------- parent side: cases and table


def measure(spec: dict) -> dict:
    """Run one case in a fresh interpreter; an error becomes a row, not a crash."""
    result = subprocess.run(
        [sys.executable, __file__, "--case", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": last[:90]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def fmt(result: dict) -> str:
    if "error" in result:
        return f"error: {result['error']}"
    peak = "n/a" if result["peak_mib"] is None else f"{result['peak_mib']:8.1f} MiB"
    return f"{result['ms']:10.2f} ms  peak {peak}"


def row(label: str, result: dict) -> None:
    print(f"  {label:<44} {fmt(result)}")


def ratio(slow: dict, fast: dict) -> str:
    if "error" in slow or "error" in fast:
        return "n/a"
    return f"{slow['ms'] / fast['ms']:.1f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 10")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per case")
    parser.add_argument("--sections", default="1,2,3,4,5", help="which cases (default: all)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(json.loads(args.case))))
        return
    sections = {int(s) for s in args.sections.split(",")}

    repeats = 3 if args.quick else 10
    common = {"threads": args.threads, "repeats": repeats}
    print(
        f"forward+backward, median of up to {repeats}; peak = resident-memory high-water mark "
        f"above the pre-call baseline; {args.threads} thread(s); torch {torch.__version__}"
    )

    if 1 in sections:
        lifted_against_pml(common)
    if 2 in sections:
        print("\n[2] lifted alone, n=1260, d=100, 63 classes x 20 (goal: peak < 200 MB)")
        size = {"n": 1260, "d": 100, "classes": 63}
        row("ours  lifted", measure({"kind": "ours", "loss": "lifted", **size, **common}))
        print("  pml   LiftedStructureLoss: not run (its pair x pair masks ask for about 33 GB)")
    if 3 in sections:
        spectral_against_autograd(common)
    if 4 in sections:
        every_loss(common)
    if 5 in sections:
        cross_batch_memory(common)


def lifted_against_pml(common: dict) -> None:
    print("\n[1] lifted vs pytorch-metric-learning, n=128, d=512 (goal: ours >= 20x faster)")
    for classes, layout in [(64, "64 classes x 2 (paper: positive pairs)"), (32, "32 classes x 4")]:
        size = {"n": 128, "d": 512, "classes": classes}
        ours = measure(
            {"kind": "ours", "loss": "lifted", "kwargs": {"normalize": True}, **size, **common}
        )
        theirs = measure({"kind": "pml", "loss": "LiftedStructureLoss", **size, **common})
        print(f"  {layout}")
        row("ours  lifted(normalize=True)", ours)
        row("pml   LiftedStructureLoss", theirs)
        print(f"  speed-up: {ratio(theirs, ours)}")


def spectral_against_autograd(common: dict) -> None:
    print("\n[3] spectral, n=1260, d=100, 100 classes (goal: >= 3x faster than autograd via pinv)")
    size = {"n": 1260, "d": 100, "classes": 100}
    ours = measure({"kind": "ours", "loss": "spectral", **size, **common})
    thin = measure({"kind": "pinv-autograd", "loss": "thin", **size, **common})
    dense = measure({"kind": "pinv-autograd", "loss": "dense", **size, **common})
    row("ours  spectral (closed-form gradient)", ours)
    row("autograd through pinv, thin  <Y^+F, (F^+Y)^T>", thin)
    row("autograd through pinv, dense tr(C F F^+)", dense)
    print(f"  speed-up: {ratio(thin, ours)} vs thin, {ratio(dense, ours)} vs dense")
    print("  paper: 1 s for the gradient at n=1280, d=100")


def every_loss(common: dict) -> None:
    print("\n[4] every registered loss, n=256, d=128, 32 classes x 8")
    from clusterable.losses import available_losses

    size = {"n": 256, "d": 128, "classes": 32}
    for name in available_losses():
        ours = measure({"kind": "ours", "loss": name, **size, **common})
        row(f"ours  {name}", ours)
        if name in PML_EQUIVALENT:
            theirs = measure({"kind": "pml", "loss": PML_EQUIVALENT[name], **size, **common})
            row(f"pml   {PML_EQUIVALENT[name]}", theirs)
            print(f"  {'':<44} pml / ours: {ratio(theirs, ours)}")


def cross_batch_memory(common: dict) -> None:
    print("\n[5] cross-batch memory, batch 128, d=512, 32 classes x 4; one step with a full memory")
    size = {"n": 128, "d": 512, "classes": 32}
    ours_losses = [("lifted", {"normalize": True}), ("msdnn", {}), ("contrastive", {})]
    for memory in (0, 1024, 8192, 32768):
        print(f"  memory {memory}")
        results = {}
        for name, kwargs in ours_losses:
            kind = {"kind": "ours-memory", "memory": memory} if memory else {"kind": "ours"}
            results[name] = measure({**kind, "loss": name, "kwargs": kwargs, **size, **common})
            row(f"ours  {name}", results[name])
        for name, pml_name in [
            ("lifted", "LiftedStructureLoss"),
            ("contrastive", "ContrastiveLoss"),
        ]:
            mask = pml_lifted_mask_gib(128, memory, 32)
            if name == "lifted" and mask > 2:
                print(f"  pml   {pml_name:<38} not run (its |P| x |N| mask: {mask:.1f} GiB)")
                continue
            kind = {"kind": "pml-memory", "memory": memory} if memory else {"kind": "pml"}
            theirs = measure({**kind, "loss": pml_name, **size, **common})
            row(f"pml   {pml_name}", theirs)
            print(f"  {'':<44} pml / ours: {ratio(theirs, results[name])}")


if __name__ == "__main__":
    main()
