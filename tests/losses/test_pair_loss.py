"""The pair-loss base: what :class:`PairLoss` hands its subclasses; every pair loss uses it.

A tiny subclass records the :class:`Pairs` it receives; they are checked against brute-force
loops (distances and masks, with and without references, squared, normalised, centred), against
the float32-exact helpers of ``_pairs`` bit for bit, and through the call convention of
:class:`EmbeddingLoss` (checks, the batch itself or an empty memory as references, upcasting).
"""

from __future__ import annotations

import pytest
import torch

from clusterable.losses import CrossBatchMemory, PairLoss, Pairs, available_losses, loss_class
from clusterable.losses._pairs import partner_distances

#: The six losses of issue 31 that share the pair preamble.
PAIR_LOSSES = {"lifted", "contrastive", "triplet", "msdnn", "expected-triplet", "snn"}


class Recorder(PairLoss):
    """Records the pairs it is given; its loss is the sum of the positive distances."""

    def __init__(self, squared: bool = False, normalize: bool = False) -> None:
        super().__init__(squared=squared, normalize=normalize)
        self.seen: list[Pairs] = []

    def loss_on_pairs(self, pairs: Pairs) -> torch.Tensor:
        self.seen.append(pairs)
        return pairs.distances[pairs.positive].sum()


class CentringRecorder(Recorder):
    centres_points = True


def points(n: int, seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def loop_distances(x: torch.Tensor, partners: torch.Tensor, squared: bool) -> torch.Tensor:
    squares = torch.tensor(
        [[float(((a - b) ** 2).sum()) for b in partners] for a in x], dtype=torch.float64
    )
    return squares if squared else squares.sqrt()


def loop_masks(labels: list[int], partner_labels: list[int]) -> tuple[list, list]:
    positive = [
        [a == b and i != j for j, b in enumerate(partner_labels)] for i, a in enumerate(labels)
    ]
    negative = [[a != b for b in partner_labels] for a in labels]
    return positive, negative


def recorded(loss: Recorder, *arguments: torch.Tensor) -> Pairs:
    loss(*arguments)
    (pairs,) = loss.seen
    return pairs


@pytest.mark.parametrize("squared", [False, True])
def test_the_batch_alone_gets_its_distances_and_masks(squared):
    x, labels = points(6, 0), torch.tensor([0, 1, 0, 2, 1, 0])
    pairs = recorded(Recorder(squared=squared), x, labels)
    torch.testing.assert_close(pairs.distances, loop_distances(x, x, squared))
    assert (pairs.distances.diagonal() == 0).all()
    positive, negative = loop_masks(labels.tolist(), labels.tolist())
    assert pairs.positive.tolist() == positive
    assert pairs.negative.tolist() == negative
    assert pairs.references is None and pairs.ref_labels is None and pairs.num_references == 0
    assert torch.equal(pairs.labels, labels)


@pytest.mark.parametrize("squared", [False, True])
def test_references_are_partners_after_the_batch_never_anchors(squared):
    x, labels = points(4, 1), torch.tensor([0, 1, 0, 2])
    references, reference_labels = points(5, 2), torch.tensor([2, 0, 1, 1, 3])
    pairs = recorded(Recorder(squared=squared), x, labels, references, reference_labels)
    assert pairs.distances.shape == (4, 9)
    partners = torch.cat([x, references])
    torch.testing.assert_close(pairs.distances, loop_distances(x, partners, squared))
    positive, negative = loop_masks(labels.tolist(), [*labels.tolist(), *reference_labels.tolist()])
    assert pairs.positive.tolist() == positive
    assert pairs.negative.tolist() == negative
    assert pairs.num_references == 5
    assert torch.equal(pairs.references, references)
    assert torch.equal(pairs.ref_labels, reference_labels)


def test_normalize_measures_distances_between_unit_rows():
    x, labels = points(4, 3) * 7.0, torch.tensor([0, 0, 1, 1])
    references, reference_labels = points(3, 4) * 0.1, torch.tensor([1, 0, 2])
    pairs = recorded(Recorder(normalize=True), x, labels, references, reference_labels)
    unit = torch.nn.functional.normalize(x, dim=1)
    unit_references = torch.nn.functional.normalize(references, dim=1)
    torch.testing.assert_close(pairs.embeddings, unit)
    torch.testing.assert_close(pairs.references, unit_references)
    expected = loop_distances(unit, torch.cat([unit, unit_references]), squared=False)
    torch.testing.assert_close(pairs.distances, expected)


def test_a_centring_loss_gets_points_centred_on_the_partners_and_the_same_distances():
    x, labels = points(4, 5) + 100.0, torch.tensor([0, 0, 1, 1])
    references, reference_labels = points(3, 6) + 100.0, torch.tensor([1, 0, 2])
    pairs = recorded(CentringRecorder(), x, labels, references, reference_labels)
    origin = torch.cat([x, references]).mean(0)
    torch.testing.assert_close(pairs.embeddings, x - origin)
    torch.testing.assert_close(pairs.references, references - origin)
    expected = loop_distances(x, torch.cat([x, references]), squared=False)
    torch.testing.assert_close(pairs.distances, expected)


def test_an_uncentred_loss_gets_the_points_as_given():
    x, labels = points(4, 5) + 100.0, torch.tensor([0, 0, 1, 1])
    pairs = recorded(Recorder(), x, labels)
    assert torch.equal(pairs.embeddings, x)


@pytest.mark.parametrize(("squared", "normalize"), [(False, False), (True, False), (True, True)])
def test_float32_distances_are_the_exact_helpers_bit_for_bit(squared, normalize):
    """Far from the origin with a near-duplicate pair, where a Gram-form matrix loses every digit
    of the small distances: the base must measure through ``_pairs``."""
    x = points(8, 7, torch.float32) + 1e3
    x[1] = x[0] + 1e-3
    references = points(5, 8, torch.float32) + 1e3
    labels, reference_labels = torch.arange(8) % 3, torch.arange(5) % 3
    pairs = recorded(Recorder(squared, normalize), x, labels, references, reference_labels)
    expected = partner_distances(x, references, squared=squared, normalize=normalize)
    assert pairs.distances.dtype == torch.float32
    assert torch.equal(pairs.distances, expected)
    if not normalize:
        exact = loop_distances(x.double(), torch.cat([x, references]).double(), squared)
        torch.testing.assert_close(pairs.distances.double(), exact, rtol=1e-5, atol=0.0)


def test_the_batch_itself_or_an_empty_memory_as_references_gives_no_references():
    x, labels = points(5, 9), torch.tensor([0, 1, 0, 1, 2])
    alone = recorded(Recorder(), x, labels)
    itself = recorded(Recorder(), x, labels, x, labels)
    empty = recorded(Recorder(), x, labels, x[:0], labels[:0])
    for pairs in (itself, empty):
        assert pairs.references is None and pairs.ref_labels is None
        assert torch.equal(pairs.distances, alone.distances)
        assert torch.equal(pairs.positive, alone.positive)


def test_the_base_upcasts_half_precision_and_takes_references_in_the_batch_dtype():
    x, labels = points(4, 10, torch.float16), torch.tensor([0, 0, 1, 1])
    references, reference_labels = points(2, 11, torch.float64), torch.tensor([1, 0])
    pairs = recorded(Recorder(), x, labels, references, reference_labels)
    assert pairs.distances.dtype == pairs.embeddings.dtype == pairs.references.dtype
    assert pairs.distances.dtype == torch.float32


def test_the_base_checks_its_inputs_like_every_loss():
    x = points(4, 12)
    with pytest.raises(ValueError, match="one label per embedding"):
        Recorder()(x, torch.tensor([0, 1, 0]))
    with pytest.raises(ValueError, match="same embedding space"):
        Recorder()(x, torch.tensor([0, 1, 0, 1]), points(3, 13)[:, :2], torch.tensor([0, 1, 0]))


def test_gradient_reaches_the_batch_through_the_pairs():
    x = points(4, 14).requires_grad_(True)
    Recorder()(x, torch.tensor([0, 0, 1, 1])).backward()
    # d/dx_0 of 2 ||x_0 - x_1|| (the positive pair counted from both ends).
    expected = 2 * (x[0] - x[1]) / (x[0] - x[1]).norm()
    torch.testing.assert_close(x.grad[0], expected.detach())


def test_a_pair_loss_is_served_by_the_cross_batch_memory():
    memory = CrossBatchMemory(Recorder(), memory_size=8, embedding_dim=3)
    memory(points(4, 15), torch.tensor([0, 0, 1, 1]))
    memory(points(4, 16), torch.tensor([0, 1, 0, 1]))
    first, second = memory.loss.seen
    assert first.num_references == 0
    assert second.num_references == 4 and second.distances.shape == (4, 8)


def test_a_subclass_without_loss_on_pairs_says_what_to_define():
    class Unfinished(PairLoss):
        pass

    with pytest.raises(NotImplementedError, match="loss_on_pairs"):
        Unfinished()(points(4, 17), torch.tensor([0, 0, 1, 1]))


def test_every_loss_that_takes_references_is_a_pair_loss_and_the_six_are():
    pair_losses = {name for name in available_losses() if issubclass(loss_class(name), PairLoss)}
    takes_references = {name for name in available_losses() if loss_class(name).accepts_references}
    assert pair_losses == takes_references == PAIR_LOSSES


@pytest.mark.parametrize("name", sorted(PAIR_LOSSES))
@pytest.mark.parametrize(
    "labels", [[0, 1, 2, 3, 4, 5], [1, 1, 1, 1, 1, 1]], ids=["no-positive", "no-negative"]
)
@pytest.mark.parametrize("with_references", [False, True])
def test_a_batch_without_positives_or_negatives_gives_a_finite_loss_that_back_propagates(
    name, labels, with_references
):
    loss = loss_class(name)()
    x = points(6, 18, torch.float32).requires_grad_(True)
    labels = torch.tensor(labels)
    references = (points(3, 19, torch.float32), labels[:3] + 6) if with_references else ()
    if with_references and labels[0] == labels[1]:
        references = (references[0], labels[:3])  # no negative among the references either
    value = loss(x, labels, *references)
    (gradient,) = torch.autograd.grad(value, x)
    assert torch.isfinite(value)
    assert torch.isfinite(gradient).all()
