"""Cross-batch memory (Wang et al., CVPR 2020): a FIFO of past embeddings as reference partners.

References: the loss called with the stored items as references (its own equality tests are in
``test_<loss>.py``); pytorch-metric-learning's ``CrossBatchMemory`` over several steps; free 2-D
points, where small batches with a memory reach what a large batch reaches.
"""

from __future__ import annotations

import pytest
import torch
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import reducers as pml_reducers

from clusterable.data import two_class_subclusters
from clusterable.losses import (
    CrossBatchMemory,
    DistributedLoss,
    TripletMarginLoss,
    available_losses,
    build_loss,
)

DIM = 3


def batches(count: int, n: int = 8, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    return [
        (
            torch.randn(n, DIM, generator=generator, dtype=torch.float64),
            torch.randint(0, 3, (n,), generator=generator),
        )
        for _ in range(count)
    ]


def test_the_queue_is_first_in_first_out_and_keeps_the_newest():
    memory = CrossBatchMemory(build_loss("contrastive"), memory_size=10, embedding_dim=DIM).double()
    seen_x, seen_y = [], []
    for x, y in batches(4, n=4):
        memory(x, y)
        seen_x.append(x)
        seen_y.append(y)
    assert len(memory) == 10
    stored_x, stored_y = memory.stored()
    newest_x, newest_y = torch.cat(seen_x)[-10:], torch.cat(seen_y)[-10:]
    # Slots are reused in order: sorting both by their first coordinate aligns them.
    assert torch.equal(stored_x[stored_x[:, 0].argsort()], newest_x[newest_x[:, 0].argsort()])
    assert sorted(stored_y.tolist()) == sorted(newest_y.tolist())


def test_a_batch_larger_than_the_memory_leaves_its_newest_items():
    memory = CrossBatchMemory(build_loss("contrastive"), memory_size=5, embedding_dim=DIM).double()
    ((x, y),) = batches(1, n=12)
    memory(x, y)
    stored_x, stored_y = memory.stored()
    assert torch.equal(stored_x, x[-5:]) and torch.equal(stored_y, y[-5:])


def test_the_value_is_the_loss_with_the_stored_items_as_references():
    loss = build_loss("lifted")
    memory = CrossBatchMemory(loss, memory_size=64, embedding_dim=DIM).double()
    (x1, y1), (x2, y2), (x3, y3) = batches(3)
    assert float(memory(x1, y1)) == float(loss(x1, y1))  # empty memory: the batch alone
    memory(x2, y2)
    past_x, past_y = torch.cat([x1, x2]), torch.cat([y1, y2])
    x3 = x3.requires_grad_()
    value = memory(x3, y3)
    assert torch.equal(value, loss(x3, y3, past_x, past_y))
    stored, _ = memory.stored()
    assert not stored.requires_grad
    value.backward()  # the graph reaches the batch only
    assert x3.grad is not None and torch.isfinite(x3.grad).all()


def test_evaluation_mode_does_not_enqueue():
    memory = CrossBatchMemory(build_loss("snn"), memory_size=64, embedding_dim=DIM).double()
    (x1, y1), (x2, y2) = batches(2)
    memory(x1, y1)
    memory.eval()
    memory(x2, y2)
    assert len(memory) == 8
    memory.train()
    memory(x2, y2)
    assert len(memory) == 16


def test_the_state_dict_holds_the_queue():
    memory = CrossBatchMemory(build_loss("msdnn"), memory_size=12, embedding_dim=DIM).double()
    steps = batches(4)
    for x, y in steps[:3]:
        memory(x, y)
    restored = CrossBatchMemory(build_loss("msdnn"), memory_size=12, embedding_dim=DIM).double()
    restored.load_state_dict(memory.state_dict())
    assert len(restored) == len(memory)
    assert torch.equal(restored(*steps[3]), memory(*steps[3]))
    assert torch.equal(restored.stored()[0], memory.stored()[0])


def test_reset_empties_the_queue():
    memory = CrossBatchMemory(build_loss("lifted"), memory_size=12, embedding_dim=DIM).double()
    memory(*batches(1)[0])
    memory.reset()
    assert len(memory) == 0 and memory.stored()[0].shape == (0, DIM)


@pytest.mark.parametrize("step_count", [1, 5])
def test_matches_pytorch_metric_learning_cross_batch_memory(step_count):
    """PML enqueues the batch before computing (its memory holds it, self pairs removed); ours
    after (the batch is already a partner): a PML memory of ``m + n`` is ours of ``m``."""
    n, m = 8, 20
    distance = pml_distances.LpDistance(power=2)
    pml_loss = pml_losses.TripletMarginLoss(
        margin=0.2, distance=distance, reducer=pml_reducers.MeanReducer()
    )
    theirs = pml_losses.CrossBatchMemory(pml_loss, embedding_size=DIM, memory_size=m + n)
    ours = CrossBatchMemory(TripletMarginLoss(margin=0.2, mining="all"), m, DIM).double()
    for x, y in batches(step_count, n=n, seed=3):
        expected, value = theirs(x, y), ours(x, y)
    assert float(value) > 0
    assert float(value) == pytest.approx(float(expected), rel=1e-9)


@pytest.mark.parametrize("name", available_losses())
def test_losses_without_pairs_are_rejected_saying_why(name):
    extra = {"metric_dim": DIM} if name == "opml" else {}
    loss = build_loss(name, num_classes=3, embedding_dim=DIM, **extra)
    if loss.accepts_references:
        assert len(CrossBatchMemory(loss, 8, DIM)) == 0
        return
    with pytest.raises(ValueError, match="cannot serve") as error:
        CrossBatchMemory(loss, 8, DIM)
    assert loss.references_unsupported_because in str(error.value)


def test_spectral_points_to_its_large_batch_trick():
    with pytest.raises(ValueError, match="chunk_size"):
        CrossBatchMemory(build_loss("spectral"), 8, DIM)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="DistributedLoss\\(CrossBatchMemory"):
        CrossBatchMemory(DistributedLoss(build_loss("lifted")), 8, DIM)
    with pytest.raises(ValueError, match="memory_size"):
        CrossBatchMemory(build_loss("lifted"), 0, DIM)
    memory = CrossBatchMemory(build_loss("lifted"), 8, DIM)
    with pytest.raises(ValueError, match="embedding_dim=3"):
        memory(torch.randn(4, DIM + 1), torch.tensor([0, 0, 1, 1]))
    # Called as a loss with references: refused, naming what to do, and nothing enqueued.
    batch, labels = torch.randn(4, DIM), torch.tensor([0, 0, 1, 1])
    with pytest.raises(ValueError, match="supplies the references itself"):
        memory(batch, labels, batch.clone(), labels)
    assert len(memory) == 0


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ((2.5, DIM), r"memory_size=2\.5 is not an integer: it must be an integer of at least 1"),
        ((None, DIM), r"memory_size=None is not a number: it must be an integer of at least 1"),
        ((8, None), r"embedding_dim=None is not a number: it must be an integer of at least 1"),
        ((8, 0), r"embedding_dim=0 must be an integer of at least 1"),
    ],
)
def test_a_size_that_is_no_count_is_refused_naming_it(sizes, message):
    """memory_size=2.5 built a memory of 2; None was int()'s TypeError."""
    with pytest.raises(ValueError, match=rf"^CrossBatchMemory argument {message}"):
        CrossBatchMemory(build_loss("lifted"), *sizes)


def descend_in_batches(loss, points, labels, batch_size: int, epochs: int, lr: float) -> None:
    """Plain gradient descent on free points, in seeded shuffled batches; each point moves by
    ``lr * batch_size / n`` times its batch gradient, so one epoch moves every point as one
    full-batch step of ``lr`` would."""
    generator = torch.Generator().manual_seed(0)
    n = len(labels)
    for _ in range(epochs):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, batch_size):
            chosen = order[start : start + batch_size]
            x = points[chosen].requires_grad_()
            (gradient,) = torch.autograd.grad(loss(x, labels[chosen]), x)
            points[chosen] -= lr * len(chosen) / n * gradient


def test_small_batches_with_memory_reach_what_a_large_batch_reaches():
    """Lifted on 64 free 2-D points, 40 epochs (measured: large batch 9e-6 of the start, batches
    of 8 alone 0.135, batches of 8 with a memory of the other 56 points 0.006): with the memory
    the batches see every negative, as the large batch does; alone they stall."""
    data = two_class_subclusters(n=64, std=6.0, seed=0)
    start = torch.tensor(data.x / data.x.std())  # (64, 2)
    labels = torch.as_tensor(data.labels)
    full_batch_loss = build_loss("lifted")
    initial = float(full_batch_loss(start, labels))
    finals = {}
    for name, batch_size, loss in [
        ("large", 64, build_loss("lifted")),
        ("small", 8, build_loss("lifted")),
        ("small with memory", 8, CrossBatchMemory(build_loss("lifted"), 56, 2).double()),
    ]:
        points = start.clone()
        descend_in_batches(loss, points, labels, batch_size, epochs=40, lr=4.0)
        finals[name] = float(full_batch_loss(points, labels)) / initial
    assert finals["large"] < 0.02, finals
    assert finals["small with memory"] < 0.02, finals
    assert finals["small"] > 0.05, finals
