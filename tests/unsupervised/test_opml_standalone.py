"""Standalone OPML (RCGD on Euclidean x Grassmann) on fixed features with clear clusters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from clusterable.evaluate import evaluate_embeddings
from clusterable.losses import OPMLLoss
from clusterable.losses._pairs import squared_distances
from clusterable.mining import semi_hard_triplets
from clusterable.unsupervised import OPML, riemannian_steps, sample_semi_hard_triplets

METRIC_DIM = 5


@pytest.fixture(scope="module")
def blobs() -> tuple[np.ndarray, np.ndarray]:
    """5 Gaussian blobs in 5 informative dimensions, drowned in 60 noise dimensions, unit norm."""
    rng = np.random.default_rng(0)
    k, per = 5, 60
    centres = rng.normal(0.0, 1.0, (k, 5))
    labels = np.repeat(np.arange(k), per)
    signal = centres[labels] + 0.3 * rng.normal(size=(k * per, 5))
    x = np.concatenate([signal, rng.normal(size=(k * per, 60))], axis=1)
    return x / np.linalg.norm(x, axis=1, keepdims=True), labels


@pytest.fixture(scope="module")
def fitted(blobs) -> OPML:
    x, labels = blobs
    return OPML(metric_dim=METRIC_DIM, maxiter=30, seed=0).fit(x, labels)


def test_learned_metric_raises_recall_and_nmi_over_raw_features(blobs, fitted):
    x, labels = blobs
    raw = evaluate_embeddings(x, labels, ks=(1,), seed=0)
    learned = evaluate_embeddings(fitted.transform(x), labels, ks=(1,), seed=0)
    assert raw["recall@1"] < 0.6 and raw["nmi"] < 0.5  # the noise dimensions hide the blobs
    assert learned["recall@1"] > raw["recall@1"] + 0.2
    assert learned["nmi"] > raw["nmi"] + 0.1


def test_training_lowers_the_margin_term_not_only_the_loss(fitted):
    before, after = fitted.cost_history_
    assert after < before
    assert fitted.mean_margin_term_[1] < 0.8 * fitted.mean_margin_term_[0]
    assert fitted.mean_weight_[1] > 0.3  # the weights were not switched off


def test_L_stays_orthonormal_and_R_moves(blobs, fitted):
    x, _ = blobs
    assert fitted.L_.shape == (x.shape[1], METRIC_DIM)
    gram = fitted.L_.T @ fitted.L_
    assert np.linalg.norm(gram - np.eye(METRIC_DIM)) < 1e-6
    start = OPMLLoss(x.shape[1], metric_dim=METRIC_DIM, seed=0).R.detach().numpy()
    assert np.linalg.norm(fitted.R_ - start) > 1e-2


def test_turning_orthogonality_off_changes_the_result(blobs, fitted):
    x, labels = blobs
    free = OPML(metric_dim=METRIC_DIM, maxiter=30, orthogonal=False, seed=0).fit(x, labels)
    assert not np.allclose(free.L_, fitted.L_, atol=1e-3)
    # Off the Grassmann manifold nothing keeps L orthonormal.
    assert np.linalg.norm(free.L_.T @ free.L_ - np.eye(METRIC_DIM)) > 1e-3


def test_fit_is_seeded(blobs, fitted):
    x, labels = blobs
    again = OPML(metric_dim=METRIC_DIM, maxiter=30, seed=0).fit(x, labels)
    np.testing.assert_allclose(again.L_, fitted.L_)


def test_noise_items_are_ignored(blobs):
    x, labels = blobs
    noisy_labels = labels.copy()
    noisy_labels[::7] = -1
    with_noise = OPML(metric_dim=METRIC_DIM, maxiter=3, seed=0).fit(x, noisy_labels)
    clean = noisy_labels >= 0
    without = OPML(metric_dim=METRIC_DIM, maxiter=3, seed=0).fit(x[clean], labels[clean])
    np.testing.assert_allclose(with_noise.L_, without.L_)


def test_sampled_triplets_are_semi_hard_and_exclude_noise():
    generator = torch.Generator().manual_seed(0)
    points = torch.randn(60, 3, generator=generator, dtype=torch.float64)
    labels = torch.arange(60) % 4
    labels[::5] = -1
    anchor, positive, negative = sample_semi_hard_triplets(points, labels, 0.5, 10_000, seed=0)
    assert anchor.numel() > 0
    noise = set(torch.nonzero(labels < 0).ravel().tolist())
    used = set(torch.cat([anchor, positive, negative]).tolist())
    assert not used & noise
    distances = squared_distances(points)
    d_ap, d_an = distances[anchor, positive], distances[anchor, negative]
    assert ((d_ap < d_an) & (d_an < d_ap + 0.5)).all()
    assert (labels[anchor] == labels[positive]).all() and (labels[anchor] != labels[negative]).all()
    assert (anchor != positive).all()
    capped = sample_semi_hard_triplets(points, labels, 0.5, 10, seed=0)
    assert capped[0].numel() <= 10


def test_riemannian_steps_optimise_the_opml_loss_value():
    """The RCGD objective is the loss's own Eq. 5 on fixed triplets."""
    generator = torch.Generator().manual_seed(1)
    x = torch.nn.functional.normalize(torch.randn(40, 12, generator=generator), dim=1)
    labels = torch.arange(40) % 4
    loss = OPMLLoss(12, metric_dim=4, seed=0)
    triplets = semi_hard_triplets(squared_distances(x @ loss.metric()), labels, loss.margin)
    before = loss(x, labels).item()
    cost_before, cost_after = riemannian_steps(loss, x, triplets, maxiter=10)
    assert cost_before == pytest.approx(before, rel=1e-5)  # same triplets, same formula
    assert cost_after < cost_before


def test_unfitted_and_bad_inputs_are_explained(blobs):
    x, labels = blobs
    with pytest.raises(ValueError, match="not fitted"):
        OPML().transform(x)
    with pytest.raises(ValueError, match="no semi-hard triplet"):
        OPML(metric_dim=METRIC_DIM).fit(x, np.full(len(x), -1))
    with pytest.raises(ValueError, match=r"^pseudo_labels has 299 entries but there are 300 "):
        OPML(metric_dim=METRIC_DIM).fit(x, labels[:-1])


@pytest.mark.parametrize(
    ("features", "message"),
    [
        (np.full((6, 4), np.nan), r"^features has 6 row\(s\) with NaN or infinite values"),
        (np.zeros(6), r"^features must be a 2-D array"),
    ],
)
def test_features_it_cannot_fit_are_named(features, message):
    """NaN features were "no semi-hard triplet could be formed"."""
    with pytest.raises(ValueError, match=message):
        OPML(metric_dim=2).fit(features, np.repeat([0, 1], 3))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"maxiter": None}, r"^OPML argument maxiter=None is not a number"),
        ({"max_triplets": 2.5}, r"^OPML argument max_triplets=2\.5 is not an integer"),
    ],
)
def test_counts_it_cannot_run_are_named(blobs, settings, message):
    """maxiter=None was Python's "'<' not supported between 'NoneType' and 'int'"."""
    x, labels = blobs
    with pytest.raises(ValueError, match=message):
        OPML(metric_dim=METRIC_DIM, **settings).fit(x, labels)


def test_named_clusters_fit_as_their_numbers(blobs, fitted):
    """String pseudo-labels were torch's "can't convert np.ndarray of type numpy.str_"."""
    x, labels = blobs
    named = OPML(metric_dim=METRIC_DIM, maxiter=30, seed=0).fit(
        x, np.char.add("c", labels.astype(str))
    )
    np.testing.assert_allclose(named.L_, fitted.L_)


def test_transform_names_features_of_another_width(fitted):
    """They were numpy's "matmul: Input operand 1 has a mismatch in its core dimension"; NaN
    features came back as NaN embeddings."""
    with pytest.raises(ValueError, match=r"^x has dimension 3 but this OPML was fitted on 65-"):
        fitted.transform(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"^x has 1 row\(s\) with NaN"):
        fitted.transform(np.full((1, 65), np.nan))
