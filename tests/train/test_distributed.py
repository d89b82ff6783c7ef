"""Two gloo processes on one global batch take exactly the single-process step (with a
cross-batch memory: the same two steps, the second against the first's global batch; with an
autoencoder loss: the decoder's gradients averaged over the processes)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from clusterable.data import load_dataset
from clusterable.losses import AutoencoderLoss, CrossBatchMemory, build_loss
from clusterable.models import build_decoder, build_model
from clusterable.train import TrainConfig, Trainer, end_distributed, setup_distributed

GLOBAL_BATCH = 48


def one_step(
    loss_name: str,
    chunk_size: int | None,
    env=None,
    rank: int = 0,
    world: int = 1,
    device: str = "cpu",
):
    """Parameters (model then loss) after one SGD step on this process's slice of the batch;
    ``"memory NAME"``: two steps of NAME in a CrossBatchMemory, the second on the next batch;
    ``"autoencoder NAME"``: NAME plus a reconstruction term."""
    dataset = load_dataset("digits", split="train")
    torch.manual_seed(0)
    model = build_model("mlp", dataset.input_shape, 8).double()
    wrapper, _, name = loss_name.rpartition(" ")
    loss = build_loss(name, num_classes=10, embedding_dim=8).double()
    steps = 1
    if wrapper == "memory":
        loss, steps = CrossBatchMemory(loss, memory_size=64, embedding_dim=8).double(), 2
    if wrapper == "autoencoder":
        decoder = build_decoder("mlp", dataset.input_shape, 8)
        loss = AutoencoderLoss(loss, decoder, weight=0.5).double()
    config = TrainConfig(
        epochs=1,
        optimizer="sgd",
        momentum=0.0,
        lr=0.1,
        chunk_size=chunk_size,
        progress=False,
        device=device,
        precision="32",  # the same arithmetic as the single process's, on a GPU too
    )
    trainer = Trainer(model, loss, dataset, config=config, env=env)
    for step in range(steps):
        rows = slice(step * GLOBAL_BATCH, (step + 1) * GLOBAL_BATCH)
        x = torch.from_numpy(np.asarray(dataset.x[rows])).double()
        y = torch.from_numpy(dataset.labels[rows])
        local = slice(rank * GLOBAL_BATCH // world, (rank + 1) * GLOBAL_BATCH // world)
        value = trainer.train_step(x[local], y[local])
    return value, [p.detach().cpu() for p in [*model.parameters(), *loss.parameters()]]


def _torchrun_environment(rank: int, world: int, port: int) -> None:
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )


def _worker(
    rank: int, world: int, port: int, loss_name: str, chunk_size, out: str, device: str
) -> None:
    _torchrun_environment(rank, world, port)
    env = setup_distributed(device)  # gloo on the CPU, NCCL with a GPU per process
    try:
        value, params = one_step(
            loss_name, chunk_size, env=env, rank=rank, world=world, device=device
        )
        torch.save({"value": value, "params": params}, f"{out}.{rank}")
    finally:
        # As the CLI ends a run: the step's Trainer (a reference cycle) and its DDP model
        # collected, both ranks done, then the group destroyed. A DDP model left alive past the
        # group, or a rank exiting while the other's last collective was in flight, aborted the
        # process now and then ("terminate called without an active exception", SIGABRT; seen
        # with a barrier alone, once in some twenty CI runs).
        end_distributed()


@pytest.mark.parametrize(
    ("loss_name", "chunk_size"),
    [
        ("lifted", None),
        ("spectral", 5),
        ("cross-entropy", None),
        ("memory msdnn", None),
        ("autoencoder center", None),
    ],
)
def test_two_process_step_equals_single_process_step(tmp_path, free_port, loss_name, chunk_size):
    expected_value, expected = one_step(loss_name, chunk_size)
    out = str(tmp_path / "result")
    args = (2, free_port(), loss_name, chunk_size, out, "cpu")
    mp.spawn(_worker, args=args, nprocs=2, join=True)
    for rank in range(2):
        result = torch.load(f"{out}.{rank}", weights_only=False)
        assert result["value"] == pytest.approx(expected_value, rel=1e-12)
        for got, want in zip(result["params"], expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL needs a GPU per process: 2 GPUs")
@pytest.mark.parametrize(("loss_name", "chunk_size"), [("lifted", None), ("memory msdnn", None)])
def test_two_gpu_step_equals_single_process_step(tmp_path, free_port, loss_name, chunk_size):
    expected_value, expected = one_step(loss_name, chunk_size, device="cuda")
    out = str(tmp_path / "result")
    args = (2, free_port(), loss_name, chunk_size, out, "cuda")
    mp.spawn(_worker, args=args, nprocs=2, join=True)
    for rank in range(2):
        result = torch.load(f"{out}.{rank}", weights_only=False)
        assert result["value"] == pytest.approx(expected_value, rel=1e-9)
        for got, want in zip(result["params"], expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-8, atol=1e-10)


def _ending_worker(rank: int, world: int, port: int, out: str) -> None:
    import weakref

    _torchrun_environment(rank, world, port)
    dataset = load_dataset("digits", split="train")
    model = build_model("mlp", dataset.input_shape, 8)
    config = TrainConfig(progress=False, device="cpu")  # gloo: two processes, whatever GPUs
    trainer = Trainer(model, build_loss("lifted"), dataset, config=config)
    network = weakref.ref(trainer.network)
    assert isinstance(network(), torch.nn.parallel.DistributedDataParallel)
    del trainer
    end_distributed()
    torch.save({"ddp_freed": network() is None, "group": dist.is_initialized()}, f"{out}.{rank}")


def test_ending_frees_the_trainers_ddp_model_and_destroys_the_group(tmp_path, free_port):
    out = str(tmp_path / "ended")
    mp.spawn(_ending_worker, args=(2, free_port(), out), nprocs=2, join=True)
    for rank in range(2):
        assert torch.load(f"{out}.{rank}") == {"ddp_freed": True, "group": False}


def test_ending_without_a_group_does_nothing():
    assert not dist.is_initialized()
    end_distributed()
    assert not dist.is_initialized()
