"""The loss call contract: ``loss(embeddings, labels, ref_embeddings=None, ref_labels=None)``.

For every registered loss: an empty reference set gives exactly the loss without one; a loss with
no pairs rejects references saying why; bad references get a clear error. For the losses that
average a per-anchor term, a batch split into anchors and references adds up to the loss of the
whole batch (the references stand for the rest of the batch, the anchor itself excluded).
"""

from __future__ import annotations

import pytest
import torch
from _hard_batches import DIM, LOSS_VARIANTS, make_loss

from clusterable.losses import EmbeddingLoss, available_losses, build_loss

WITH_REFERENCES = [v for v in LOSS_VARIANTS if make_loss(v).accepts_references]
WITHOUT_REFERENCES = [name for name in available_losses() if name not in {"opml"}]


def batch(seed: int, n: int = 12, classes: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 points, every class at least twice."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, DIM, generator=generator, dtype=torch.float64)
    return x, torch.arange(n) % classes


def value_and_gradient(loss, x, labels, *references):
    x = x.detach().clone().requires_grad_(True)
    value = loss(x, labels, *references)
    (gradient,) = torch.autograd.grad(value, x)
    return value.detach(), gradient


def test_the_public_base_is_every_loss_base():
    for name in available_losses():
        extra = {"metric_dim": DIM} if name == "opml" else {}
        loss = build_loss(name, num_classes=3, embedding_dim=DIM, **extra)
        assert isinstance(loss, EmbeddingLoss), name


def test_the_pair_losses_of_the_issue_take_references():
    names = {LOSS_VARIANTS[v][0] for v in WITH_REFERENCES}
    assert names == {"lifted", "contrastive", "triplet", "msdnn", "expected-triplet", "snn"}


@pytest.mark.parametrize("variant", WITH_REFERENCES)
def test_empty_references_give_exactly_the_loss_without_references(variant):
    loss = make_loss(variant).double()
    x, labels = batch(0)
    empty = (torch.zeros(0, DIM, dtype=torch.float64), torch.zeros(0, dtype=torch.long))
    value, gradient = value_and_gradient(loss, x, labels)
    value_empty, gradient_empty = value_and_gradient(loss, x, labels, *empty)
    assert torch.equal(value, value_empty)
    assert torch.equal(gradient, gradient_empty)


#: MsDNN's detached weights are constants by design: autograd is not their finite difference.
DIFFERENTIABLE = [v for v in WITH_REFERENCES if not getattr(make_loss(v), "detach_weights", False)]


@pytest.mark.parametrize("variant", LOSS_VARIANTS)
def test_the_batch_itself_as_references_gives_exactly_the_loss(variant):
    """References equal to the batch itself (the same tensor, pml's ``ref_emb=embeddings``): the
    batch's own pairs, an item never its own partner, so today's loss exactly."""
    loss = make_loss(variant).double()
    x, labels = batch(0)
    x = x.requires_grad_(True)
    value = loss(x, labels)
    (gradient,) = torch.autograd.grad(value, x)
    value_itself = make_loss(variant).double()(x, labels, x, labels)
    (gradient_itself,) = torch.autograd.grad(value_itself, x)
    assert torch.equal(value.detach(), value_itself.detach())
    assert torch.equal(gradient, gradient_itself)


def test_the_batch_itself_as_references_needs_its_own_labels():
    x, labels = batch(0)
    with pytest.raises(ValueError, match="batch itself"):
        make_loss("lifted")(x, labels, x, labels.flip(0))


@pytest.mark.parametrize("variant", DIFFERENTIABLE)
def test_references_change_the_loss_and_receive_gradient_when_they_ask_for_it(variant):
    loss = make_loss(variant).double()
    x, labels = batch(0)
    references, reference_labels = batch(1, n=9)
    references.requires_grad_(True)
    inputs = (x.clone().requires_grad_(True), references)
    assert torch.autograd.gradcheck(lambda a, r: loss(a, labels, r, reference_labels), inputs)
    assert loss(x, labels, references, reference_labels) != loss(x, labels)


#: Losses whose value is a mean of per-anchor terms over a known count: (variant, count of a
#: batch of n anchors with m references).
PER_ANCHOR = {
    "msdnn": lambda n, m: n,
    "msdnn undetached": lambda n, m: n,
    "expected-triplet": lambda n, m: n,
    "snn": lambda n, m: n,
    "contrastive": lambda n, m: n * (n + m - 1),
    "contrastive normalize": lambda n, m: n * (n + m - 1),
    "triplet batch-hard": lambda n, m: n,  # every anchor has a positive and a negative
    "triplet batch-hard normalize": lambda n, m: n,
}


@pytest.mark.parametrize("variant", PER_ANCHOR)
@pytest.mark.parametrize("split", [4, 7])
def test_a_batch_split_into_anchors_and_references_adds_up_to_the_whole(variant, split):
    """loss(A, refs=B) and loss(B, refs=A), weighted by their counts, give loss(A + B): each
    anchor sees the rest of the batch as references, itself excluded."""
    loss = make_loss(variant).double()
    x, labels = batch(2)
    first, second = (x[:split], labels[:split]), (x[split:], labels[split:])
    count = PER_ANCHOR[variant]
    n = len(labels)
    whole = loss(x, labels) * count(n, 0)
    parts = loss(*first, *second) * count(split, n - split) + loss(*second, *first) * count(
        n - split, split
    )
    assert float(parts) == pytest.approx(float(whole), rel=1e-12)


@pytest.mark.parametrize("name", WITHOUT_REFERENCES)
def test_losses_without_pairs_reject_references_saying_why(name):
    loss = build_loss(name, num_classes=3, embedding_dim=DIM)
    if loss.accepts_references:
        return
    x, labels = batch(0)
    with pytest.raises(ValueError, match="takes no reference embeddings") as error:
        loss(x.float(), labels, x.float(), labels)
    assert loss.references_unsupported_because in str(error.value)


def test_opml_rejects_references():
    loss = build_loss("opml", num_classes=3, embedding_dim=DIM, metric_dim=DIM)
    x, labels = batch(0)
    with pytest.raises(ValueError, match="OPML"):
        loss(x.float(), labels, x.float(), labels)


@pytest.mark.parametrize(
    ("references", "message"),
    [
        ((torch.zeros(3, DIM + 1), torch.zeros(3, dtype=torch.long)), "same embedding space"),
        ((torch.zeros(3, DIM), None), "together"),
        ((None, torch.zeros(3, dtype=torch.long)), "together"),
        ((torch.zeros(3, DIM), torch.zeros(2, dtype=torch.long)), "one label per reference"),
        ((torch.zeros(3, DIM), torch.zeros(3)), "integer class ids"),
        ((torch.full((3, DIM), float("nan")), torch.zeros(3, dtype=torch.long)), "NaN"),
    ],
)
def test_bad_references_are_rejected_with_a_clear_error(references, message):
    x, labels = batch(0)
    with pytest.raises(ValueError, match=message):
        make_loss("lifted")(x.float(), labels, *references)
