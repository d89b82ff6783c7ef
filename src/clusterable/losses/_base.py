"""The call convention every loss of :mod:`clusterable.losses` shares.

``loss(embeddings, labels)`` checks its inputs once, here, so every loss rejects bad input with the
same clear message, and computes in float32 or float64 whatever autocast hands it: half-precision
log-sum-exp and pseudo-inverses are not trustworthy, and a loss is cheap next to the network.
A loss that cannot be represented in that precision (embeddings of 1e19 and above in float32)
raises a ``ValueError`` that says what to do, never returns NaN or inf.

Pair- and triplet-based losses (:class:`~clusterable.losses.PairLoss`) also take a reference set,
``loss(embeddings, labels, ref_embeddings, ref_labels)``: the anchors are the batch, and every
anchor's partners (positives and negatives) are the other batch items *plus* the references. A
cross-batch memory (:class:`~clusterable.losses.CrossBatchMemory`) passes its stored embeddings
this way. References with no rows give exactly the loss without references, and so does the
batch itself passed as its references (the same tensor, as pytorch-metric-learning's
``ref_emb=embeddings``): its pairs are then the batch's own, no item paired with itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from clusterable._ranges import Bounds, SettingError, check_bounds
from clusterable.losses._pairs import peak_magnitude
from clusterable.mining.triplets import check_label_tensor

#: Dtypes a loss does not compute in (see the module docstring).
LOW_PRECISION = (torch.float16, torch.bfloat16)


def host_readable(tensor: Tensor) -> bool:
    """Whether a check may read ``tensor``'s values back to the host: not while its CUDA stream
    is captured into a CUDA graph, where any read-back aborts the capture (the captured step's
    inputs are then checked by the eager step run before capture, not in the replays)."""
    return not (tensor.is_cuda and torch.cuda.is_current_stream_capturing())


def wide_dtype(tensor: Tensor) -> torch.dtype:
    """float64 for sums and decompositions that must not round like the working precision, on
    the tensor's device; float32 on Apple's MPS, which has no float64."""
    return torch.float32 if tensor.device.type == "mps" else torch.float64


def check_embeddings(embeddings: Tensor) -> None:
    """Raise an error that says what is wrong with ``(n, d)`` embeddings given to a loss (its
    ``forward`` and its classifier's ``predict``): a floating-point torch tensor, 2-D, with at
    least one row and one dimension, finite.
    """
    if not isinstance(embeddings, Tensor):
        raise TypeError(
            f"embeddings must be a torch.Tensor, got {type(embeddings).__name__}; "
            "wrap arrays with torch.as_tensor(...)"
        )
    if embeddings.dim() != 2:
        raise ValueError(
            f"embeddings must be 2-D (n, d), got shape {tuple(embeddings.shape)}; "
            "flatten extra dimensions with embeddings.flatten(1) or add one with unsqueeze(0)"
        )
    if not embeddings.is_floating_point():
        raise ValueError(
            f"embeddings must be floating point, got {embeddings.dtype}; convert with .float()"
        )
    if embeddings.shape[0] == 0:
        raise ValueError("embeddings is empty (0 rows); pass a batch of at least one item")
    if embeddings.shape[1] == 0:
        raise ValueError(
            f"embeddings have 0 dimensions (shape {tuple(embeddings.shape)}): a point without "
            "coordinates has no distance, direction or class score; give the model's output "
            "layer at least one unit"
        )
    # max |x| is NaN or inf exactly when an entry is: one reduction and one read back.
    if host_readable(embeddings) and not math.isfinite(peak_magnitude(embeddings)):
        raise NonFiniteEmbeddings(int((~torch.isfinite(embeddings.detach())).any(dim=1).sum()))


class NonFiniteEmbeddings(ValueError):
    """Embeddings with ``rows`` NaN or infinite rows: the model's output is at fault, not the
    loss (a diverging model, or items that hold NaN); the trainer says which, with the step."""

    def __init__(self, rows: int) -> None:
        super().__init__(
            f"embeddings has {rows} rows with NaN or inf; check the model output "
            "(learning rate too high, or bad input data)"
        )
        self.rows = rows


def check_embeddings_and_labels(embeddings: Tensor, labels: Tensor) -> None:
    """Raise an error that says what is wrong with a ``(embeddings, labels)`` batch.

    Parameters
    ----------
    embeddings : Tensor
        ``(n, d)`` floating-point tensor (`check_embeddings`).
    labels : Tensor
        ``(n,)`` integer tensor.
    """
    check_embeddings(embeddings)
    check_label_tensor(labels)
    if labels.shape[0] != embeddings.shape[0]:
        raise ValueError(
            f"labels has {labels.shape[0]} entries but embeddings has {embeddings.shape[0]} rows; "
            "pass one label per embedding"
        )


def check_references(
    embeddings: Tensor, ref_embeddings: Tensor | None, ref_labels: Tensor | None
) -> None:
    """Raise a ``ValueError`` that says what is wrong with a reference set for ``embeddings``.

    ``ref_embeddings`` ``(m, d)`` and ``ref_labels`` ``(m,)`` come together, with the batch's
    ``d``; ``m = 0`` is allowed (an empty memory).
    """
    if (ref_embeddings is None) != (ref_labels is None):
        raise ValueError(
            "pass ref_embeddings and ref_labels together (one label per reference embedding), "
            "or neither"
        )
    if ref_embeddings is None:
        return
    if not isinstance(ref_embeddings, Tensor) or not isinstance(ref_labels, Tensor):
        raise TypeError("ref_embeddings and ref_labels must be torch.Tensors")
    if ref_embeddings.dim() != 2 or ref_embeddings.shape[1] != embeddings.shape[1]:
        raise ValueError(
            f"ref_embeddings must have shape (m, {embeddings.shape[1]}) like the batch's "
            f"embeddings, got {tuple(ref_embeddings.shape)}; references must come from the "
            "same embedding space"
        )
    if not ref_embeddings.is_floating_point():
        raise ValueError(f"ref_embeddings must be floating point, got {ref_embeddings.dtype}")
    if ref_labels.dim() != 1 or ref_labels.shape[0] != ref_embeddings.shape[0]:
        raise ValueError(
            f"ref_labels must have shape ({ref_embeddings.shape[0]},), one label per reference "
            f"embedding, got {tuple(ref_labels.shape)}"
        )
    if ref_labels.is_floating_point() or ref_labels.is_complex() or ref_labels.dtype == torch.bool:
        raise ValueError(f"ref_labels must be integer class ids, got {ref_labels.dtype}")
    if host_readable(ref_embeddings) and not bool(torch.isfinite(ref_embeddings.detach()).all()):
        raise ValueError(
            "ref_embeddings has NaN or inf rows; a memory filled from a diverging model holds "
            "them: lower the learning rate, or empty the memory"
        )


class EmbeddingLoss(nn.Module):
    """Base of every loss: ``forward(embeddings (n, d), labels (n,)) -> scalar``.

    Subclasses implement :meth:`compute`, which receives checked inputs in float32 or float64 with
    autocast switched off. A loss that sets :attr:`accepts_references` also receives a reference
    set ``(m, d)``, ``(m,)`` (``None`` when there is none or it is empty), in the same dtype.

    What the training loop (:class:`~clusterable.train.Trainer`) reads from a loss is declared
    here, each with a default that asks for nothing: :attr:`takes_inputs`, :attr:`needs_pairs`,
    :attr:`needs_more_items_than_dimensions` and :meth:`predict`. The range of each numeric
    constructor argument is declared once, in
    :attr:`argument_bounds`, and the constructor checks it with :meth:`check_arguments`.

    Examples
    --------
    A loss of one's own is a subclass with :meth:`compute`:

    >>> import torch
    >>> class MeanNorm(EmbeddingLoss):
    ...     def compute(self, embeddings, labels):
    ...         return embeddings.norm(dim=1).mean()
    >>> value = MeanNorm()(torch.ones(4, 2), torch.tensor([0, 0, 1, 1]))
    """

    #: The range of each numeric constructor argument (name -> ``Bounds``), as the loss's paper
    #: defines it: the constructor refuses a value outside it (and NaN or infinity) through
    #: :meth:`check_arguments`, and a run's spec refuses ``--loss-arg NAME=VALUE`` against the
    #: same declaration before any data is read. A subclass adds to its base's:
    #: ``{**Base.argument_bounds, "sigma": Bounds(0, low_open=True)}``.
    argument_bounds: ClassVar[Mapping[str, Bounds]] = {}

    #: Whether :meth:`forward` upcasts float16 and bfloat16 embeddings to float32 before
    #: :meth:`compute`. A loss that needs the caller's precision sets False and upcasts itself.
    upcasts_half_precision: ClassVar[bool] = True

    #: Whether the loss takes ``ref_embeddings`` and ``ref_labels`` (see the module docstring).
    accepts_references: ClassVar[bool] = False

    #: Why a loss that does not accept references has no use for them: the error says it.
    references_unsupported_because: ClassVar[str] = (
        "its terms are not pairs or triplets of items, so extra partners do not enter it"
    )

    #: Whether :meth:`forward` also takes ``inputs=``, the batch the embeddings were computed from
    #: (:class:`~clusterable.losses.AutoencoderLoss` reconstructs it). Under data parallelism
    #: such a loss receives this process's items only, since its inputs are, and gathers from the
    #: other processes what must be global itself; its parameters' gradients are then averaged
    #: over the processes, as the model's are.
    takes_inputs: ClassVar[bool] = False

    #: Whether the loss is 0 on a batch without both a positive pair (two items of a class) and
    #: a negative (an item of another class): the trainer then refuses, before the first step,
    #: batches that can never hold both (a batch of one, one class per batch).
    needs_pairs: ClassVar[bool] = False

    #: Whether the loss is constant, with a zero gradient, on a batch of no more items than
    #: embedding dimensions (``n <= d``): a run whose ``batch_size`` is at most its
    #: ``embedding_dim`` is then refused before the first step (:func:`~clusterable.recipe.
    #: build_trainer`), since no step would train.
    needs_more_items_than_dimensions: ClassVar[bool] = False

    @classmethod
    def check_arguments(cls, **values: Any) -> None:
        """Refuse a constructor argument outside its :attr:`argument_bounds` (names without one
        pass): a :class:`~clusterable._ranges.SettingError` (a ``ValueError``) naming the argument,
        its value and its range. None is refused too, unless the bound says what it means
        (``Bounds(none=...)``): ``margin=None`` would otherwise fail at the first call, as
        Python's ``TypeError`` about ``NoneType``.

        >>> from clusterable.losses import LiftedStructureLoss
        >>> try:
        ...     LiftedStructureLoss.check_arguments(margin=-1.0)
        ... except ValueError as error:
        ...     print(error)
        LiftedStructureLoss argument margin=-1.0 must be at least 0
        """
        check_bounds(values, cls.argument_bounds, f"{cls.__name__} argument", none_allowed=False)

    @classmethod
    def check_flags(cls, **flags: Any) -> None:
        """Refuse a switch that is not True or False (numpy's bools and 0 and 1 pass): a
        :class:`~clusterable._ranges.SettingError` naming it. ``bool("false")`` is True, so a
        string from a configuration file would otherwise switch the option on without a word.

        >>> from clusterable.losses import LiftedStructureLoss
        >>> try:
        ...     LiftedStructureLoss.check_flags(normalize="false")
        ... except ValueError as error:
        ...     print(error)
        LiftedStructureLoss argument normalize='false' must be True or False
        """
        for name, value in flags.items():
            if isinstance(value, (str, bytes)) or value is None or value not in (0, 1):
                raise SettingError(f"{cls.__name__} argument", name, value, "must be True or False")

    def predict(self, embeddings: Tensor) -> Tensor | None:
        """Class ids ``(n,)`` the loss's own classifier gives ``embeddings`` ``(n, d)``, or None
        when the loss has no classifier (the trainer then reports no classification accuracy).
        """
        return None

    def forward(
        self,
        embeddings: Tensor,
        labels: Tensor,
        ref_embeddings: Tensor | None = None,
        ref_labels: Tensor | None = None,
    ) -> Tensor:
        check_embeddings_and_labels(embeddings, labels)
        check_references(embeddings, ref_embeddings, ref_labels)
        if ref_embeddings is embeddings:
            assert ref_labels is not None  # check_references: given together
            if not torch.equal(ref_labels.to(labels.device), labels):
                raise ValueError(
                    "ref_embeddings is the batch itself but ref_labels differ from labels; pass "
                    "the batch's labels, or a separate tensor of reference embeddings"
                )
            ref_embeddings = ref_labels = None
        if ref_embeddings is not None and not self.accepts_references:
            raise ValueError(
                f"{type(self).__name__} takes no reference embeddings (no cross-batch memory): "
                f"{self.references_unsupported_because}"
            )
        if self.upcasts_half_precision and embeddings.dtype in LOW_PRECISION:
            embeddings = embeddings.float()
        labels = labels.to(device=embeddings.device, dtype=torch.long)
        references: tuple[Tensor, ...] = ()
        if ref_embeddings is not None and ref_labels is not None and ref_embeddings.shape[0] > 0:
            ref_embeddings = ref_embeddings.to(device=embeddings.device, dtype=embeddings.dtype)
            ref_labels = ref_labels.to(device=embeddings.device, dtype=torch.long)
            references = (ref_embeddings, ref_labels)
        with torch.autocast(device_type=embeddings.device.type, enabled=False):
            value = self.compute(embeddings, labels, *references)
        if host_readable(value) and not math.isfinite(float(value.detach())):
            peak = float(embeddings.detach().abs().max())
            raise ValueError(
                f"{type(self).__name__} is {float(value.detach())} on {embeddings.dtype} "
                f"embeddings of magnitude up to {peak:.1e}: the loss leaves the {embeddings.dtype} "
                "range. Scale the embeddings down or l2-normalise them (normalize=True where the "
                "loss offers it), or compute the loss in float64"
            )
        return value

    def compute(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        """The loss on checked inputs: ``embeddings`` (n, d) float, ``labels`` (n,) long.

        A loss with :attr:`accepts_references` takes ``ref_embeddings=None, ref_labels=None`` too.
        """
        raise NotImplementedError
