"""Contrastive loss (lifted-structure paper, Eq. 1) against independent references.

References: Eq. (1) transcribed loop by loop over pairs (with references: every batch item with
every other batch item and every reference); the per-pair terms of
pytorch-metric-learning's ``ContrastiveLoss``; gradcheck; sklearn 1-NN.

pytorch-metric-learning vs Eq. (1): its per-pair terms are ``relu(D - pos_margin)`` and
``relu(neg_margin - D)`` for the distance it is given, reduced by averaging the non-zero positive
and negative terms separately (``AvgNonZeroReducer``), over ordered pairs. With ``pos_margin=0``,
squared distances for the positive terms and plain ones for the negative terms, the per-pair terms
coincide with Eq. (1) (the negative one after squaring); the comparison reads them unreduced
(``DoNothingReducer``) and applies our mean over all pairs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import reducers as pml_reducers
from pytorch_metric_learning.utils import loss_and_miner_utils as pml_utils

from clusterable.data import two_class_subclusters
from clusterable.losses import ContrastiveLoss, build_loss

from _learning import PlainDescent, descend, loo_1nn_accuracy

SEEDS = [0, 1, 2, 3]


def reference_loss(
    points: np.ndarray, labels: np.ndarray, margin: float, anchors: int | None = None
) -> float:
    """Eq. (1) summand y D^2 + (1 - y) [a - D]_+^2, averaged over every pair i < j.

    With ``anchors`` (the first points are the batch, the rest references), over every ordered
    pair (anchor i, partner j != i); within the batch that counts each pair i < j twice, in the
    sum and in the count.
    """
    n = len(points)
    total, num_pairs = 0.0, 0
    for i in range(n if anchors is None else anchors):
        for j in range(i + 1 if anchors is None else 0, n):
            if j == i:
                continue
            distance = math.sqrt(
                sum((points[i][t] - points[j][t]) ** 2 for t in range(points.shape[1]))
            )
            if labels[i] == labels[j]:
                total += distance**2
            else:
                total += max(0.0, margin - distance) ** 2
            num_pairs += 1
    return total / num_pairs if num_pairs else 0.0


def random_batch(seed: int, n: int = 13, d: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 embeddings at distances around the margin; repeated labels and two singletons."""
    generator = torch.Generator().manual_seed(seed)
    embeddings = 0.5 * torch.randn(n, d, generator=generator, dtype=torch.float64)
    repeated = torch.randint(0, 3, (n - 2,), generator=generator)
    return embeddings, torch.cat([repeated, torch.tensor([5, 6])])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("margin", [1.0, 0.5, 2.0])
def test_matches_paper_formula(seed, margin):
    embeddings, labels = random_batch(seed)
    value = ContrastiveLoss(margin=margin)(embeddings, labels)
    expected = reference_loss(embeddings.numpy(), labels.numpy(), margin)
    assert value.item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_normalize_matches_paper_formula_on_unit_vectors(seed):
    embeddings, labels = random_batch(seed)
    unit = torch.nn.functional.normalize(embeddings, dim=1)
    value = ContrastiveLoss(margin=1.0, normalize=True)(embeddings, labels)
    assert value.item() == pytest.approx(
        reference_loss(unit.numpy(), labels.numpy(), 1.0), rel=1e-9
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("normalize", [False, True])
def test_references_match_paper_formula(seed, normalize):
    embeddings, labels = random_batch(seed)
    references, reference_labels = random_batch(seed + 10, n=8)
    value = ContrastiveLoss(margin=1.0, normalize=normalize)(
        embeddings, labels, references, reference_labels
    )
    points = torch.cat([embeddings, references])
    if normalize:
        points = torch.nn.functional.normalize(points, dim=1)
    partner_labels = torch.cat([labels, reference_labels])
    expected = reference_loss(points.numpy(), partner_labels.numpy(), 1.0, anchors=13)
    assert value.item() == pytest.approx(expected, rel=1e-9)


def pml_pair_terms(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    margin: float,
    power: int,
    references: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Unreduced per-pair (positive, negative) terms of pytorch-metric-learning's loss; with
    ``references``, against ``ref_emb`` = the batch then the references, self pairs removed."""
    loss = pml_losses.ContrastiveLoss(
        pos_margin=0,
        neg_margin=margin,
        distance=pml_distances.LpDistance(normalize_embeddings=False, power=power),
        reducer=pml_reducers.DoNothingReducer(),
    )
    if references is None:
        terms = loss(embeddings, labels)
    else:
        partners = torch.cat([embeddings, references[0]])
        partner_labels = torch.cat([labels, references[1]])
        pairs = pml_utils.get_all_pairs_indices(labels, partner_labels)
        pairs = pml_utils.remove_self_comparisons(pairs, torch.arange(len(labels)), len(partners))
        terms = loss(embeddings, labels, pairs, partners, partner_labels)
    return terms["pos_loss"]["losses"], terms["neg_loss"]["losses"]


@pytest.mark.parametrize("seed", SEEDS)
def test_matches_pytorch_metric_learning_pair_terms(seed):
    embeddings, labels = random_batch(seed, n=20, d=5)
    margin = 1.0
    squared_positive, _ = pml_pair_terms(embeddings, labels, margin, power=2)  # D^2
    _, negative_hinge = pml_pair_terms(embeddings, labels, margin, power=1)  # [a - D]_+
    n = len(labels)
    # Ordered pairs: every unordered pair twice, hence the n (n - 1) denominator.
    expected = (squared_positive.sum() + negative_hinge.square().sum()) / (n * (n - 1))
    ours = ContrastiveLoss(margin=margin)(embeddings, labels)
    assert ours.item() == pytest.approx(expected.item(), rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_references_match_pytorch_metric_learning_ref_emb_pair_terms(seed):
    embeddings, labels = random_batch(seed, n=20, d=5)
    references = random_batch(seed + 10, n=15, d=5)
    margin = 1.0
    squared_positive, _ = pml_pair_terms(embeddings, labels, margin, 2, references)
    _, negative_hinge = pml_pair_terms(embeddings, labels, margin, 1, references)
    n, m = len(labels), len(references[1])
    expected = (squared_positive.sum() + negative_hinge.square().sum()) / (n * (n + m - 1))
    ours = ContrastiveLoss(margin=margin)(embeddings, labels, *references)
    assert ours.item() == pytest.approx(expected.item(), rel=1e-9)


def test_gradcheck_away_from_the_hinge():
    embeddings, labels = random_batch(4, n=9, d=3)
    distances = torch.cdist(embeddings, embeddings)
    assert ((distances - 1.0).abs() > 1e-3).all()
    embeddings.requires_grad_(True)
    loss = ContrastiveLoss(margin=1.0)
    assert torch.autograd.gradcheck(lambda x: loss(x, labels), (embeddings,))


@pytest.mark.parametrize("labels", [[4] * 6, [0, 1, 2, 3, 4, 5]], ids=["one-class", "distinct"])
def test_one_sided_batches_keep_their_own_terms(labels):
    """Pairs exist, so Eq. (1) applies: only the attractive or only the repulsive term."""
    embeddings, _ = random_batch(0, n=6, d=3)
    value = ContrastiveLoss()(embeddings, torch.tensor(labels))
    expected = reference_loss(embeddings.numpy(), np.array(labels), 1.0)
    assert value.item() == pytest.approx(expected, rel=1e-9)


def test_distinct_labels_far_apart_give_zero_that_backpropagates():
    points = torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]], requires_grad=True)
    value = ContrastiveLoss(margin=1.0)(points, torch.tensor([0, 1, 2]))
    assert value.item() == 0.0
    value.backward()
    assert torch.equal(points.grad, torch.zeros_like(points))


def test_single_item_gives_zero_that_backpropagates():
    point = torch.randn(1, 3, requires_grad=True)
    value = ContrastiveLoss()(point, torch.tensor([0]))
    assert value.item() == 0.0
    value.backward()
    assert torch.equal(point.grad, torch.zeros_like(point))


def test_identical_points_give_no_nan():
    points = torch.ones(6, 3, dtype=torch.float64, requires_grad=True)
    value = ContrastiveLoss(margin=1.0)(points, torch.tensor([0, 0, 1, 1, 2, 2]))
    value.backward()
    assert value.item() == pytest.approx(12 / 15, rel=1e-5)  # 12 negative pairs at D = 0
    assert torch.isfinite(points.grad).all()


def test_registered():
    loss = build_loss("contrastive", margin=0.5)
    assert isinstance(loss, ContrastiveLoss) and loss.margin == 0.5


def test_gradient_descent_on_free_points_separates_classes():
    data = two_class_subclusters(n=120, std=6.0, seed=0)
    points = torch.tensor(data.x / data.x.std(), requires_grad=True)  # (120, 2)
    labels = torch.as_tensor(data.labels)
    assert loo_1nn_accuracy(data.x, data.labels) < 0.9
    loss = ContrastiveLoss()
    first = loss(points, labels).item()
    descend(loss, points, labels, 60, PlainDescent([points], lr=20.0))
    assert loss(points, labels).item() < 0.1 * first
    assert loo_1nn_accuracy(points.detach().numpy(), data.labels) >= 0.95
