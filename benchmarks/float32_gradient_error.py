"""Float32 against float64 on the hard batches of issue 9, for every loss: relative errors.

Run from the repository root::

    .venv/bin/python benchmarks/float32_gradient_error.py

For every loss variant (``LOSS_VARIANTS``) and hard batch (``HARD_BATCHES``) of
``tests/losses/_hard_batches.py`` (the batches ``tests/losses/test_float32.py`` checks) it prints
``max |g32 - g64| / max |g64|``: the float32 gradient with respect to the embeddings against the
float64 gradient computed from the same float32 values (upcast), and the same for the loss value.
The goal is <= 1e-4 for the gradient. A second table does the same for the losses that take
references (a cross-batch memory): each hard batch split into 20 anchors and 20 references, the
near-duplicate pair split between them (``split_off_references``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "losses"))

from _hard_batches import (
    HARD_BATCHES,
    LOSS_VARIANTS,
    float32_errors,
    make_loss,
    split_off_references,
)

GOAL = 1e-4


def main() -> None:
    torch.set_num_threads(1)
    batches = {name: build() for name, build in HARD_BATCHES.items()}
    print(
        f"relative error of float32 against float64 on the same values (goal: gradient <= {GOAL:g})"
    )
    worst = table(LOSS_VARIANTS, {name: (*batch, None) for name, batch in batches.items()})
    print(f"\nworst gradient error: {worst:.2e} (* marks errors above the goal)")
    print("\nwith references: 20 anchors against 20 references, the near-duplicates split")
    with_references = [v for v in LOSS_VARIANTS if make_loss(v).accepts_references]
    split = {name: split_off_references(*batch) for name, batch in batches.items()}
    worst = table(with_references, split)
    print(f"\nworst gradient error with references: {worst:.2e}")


def table(variants: Iterable[str], batches: dict[str, tuple]) -> float:
    """Print one row per loss variant, one column per batch; return the worst gradient error."""
    header = "".join(f" | {name:>26}" for name in batches)
    print(f"{'loss':<30}{header}")
    print(f"{'':<30}" + "".join(f" | {'gradient':>12} {'value':>13}" for _ in batches))
    worst = 0.0
    for variant in variants:
        cells = []
        for x, labels, references in batches.values():
            try:
                value_error, gradient_error = float32_errors(
                    make_loss(variant), x, labels, references
                )
            except ValueError as error:
                cells.append(f" | {'ValueError: ' + str(error)[:14]:>26}")
                continue
            worst = max(worst, gradient_error)
            flag = "*" if gradient_error > GOAL else " "
            cells.append(f" | {gradient_error:>11.2e}{flag} {value_error:>13.2e}")
        print(f"{variant:<30}" + "".join(cells))
    return worst


if __name__ == "__main__":
    main()
