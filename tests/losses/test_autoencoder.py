"""MsDNN-AE (Eq. 6): the objective, and AutoencoderLoss, the wrapper that holds the decoder."""

from __future__ import annotations

import copy

import pytest
import torch
from _hard_batches import relative_error

from clusterable.losses import AutoencoderLoss, MsDNNLoss, build_loss, msdnn_autoencoder_loss


def test_objective_arguments_are_checked():
    with pytest.raises(ValueError, match="shape"):
        msdnn_autoencoder_loss(torch.tensor(0.0), torch.zeros(2, 3), torch.zeros(2, 4), lam=1.0)
    with pytest.raises(ValueError, match="lam"):
        msdnn_autoencoder_loss(torch.tensor(0.0), torch.zeros(2, 3), torch.zeros(2, 3), lam=-1)


def test_autoencoder_objective_is_margin_plus_lambda_mse():
    """Eq. 6 with the mean squared error over all elements of the batch."""
    generator = torch.Generator().manual_seed(10)
    inputs = torch.randn(6, 5, generator=generator, dtype=torch.float64)
    reconstruction = torch.randn(6, 5, generator=generator, dtype=torch.float64)
    reconstruction.requires_grad_()
    margin = torch.tensor(0.25, dtype=torch.float64)
    total = msdnn_autoencoder_loss(margin, reconstruction, inputs, lam=0.5)
    mse = (
        sum(
            (r - t) ** 2
            for row_r, row_t in zip(reconstruction.tolist(), inputs.tolist(), strict=True)
            for r, t in zip(row_r, row_t, strict=True)
        )
        / 30
    )
    assert total.item() == pytest.approx(0.25 + 0.5 * mse, rel=1e-12)
    total.backward()
    assert reconstruction.grad.abs().sum() > 0


def wrapped(weight: float) -> AutoencoderLoss:
    torch.manual_seed(0)
    return AutoencoderLoss(MsDNNLoss(sigma=2.0), torch.nn.Linear(3, 5), weight=weight).double()


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    inputs = torch.randn(8, 5, generator=generator, dtype=torch.float64)
    embeddings = torch.randn(8, 3, generator=generator, dtype=torch.float64)
    return embeddings.requires_grad_(), torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]), inputs


def test_wrapper_is_the_loss_plus_weight_times_the_reconstruction_error():
    loss = wrapped(0.7)
    embeddings, labels, inputs = batch()
    value = loss(embeddings, labels, inputs=inputs)
    with torch.no_grad():
        mse = ((loss.decoder(embeddings) - inputs) ** 2).mean()
    expected = MsDNNLoss(sigma=2.0)(embeddings, labels) + 0.7 * mse
    assert value.item() == pytest.approx(expected.item(), rel=1e-12)
    value.backward()
    assert loss.decoder.weight.grad.abs().sum() > 0, "the decoder trains through the loss"


def test_zero_weight_is_the_wrapped_loss_and_leaves_the_decoder_untouched():
    loss = wrapped(0.0)
    embeddings, labels, inputs = batch()
    value = loss(embeddings, labels, inputs=inputs)
    assert value.item() == MsDNNLoss(sigma=2.0)(embeddings, labels).item()
    value.backward()
    assert loss.decoder.weight.grad is None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_embeddings_meet_a_float32_decoder(dtype):
    """Embeddings of a model in bfloat16 (not under autocast) with the float32 decoder
    ``build_decoder`` makes: float64 on the same rounded values, gradient in the embeddings'
    dtype. The decoder raised PyTorch's dtype mismatch of its first product."""
    torch.manual_seed(0)
    loss = AutoencoderLoss(MsDNNLoss(), torch.nn.Linear(64, 100), weight=0.5)
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(256, 100, generator=generator)
    embeddings = torch.randn(256, 64, generator=generator).to(dtype).requires_grad_()
    labels = torch.arange(256) % 16
    exact = copy.deepcopy(loss).double()
    embeddings64 = embeddings.detach().double().requires_grad_()
    value, value64 = loss(embeddings, labels, inputs=inputs), exact(embeddings64, labels, inputs)
    value.backward()
    value64.backward()
    assert value.item() == pytest.approx(value64.item(), rel=1e-5)
    assert embeddings.grad.dtype == dtype
    assert relative_error(embeddings.grad, embeddings64.grad) < 1e-2
    assert relative_error(loss.decoder.weight.grad, exact.decoder.weight.grad) < 1e-4


def test_the_decoder_is_part_of_the_state_and_parameters():
    loss = AutoencoderLoss(
        build_loss("center", num_classes=3, embedding_dim=4), torch.nn.Linear(4, 6)
    )
    assert {"decoder.weight", "decoder.bias"} <= set(loss.state_dict())
    assert any(p is loss.decoder.weight for p in loss.parameters())
    assert loss.takes_inputs and not MsDNNLoss.takes_inputs


def test_predict_is_the_wrapped_loss_s():
    inner = build_loss("gaussian-corel", num_classes=3, embedding_dim=4)
    embeddings = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
    loss = AutoencoderLoss(inner, torch.nn.Linear(4, 6))
    torch.testing.assert_close(loss.predict(embeddings), inner.predict(embeddings))
    assert AutoencoderLoss(MsDNNLoss(), torch.nn.Linear(4, 6)).predict(embeddings) is None


@pytest.mark.parametrize("weight", [-1.0, float("nan"), float("inf"), "heavy"])
def test_a_bad_weight_says_what_is_wanted(weight):
    with pytest.raises(ValueError, match=r"AutoencoderLoss argument weight=.* must be at least 0"):
        AutoencoderLoss(MsDNNLoss(), torch.nn.Linear(2, 2), weight=weight)


def test_only_an_embedding_loss_is_wrapped():
    with pytest.raises(TypeError, match="EmbeddingLoss"):
        AutoencoderLoss(torch.nn.MSELoss(), torch.nn.Linear(2, 2))  # type: ignore[arg-type]
