"""A run resumed with more epochs trains on the new, longer schedule from its first resumed step:
never a step at the old curve's final learning rate (0 for cosine)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from clusterable.data import load_dataset
from clusterable.losses import build_loss
from clusterable.models import build_model
from clusterable.train import TrainConfig, Trainer
from clusterable.train.optim import build_optimizer, build_scheduler, load_schedule_state


def step_lrs(out) -> dict[int, float]:
    """The backbone's learning rate of each logged step."""
    records = [json.loads(line) for line in (out / "log.jsonl").open()]
    return {r["step"]: r["lr"] for r in records if r["event"] == "step"}


@pytest.mark.parametrize("schedule", ["cosine", "step"])
def test_a_longer_resume_continues_on_the_new_curve_from_its_first_step(tmp_path, schedule):
    train = load_dataset("digits", split="train").subset(np.arange(128))

    def fit(epochs: int, resume: bool) -> Trainer:
        torch.manual_seed(0)
        model = build_model("mlp", train.input_shape, 8)
        config = TrainConfig(
            epochs=epochs, batch_size=32, schedule=schedule, eval_every=0, progress=False
        )
        trainer = Trainer(model, build_loss("contrastive"), train, config=config, out=tmp_path)
        trainer.fit(resume=resume)
        return trainer

    steps = len(fit(2, resume=False).sampler)  # per epoch
    fit(4, resume=True)
    lrs = step_lrs(tmp_path)
    assert sorted(lrs) == list(range(1, 4 * steps + 1))
    longer = build_scheduler(
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1e-3), schedule, 4 * steps, 0
    ).lr_lambdas[0]
    resumed = [lrs[s + 1] for s in range(2 * steps, 4 * steps)]
    assert resumed == pytest.approx([1e-3 * longer(s) for s in range(2 * steps, 4 * steps)])
    if schedule == "cosine":
        assert lrs[2 * steps + 1] == pytest.approx(0.5e-3)  # half-way on the new curve, not 0


def test_loading_the_state_of_the_same_length_changes_no_rate():
    """A plain resume (same epochs) keeps the rate the optimiser state holds, bit for bit."""
    weight = torch.zeros(2, requires_grad=True)
    optimizer = build_optimizer("adam", [{"params": [weight], "lr": 1e-3}], lr=1e-3,
                                weight_decay=0.0, momentum=0.9)  # fmt: skip
    scheduler = build_scheduler(optimizer, "cosine", total_steps=10, warmup_steps=3)
    for _ in range(7):
        optimizer.step()
        scheduler.step()
    saved, rate = scheduler.state_dict(), optimizer.param_groups[0]["lr"]
    again = build_scheduler(optimizer, "cosine", total_steps=10, warmup_steps=3)
    load_schedule_state(again, saved)
    assert optimizer.param_groups[0]["lr"] == rate and again.get_last_lr() == [rate]
