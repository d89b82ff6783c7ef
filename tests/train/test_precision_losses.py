"""Every loss trains in the mixed precision a GPU run gets by default (``--precision auto``: bf16
on CUDA) as it trains in float32: the network hands the loss bfloat16 embeddings, and a loss that
cannot take them trains nothing (DSCL's rank tolerance at bfloat16 cut every singular value: the
loss stayed at ``k``, with no gradient, while float32 fell from 4.1 to 2.1)."""

from __future__ import annotations

import numpy as np
import pytest

from clusterable.data import load_dataset
from clusterable.losses import available_losses
from clusterable.recipe import RunSpec, build_trainer
from clusterable.train import TrainConfig

#: OPML's Riemannian steps take about 10 s a run here (pymanopt); its bfloat16 value and
#: gradient are checked against float64 in tests/losses/test_opml.py.
LOSSES = [name for name in available_losses() if name != "opml"]


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", split="train").subset(np.arange(512))


def epoch_losses(digits, loss: str, precision: str, device) -> list[float]:
    """The mean loss of each of 3 epochs of an MLP on 512 digits, batches of 128."""
    config = TrainConfig(
        epochs=3, batch_size=128, eval_every=0, precision=precision, device=device.type,
        progress=False, seed=0,
    )  # fmt: skip
    trainer = build_trainer(RunSpec(loss=loss, embedding_dim=16), config, digits)
    return [epoch["loss"] for epoch in trainer.fit().history]


@pytest.mark.parametrize("loss", LOSSES)
def test_each_loss_descends_in_the_default_mixed_precision_as_in_float32(digits, loss, device):
    """bf16 on the CPU (asked: ``auto`` is float32 there), ``auto`` on CUDA. The same seed draws
    the same batches, so each epoch's loss follows float32's up to rounding: the descent must be
    at least half of float32's."""
    precision = "bf16" if device.type == "cpu" else "auto"
    full = epoch_losses(digits, loss, "32", device)
    mixed = epoch_losses(digits, loss, precision, device)
    assert full[-1] < full[0], full  # float32 itself descends
    assert mixed[0] - mixed[-1] >= 0.5 * (full[0] - full[-1]), (full, mixed)
