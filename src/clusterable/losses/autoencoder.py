"""An autoencoder term around any loss: MsDNN-AE's objective (Eq. 6).

Chauhan, Davoudi, Komeili. "Multi-scale Deep Nearest Neighbors". IJCNN 2021 (arXiv:2104.08494).

MsDNN-AE trains the encoder ``f`` with a mirrored decoder ``g`` and minimises
``loss(f(x)) + lambda * MSE(g(f(x)), x)``: the reconstruction keeps in the embedding what the
inputs hold beyond the labels (sub-classes, MsDNN Sec. III-C). :class:`AutoencoderLoss` holds the
decoder, so its weights train with the loss's own parameters and are saved in every checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clusterable._ranges import Bounds, check_bounds
from clusterable.losses._base import LOW_PRECISION, EmbeddingLoss
from clusterable.losses.distributed import loss_on_global_batch, mean_with_local_gradient

#: The range of MsDNN-AE's lambda (Eq. 6), the reconstruction term's weight: 0 leaves it out.
RECONSTRUCTION_WEIGHT = Bounds(0)


def msdnn_autoencoder_loss(
    margin_loss: Tensor, reconstruction: Tensor, inputs: Tensor, lam: float
) -> Tensor:
    """MsDNN-AE objective (MsDNN Eq. 6): ``margin_loss + lam * MSE(reconstruction, inputs)``.

    Parameters
    ----------
    margin_loss : Tensor
        The scalar value of the embedding loss (:class:`~clusterable.losses.MsDNNLoss` in the
        paper) on the encoder's embeddings ``f(x)``.
    reconstruction : Tensor
        The decoder's output ``g(f(x))``, same shape as ``inputs``.
    inputs : Tensor
        The batch ``x``.
    lam : float
        Weight of the reconstruction term, >= 0 (the paper searches {0.1, 0.5, 1, 10}).

    Returns
    -------
    Tensor
        Scalar. The mean squared error averages over every element, as the paper's "mean square
        error" reconstruction loss. Under ``torch.distributed``, with each process holding its
        own items, the error is the mean over processes (the global batch's) and its gradient
        this process's own (:func:`~clusterable.losses.distributed.mean_with_local_gradient`).

    Examples
    --------
    >>> import torch
    >>> from clusterable.losses import MsDNNLoss
    >>> encoder, decoder = torch.nn.Linear(5, 2), torch.nn.Linear(2, 5)
    >>> x, y = torch.randn(8, 5), torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    >>> f = encoder(x)
    >>> total = msdnn_autoencoder_loss(MsDNNLoss()(f, y), decoder(f), x, lam=0.5)
    """
    if reconstruction.shape != inputs.shape:
        raise ValueError(
            f"reconstruction has shape {tuple(reconstruction.shape)} but inputs have "
            f"{tuple(inputs.shape)}; the decoder must output the input's shape"
        )
    check_bounds(
        {"lam": lam},
        {"lam": RECONSTRUCTION_WEIGHT},
        "msdnn_autoencoder_loss argument",
        none_allowed=False,
    )
    error = F.mse_loss(reconstruction, inputs.to(reconstruction.dtype))
    return margin_loss + lam * mean_with_local_gradient(error)


class AutoencoderLoss(EmbeddingLoss):
    """``loss(embeddings, labels) + weight * MSE(decoder(embeddings), inputs)`` (MsDNN-AE, Eq. 6).

    The decoder is a sub-module: its weights are in this loss's ``state_dict`` and parameters.
    Called as ``loss(embeddings, labels, inputs=x)`` (:attr:`takes_inputs`). Under
    ``torch.distributed`` each process passes its own items: the wrapped loss sees the
    all-gathered global batch (:func:`~clusterable.losses.distributed.loss_on_global_batch`), the
    decoder only this process's items; the value is the global batch's on every process, and
    averaging the decoder's gradients over the processes (the trainer does) gives the
    single-process step.

    Parameters
    ----------
    loss : EmbeddingLoss
        The embedding loss (MsDNN's in the paper; any loss works).
    decoder : nn.Module
        Maps ``(n, d)`` embeddings to ``(n, *input_shape)`` reconstructions
        (:func:`~clusterable.models.build_decoder`).
    weight : float
        lambda, >= 0 (the paper searches {0.1, 0.5, 1, 10}); 0 leaves the decoder unused.

    Examples
    --------
    >>> import torch
    >>> from clusterable.losses import MsDNNLoss
    >>> loss = AutoencoderLoss(MsDNNLoss(), torch.nn.Linear(2, 5), weight=0.5)
    >>> x, y = torch.randn(8, 5), torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    >>> value = loss(torch.nn.Linear(5, 2)(x), y, inputs=x)
    """

    takes_inputs = True

    argument_bounds: ClassVar[Mapping[str, Bounds]] = {"weight": RECONSTRUCTION_WEIGHT}

    def __init__(self, loss: EmbeddingLoss, decoder: nn.Module, weight: float = 1.0) -> None:
        self.check_arguments(weight=weight)
        super().__init__()
        if not isinstance(loss, EmbeddingLoss):
            raise TypeError(
                f"AutoencoderLoss wraps an EmbeddingLoss, got {type(loss).__name__}; build it "
                "with clusterable.losses.build_loss"
            )
        self.loss = loss
        self.decoder = decoder
        self.weight = float(weight)

    @property
    def needs_pairs(self) -> bool:  # type: ignore[override]
        """The wrapped loss's: the reconstruction term alone does not make a batch train."""
        return self.loss.needs_pairs

    @property
    def needs_more_items_than_dimensions(self) -> bool:  # type: ignore[override]
        """The wrapped loss's, for the same reason."""
        return self.loss.needs_more_items_than_dimensions

    def forward(self, embeddings: Tensor, labels: Tensor, inputs: Tensor) -> Tensor:  # type: ignore[override]
        value = loss_on_global_batch(self.loss, embeddings, labels)
        if self.weight == 0.0:
            return value
        decoder_input = embeddings.to(self._decoder_dtype(embeddings))  # (n, d)
        reconstruction = self.decoder(decoder_input)  # (n, *input_shape)
        if reconstruction.dtype in LOW_PRECISION:
            reconstruction = reconstruction.float()
        return msdnn_autoencoder_loss(value, reconstruction, inputs, self.weight)

    def _decoder_dtype(self, embeddings: Tensor) -> torch.dtype:
        """The dtype the decoder takes: its weights' (bfloat16 embeddings of a bfloat16 model meet
        a float32 decoder, exactly upcast; autocast recasts them for its own products), or the
        embeddings' for a decoder without floating-point weights."""
        weight = next((p for p in self.decoder.parameters() if p.is_floating_point()), None)
        return embeddings.dtype if weight is None else weight.dtype

    def predict(self, embeddings: Tensor) -> Tensor | None:
        """The wrapped loss's classes (None when it has no classifier)."""
        return self.loss.predict(embeddings)

    def extra_repr(self) -> str:
        return f"weight={self.weight:g}"
