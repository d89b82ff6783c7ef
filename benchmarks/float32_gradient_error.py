"""Float32 against float64 on the hard batches of issue 9, for every loss: relative errors.

Run from the repository root::

    .venv/bin/python benchmarks/float32_gradient_error.py

For every loss variant (``LOSS_VARIANTS``) and hard batch (``HARD_BATCHES``) of
``tests/losses/_hard_batches.py`` (the batches ``tests/losses/test_float32.py`` checks) it prints
``max |g32 - g64| / max |g64|``: the float32 gradient with respect to the embeddings against the
float64 gradient computed from the same float32 values (upcast), and the same for the loss value.
The goal is <= 1e-4 for the gradient.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "losses"))

from _hard_batches import HARD_BATCHES, LOSS_VARIANTS, float32_errors, make_loss

GOAL = 1e-4


def main() -> None:
    torch.set_num_threads(1)
    batches = {name: build() for name, build in HARD_BATCHES.items()}
    print(
        f"relative error of float32 against float64 on the same values (goal: gradient <= {GOAL:g})"
    )
    header = "".join(f" | {name:>26}" for name in batches)
    print(f"{'loss':<30}{header}")
    print(f"{'':<30}" + "".join(f" | {'gradient':>12} {'value':>13}" for _ in batches))
    worst = 0.0
    for variant in LOSS_VARIANTS:
        cells = []
        for x, labels in batches.values():
            try:
                value_error, gradient_error = float32_errors(make_loss(variant), x, labels)
            except ValueError as error:
                cells.append(f" | {'ValueError: ' + str(error)[:14]:>26}")
                continue
            worst = max(worst, gradient_error)
            flag = "*" if gradient_error > GOAL else " "
            cells.append(f" | {gradient_error:>11.2e}{flag} {value_error:>13.2e}")
        print(f"{variant:<30}" + "".join(cells))
    print(f"\nworst gradient error: {worst:.2e} (* marks errors above the goal)")


if __name__ == "__main__":
    main()
