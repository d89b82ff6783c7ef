"""Smooth lifted structured loss (Oh Song et al., CVPR 2016, Eq. 4) against independent references.

References: Eq. (4) transcribed loop by loop over positive pairs (with references: anchors from the
batch, partners from batch and references, a reference's own negatives not summed);
pytorch-metric-learning's ``LiftedStructureLoss`` (same definition once embeddings are
normalised, see below); gradcheck; sklearn 1-NN.

pytorch-metric-learning vs Eq. (4): it l2-normalises embeddings (``LpDistance`` default), sums
``relu(J_ij)^2 / 2`` over *ordered* positive pairs and averages over them (``MeanReducer``), which
equals ``1 / (2|P|) sum_{unordered} relu(J_ij)^2``; its ``pos_margin`` shifts ``D_ij`` (0 here) and
``neg_margin`` is ``a``; its distances have no epsilon under the square root. So it agrees with
``LiftedStructureLoss(margin=a, normalize=True)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning.utils import loss_and_miner_utils as pml_utils

from clusterable.data import two_class_subclusters
from clusterable.losses import LiftedStructureLoss, build_loss

from _learning import PlainDescent, descend, loo_1nn_accuracy

SEEDS = [0, 1, 2, 3]


def reference_loss(
    points: np.ndarray, labels: np.ndarray, margin: float, anchors: int | None = None
) -> float:
    """Eq. (4): 1/(2|P|) sum over positive pairs of max(0, J_ij)^2.

    The first ``anchors`` points (all by default) are the batch, the rest references. Pairs are
    ordered (anchor i, partner j): within the batch each unordered pair appears twice, in the sum
    and in |P|, so this is the paper's unordered sum. A reference partner j is no anchor: its
    own negatives are not summed.
    """
    n = len(points)
    anchors = n if anchors is None else anchors

    def distance(i: int, j: int) -> float:
        return math.sqrt(sum((points[i][t] - points[j][t]) ** 2 for t in range(points.shape[1])))

    total, num_pairs = 0.0, 0
    for i in range(anchors):
        for j in range(n):
            if j == i or labels[i] != labels[j]:
                continue
            num_pairs += 1
            inner = 0.0
            for k in range(n):
                if labels[k] != labels[i]:
                    inner += math.exp(margin - distance(i, k))
            if j < anchors:
                for el in range(n):
                    if labels[el] != labels[j]:
                        inner += math.exp(margin - distance(j, el))
            if inner == 0.0:  # no negative: log 0 = -inf, the hinge is 0
                continue
            lifted = math.log(inner) + distance(i, j)
            total += max(0.0, lifted) ** 2
    return total / (2 * num_pairs) if num_pairs else 0.0


def random_batch(seed: int, n: int = 13, d: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 embeddings at distances around the margin; repeated labels and two singletons."""
    generator = torch.Generator().manual_seed(seed)
    embeddings = 0.6 * torch.randn(n, d, generator=generator, dtype=torch.float64)
    repeated = torch.randint(0, 3, (n - 2,), generator=generator)
    return embeddings, torch.cat([repeated, torch.tensor([5, 6])])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("margin", [1.0, 0.5, 3.0])
def test_matches_paper_formula(seed, margin):
    embeddings, labels = random_batch(seed)
    value = LiftedStructureLoss(margin=margin)(embeddings, labels)
    expected = reference_loss(embeddings.numpy(), labels.numpy(), margin)
    assert expected > 0
    assert value.item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_normalize_matches_paper_formula_on_unit_vectors(seed):
    embeddings, labels = random_batch(seed)
    unit = torch.nn.functional.normalize(embeddings, dim=1)
    value = LiftedStructureLoss(normalize=True)(embeddings, labels)
    assert value.item() == pytest.approx(
        reference_loss(unit.numpy(), labels.numpy(), 1.0), rel=1e-9
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("margin", [1.0, 0.3])
def test_matches_pytorch_metric_learning_when_normalised(seed, margin):
    embeddings, labels = random_batch(seed, n=24, d=6)
    ours = LiftedStructureLoss(margin=margin, normalize=True)(embeddings, labels)
    theirs = pml_losses.LiftedStructureLoss(neg_margin=margin, pos_margin=0)(embeddings, labels)
    assert float(ours) == pytest.approx(float(theirs), rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("normalize", [False, True])
def test_references_match_paper_formula(seed, normalize):
    embeddings, labels = random_batch(seed)
    references, reference_labels = random_batch(seed + 10, n=9)
    value = LiftedStructureLoss(normalize=normalize)(
        embeddings, labels, references, reference_labels
    )
    points = torch.cat([embeddings, references])
    if normalize:
        points = torch.nn.functional.normalize(points, dim=1)
    expected = reference_loss(
        points.numpy(), torch.cat([labels, reference_labels]).numpy(), 1.0, anchors=13
    )
    assert expected > 0
    assert value.item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("margin", [1.0, 0.3])
def test_references_match_pytorch_metric_learning_ref_emb(seed, margin):
    """PML's ``ref_emb`` with the batch first in it and the self pairs removed (what its own
    CrossBatchMemory passes): its negatives of a partner j are the pairs anchored at j, none
    for a reference, our convention."""
    embeddings, labels = random_batch(seed, n=24, d=6)
    references, reference_labels = random_batch(seed + 10, n=17, d=6)
    ours = LiftedStructureLoss(margin=margin, normalize=True)(
        embeddings, labels, references, reference_labels
    )
    partners = torch.cat([embeddings, references])
    partner_labels = torch.cat([labels, reference_labels])
    pairs = pml_utils.get_all_pairs_indices(labels, partner_labels)
    pairs = pml_utils.remove_self_comparisons(pairs, torch.arange(24), len(partners))
    theirs = pml_losses.LiftedStructureLoss(neg_margin=margin, pos_margin=0)(
        embeddings, labels, pairs, partners, partner_labels
    )
    assert float(ours) == pytest.approx(float(theirs), rel=1e-9)


def test_gradcheck():
    embeddings, labels = random_batch(7, n=9, d=3)
    embeddings.requires_grad_(True)
    loss = LiftedStructureLoss(margin=1.0)
    assert torch.autograd.gradcheck(lambda x: loss(x, labels), (embeddings,))
    loss = LiftedStructureLoss(margin=1.0, normalize=True)
    assert torch.autograd.gradcheck(lambda x: loss(x, labels), (embeddings,))


def test_far_apart_points_need_the_max_subtracted_logsumexp():
    """At scale 200, exp(a - D) underflows in float32: the loss must match float64, stay finite."""
    embeddings, labels = random_batch(1)
    embeddings = 200 * embeddings
    expected = reference_loss(embeddings.numpy(), labels.numpy(), 1.0)
    points = embeddings.float().requires_grad_(True)
    value = LiftedStructureLoss()(points, labels)
    value.backward()
    assert value.item() == pytest.approx(expected, rel=1e-4)
    assert torch.isfinite(points.grad).all() and points.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "labels", [[4] * 6, [0, 1, 2, 3, 4, 5], [0]], ids=["one-class", "distinct", "single-item"]
)
def test_no_positive_or_no_negative_gives_zero_that_backpropagates(labels):
    embeddings = torch.randn(len(labels), 3, dtype=torch.float64, requires_grad=True)
    value = LiftedStructureLoss()(embeddings, torch.tensor(labels))
    assert value.item() == 0.0
    value.backward()
    assert torch.equal(embeddings.grad, torch.zeros_like(embeddings))


def test_identical_points_give_no_nan():
    points = torch.ones(6, 3, dtype=torch.float64, requires_grad=True)
    value = LiftedStructureLoss()(points, torch.tensor([0, 0, 1, 1, 2, 2]))
    value.backward()
    # All D = 0: J = log(2 * 4 * e^a) for every positive pair.
    assert value.item() == pytest.approx((1.0 + math.log(8)) ** 2 / 2, rel=1e-9)
    assert torch.isfinite(points.grad).all()


def test_registered_with_paper_defaults():
    loss = build_loss("lifted")
    assert isinstance(loss, LiftedStructureLoss)
    assert loss.margin == 1.0 and loss.normalize is False


def test_gradient_descent_on_free_points_separates_classes():
    data = two_class_subclusters(n=120, std=6.0, seed=0)
    points = torch.tensor(data.x / data.x.std(), requires_grad=True)  # (120, 2)
    labels = torch.as_tensor(data.labels)
    assert loo_1nn_accuracy(data.x, data.labels) < 0.9
    loss = LiftedStructureLoss()
    first = loss(points, labels).item()
    descend(loss, points, labels, 60, PlainDescent([points], lr=2.0))
    assert loss(points, labels).item() < 0.1 * first
    assert loo_1nn_accuracy(points.detach().numpy(), data.labels) >= 0.95
