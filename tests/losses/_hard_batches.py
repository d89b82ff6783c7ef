"""The hard float32 batches of issue 9, and how far a float32 gradient strays from float64.

Shared by ``test_float32.py`` and ``benchmarks/float32_gradient_error.py`` (which puts this folder
on ``sys.path``), so the figures in ``benchmarks/README.md`` are measured on the tested batches.

Relative error, the one definition used everywhere here: ``max |a32 - a64| / max |a64|`` over all
entries, where ``a64`` is computed in float64 from the *same* float32 values (upcast), so only the
arithmetic differs, never the input. For the value, ``|v32 - v64| / |v64|``.
"""

from __future__ import annotations

import copy

import torch

from clusterable.losses import build_loss

N, DIM, CLASSES = 40, 5, 8
#: Distance between the two near-duplicates in the unit-scale batch (the issue's 4e-4).
GAP = 4e-4
#: Shift of the far-from-origin batch (the issue's 1e3, unit spread).
OFFSET = 1e3


def unit_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A 40 x 5 standard-normal float32 batch, 8 classes of 5."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(N, DIM, generator=generator), torch.arange(N) % CLASSES


def near_duplicate_batch(same_class: bool, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`unit_batch` with item 1 moved to ``GAP`` from item 0, in its class or not."""
    x, labels = unit_batch(seed)
    generator = torch.Generator().manual_seed(seed + 1000)
    direction = torch.nn.functional.normalize(torch.randn(DIM, generator=generator), dim=0)
    x[1] = x[0] + GAP * direction
    labels[1] = labels[0] if same_class else labels[0] + 1
    return x, labels


def offset_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`unit_batch` shifted by ``OFFSET`` in every coordinate."""
    x, labels = unit_batch(seed)
    return x + OFFSET, labels


References = tuple[torch.Tensor, torch.Tensor]


def split_off_references(
    x: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, References]:
    """A hard batch as a batch of 20 and 20 references (a memory), item 1 among the references:
    the near-duplicate pair (items 0 and 1) then spans the batch and the memory."""
    in_batch = torch.tensor([0, *range(2, N // 2 + 1)])  # (20,)
    in_memory = torch.tensor([1, *range(N // 2 + 1, N)])  # (20,)
    return x[in_batch], labels[in_batch], (x[in_memory], labels[in_memory])


HARD_BATCHES = {
    "near-duplicate-same-class": lambda: near_duplicate_batch(same_class=True),
    "near-duplicate-cross-class": lambda: near_duplicate_batch(same_class=False),
    "offset-1e3": offset_batch,
}

#: Every registered loss, and every variant whose distances or gradients take another path.
LOSS_VARIANTS: dict[str, tuple[str, dict[str, object]]] = {
    "lifted": ("lifted", {}),
    "lifted normalize": ("lifted", {"normalize": True}),
    "contrastive": ("contrastive", {}),
    "contrastive normalize": ("contrastive", {"normalize": True}),
    **{
        f"triplet {mining}{' normalize' if normalize else ''}": (
            "triplet",
            {"mining": mining, "normalize": normalize, "margin": 0.2 if normalize else 1.0},
        )
        for mining in ("semi-hard", "batch-hard", "all")
        for normalize in (False, True)
    },
    "msdnn": ("msdnn", {}),
    "msdnn undetached": ("msdnn", {"detach_weights": False}),
    "msdnn squared undetached": ("msdnn", {"squared": True, "detach_weights": False}),
    "expected-triplet": ("expected-triplet", {}),
    "expected-triplet undetached": ("expected-triplet", {"detach_weights": False}),
    "snn": ("snn", {}),
    "gaussian-corel": ("gaussian-corel", {}),
    "center": ("center", {}),
    "cross-entropy": ("cross-entropy", {}),
    "cosine-corel": ("cosine-corel", {}),
    "spectral": ("spectral", {}),
    "opml": ("opml", {}),
}


def make_loss(variant: str) -> torch.nn.Module:
    """The float32 loss of a :data:`LOSS_VARIANTS` entry, seeded, sized for the hard batches."""
    name, kwargs = LOSS_VARIANTS[variant]
    torch.manual_seed(0)
    extra = {"metric_dim": DIM} if name == "opml" else {}
    return build_loss(name, num_classes=CLASSES, embedding_dim=DIM, **extra, **kwargs)


def value_and_gradient(
    loss: torch.nn.Module,
    x: torch.Tensor,
    labels: torch.Tensor,
    references: References | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Loss value and its gradient with respect to ``x``, on a fresh copy of the loss; the
    ``references`` (constants, as a memory's) are cast to ``x``'s dtype."""
    x = x.detach().clone().requires_grad_(True)
    extra = () if references is None else (references[0].to(x.dtype), references[1])
    value = copy.deepcopy(loss)(x, labels, *extra)
    (gradient,) = torch.autograd.grad(value, x)
    return value.detach(), gradient


def relative_error(approximate: torch.Tensor, exact: torch.Tensor) -> float:
    """``max |approximate - exact| / max |exact|`` in float64 (0 when both are all zero)."""
    exact = exact.double()
    difference = (approximate.double() - exact).abs().max()
    scale = exact.abs().max()
    if scale == 0:
        return 0.0 if difference == 0 else float("inf")
    return float(difference / scale)


def float32_errors(
    loss: torch.nn.Module,
    x: torch.Tensor,
    labels: torch.Tensor,
    references: References | None = None,
) -> tuple[float, float]:
    """Relative errors of the float32 value and gradient against float64 on the same values
    (with ``references``: the gradient with respect to the batch)."""
    if references is not None:
        references = (references[0].float(), references[1])
    value32, gradient32 = value_and_gradient(loss, x.float(), labels, references)
    value64, gradient64 = value_and_gradient(
        copy.deepcopy(loss).double(), x.float().double(), labels, references
    )
    return relative_error(value32, value64), relative_error(gradient32, gradient64)
