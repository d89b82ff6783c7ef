"""Every registered loss honours the shared call convention (DESIGN.md, ``clusterable.losses``).

Parametrised over ``available_losses()``: a loss is tested here the moment it is registered.
"""

from __future__ import annotations

import pytest
import torch

from clusterable.losses import (
    EmbeddingLoss,
    available_losses,
    build_loss,
    loss_class,
    register_loss,
)
from clusterable.losses._registry import LOSSES

PAPER_LOSSES = {
    "spectral",
    "lifted",
    "contrastive",
    "triplet",
    "cross-entropy",
    "center",
    "cosine-corel",
    "gaussian-corel",
    "msdnn",
    "snn",
    "expected-triplet",
    "opml",
}
DIM, CLASSES = 6, 4


def make_loss(name: str, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    extra = {"metric_dim": DIM} if name == "opml" else {}
    loss = build_loss(name, num_classes=CLASSES, embedding_dim=DIM, **extra)
    return loss.to(dtype)


def batch(
    labels: list[int], dtype: torch.dtype, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(len(labels), DIM, generator=generator, dtype=dtype, requires_grad=True)
    return x, torch.tensor(labels)


def assert_finite_and_backpropagates(loss: torch.Tensor, x: torch.Tensor) -> None:
    assert loss.dim() == 0, f"loss must be a scalar, got shape {tuple(loss.shape)}"
    assert torch.isfinite(loss), f"loss is {loss.item()}"
    loss.backward()
    assert x.grad is not None, "no gradient reached the embeddings"
    assert torch.isfinite(x.grad).all()


def test_every_paper_loss_is_registered():
    assert set(available_losses()) == PAPER_LOSSES


@pytest.mark.parametrize("name", available_losses())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_backward_finite(name, dtype):
    x, y = batch([0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 3], dtype)
    value = make_loss(name, dtype)(x, y)
    assert value.dtype == dtype
    assert_finite_and_backpropagates(value, x)


@pytest.mark.parametrize("name", available_losses())
@pytest.mark.parametrize(
    "labels", [[2] * 8, [0, 1, 2, 3], [1]], ids=["one-class", "distinct", "one"]
)
def test_degenerate_batches_are_finite(name, labels):
    x, y = batch(labels, torch.float64)
    value = make_loss(name, torch.float64)(x, y)
    assert_finite_and_backpropagates(value, x)


@pytest.mark.parametrize("name", available_losses())
def test_identical_points_are_finite(name):
    x = torch.ones(6, DIM, dtype=torch.float64, requires_grad=True)
    value = make_loss(name, torch.float64)(x, torch.tensor([0, 0, 1, 1, 2, 2]))
    assert_finite_and_backpropagates(value, x)


@pytest.mark.parametrize("name", available_losses())
def test_under_cpu_autocast(name):
    layer = torch.nn.Linear(5, DIM)
    inputs = torch.randn(12, 5, generator=torch.Generator().manual_seed(1))
    loss = make_loss(name)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        embeddings = layer(inputs)
        value = loss(embeddings, torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]))
    assert torch.isfinite(value)
    value.backward()
    assert torch.isfinite(layer.weight.grad).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("name", available_losses())
def test_on_cuda(name):
    x, y = batch([0, 0, 1, 1, 2, 2, 3, 3], torch.float32)
    x = x.detach().cuda().requires_grad_()
    value = make_loss(name).cuda()(x, y.cuda())
    assert_finite_and_backpropagates(value, x)


BAD_INPUTS = {
    "length-mismatch": (torch.randn(5, DIM), torch.tensor([0, 0, 1, 1]), r"4 entries .* 5 rows"),
    "1-d-embeddings": (torch.randn(DIM), torch.tensor([0]), r"2-D"),
    "3-d-embeddings": (torch.randn(4, 2, DIM), torch.tensor([0, 0, 1, 1]), r"2-D"),
    "float-labels": (torch.randn(4, DIM), torch.tensor([0.0, 0.0, 1.0, 1.0]), r"integer"),
    "nan-embeddings": (
        torch.tensor([[float("nan")] * DIM] + [[0.0] * DIM] * 3),
        torch.tensor([0, 0, 1, 1]),
        r"NaN or inf",
    ),
    "inf-embeddings": (
        torch.tensor([[float("inf")] * DIM] + [[0.0] * DIM] * 3),
        torch.tensor([0, 0, 1, 1]),
        r"NaN or inf",
    ),
}


@pytest.mark.parametrize("name", available_losses())
@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_gets_a_clear_error(name, case):
    embeddings, labels, message = BAD_INPUTS[case]
    with pytest.raises(ValueError, match=message):
        make_loss(name)(embeddings, labels)


def test_unknown_loss_names_the_choices():
    with pytest.raises(ValueError, match=r"choose one of: .*lifted"):
        build_loss("liftd")


def test_unknown_argument_names_the_accepted_ones():
    with pytest.raises(ValueError, match="takes no argument marginn; its arguments are: margin"):
        build_loss("lifted", marginn=1.0)


def test_a_loss_without_arguments_rejects_any():
    with pytest.raises(ValueError, match="its arguments are: none"):
        build_loss("spectral", margin=1.0)


@pytest.mark.parametrize(
    ("name", "needs"),
    [("opml", "needs embedding_dim"), ("cross-entropy", "needs num_classes, embedding_dim")],
)
def test_a_missing_required_argument_is_named_with_an_example(name, needs):
    with pytest.raises(ValueError, match=needs) as error:
        build_loss(name)
    assert f"build_loss({name!r}, " in str(error.value)
    assert "AttractiveRepulsiveLoss" not in str(error.value)


def test_opml_defaults_to_a_metric_that_fits_the_embedding():
    assert build_loss("opml", embedding_dim=16).metric_dim == 16
    assert build_loss("opml", embedding_dim=512).metric_dim == 128  # the paper's l
    assert loss_class("opml") is type(build_loss("opml", embedding_dim=8))


def test_task_keywords_reach_only_the_losses_that_take_them():
    assert build_loss("cross-entropy", num_classes=3, embedding_dim=5).weight.shape == (3, 5)
    assert type(build_loss("lifted", num_classes=3, embedding_dim=5)).__name__ == (
        "LiftedStructureLoss"
    )
    with pytest.raises(ValueError, match="takes no argument weights"):
        build_loss("lifted", num_classes=3, weights=1.0)


class ScaledNormLoss(EmbeddingLoss):
    """A loss of a user's own: the mean embedding norm, scaled."""

    def __init__(self, embedding_dim: int, scale: float = 1.0) -> None:
        super().__init__()
        self.embedding_dim, self.scale = embedding_dim, scale

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.scale * embeddings.norm(dim=1).mean()


def test_a_loss_registered_by_a_user_is_listed_built_and_checked():
    with LOSSES.scratch():
        register_loss("scaled-norm", family="toy")(ScaledNormLoss)
        assert "scaled-norm" in available_losses() and loss_class("scaled-norm") is ScaledNormLoss
        assert LOSSES.metadata("scaled-norm") == {"family": "toy"}
        loss = build_loss("scaled-norm", num_classes=3, embedding_dim=5, scale=2.0)
        assert (loss.embedding_dim, loss.scale) == (5, 2.0)  # the task's width reached it
        assert loss(torch.ones(2, 4), torch.tensor([0, 1])).item() == 4.0
        with pytest.raises(
            ValueError,
            match="loss 'scaled-norm' takes no argument scal; its arguments are: "
            "embedding_dim, scale",
        ):
            build_loss("scaled-norm", embedding_dim=5, scal=2.0)
        with pytest.raises(ValueError, match="needs embedding_dim"):
            build_loss("scaled-norm", scale=2.0)
    assert "scaled-norm" not in available_losses()
