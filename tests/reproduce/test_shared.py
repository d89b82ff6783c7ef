"""The reproductions' shared skeleton: recipes built by clusterable.recipe, selection, scores."""

from __future__ import annotations

import numpy as np
import pytest

from clusterable.data import load_dataset
from clusterable.recipe import RunSpec, build
from clusterable.reproduce import _shared
from clusterable.reproduce._shared import (
    Method,
    Scale,
    Search,
    grid,
    powers_of_two,
    select_on_validation,
    subclass_scores,
    train_and_embed,
)
from clusterable.train import TrainConfig, embed_dataset
from clusterable.tune import parse_parameter

SPEC = RunSpec(data="digits", model="mlp", loss="contrastive", embedding_dim=8)


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", split="train")


def test_the_best_candidate_wins_and_ties_go_to_the_first():
    scores = {"a": 0.2, "b": 0.7, "c": 0.7, "d": 0.1}
    best, values = select_on_validation(list(scores), scores.__getitem__)
    assert best == "b"
    assert values == [0.2, 0.7, 0.7, 0.1]


def test_values_go_where_their_prefix_says():
    method = Method("m", SPEC).with_values(
        {"loss.margin": 0.3, "train.lr": 0.01, "model.hidden_dims": (16,), "run.normalize": True}
    )
    assert method.spec.loss_args == {"margin": 0.3}
    assert method.spec.model_args == {"hidden_dims": (16,)}
    assert method.spec.normalize is True
    assert method.train_args == {"lr": 0.01}
    assert method.value("loss.margin") == 0.3 and method.value("train.lr") == 0.01
    assert method.config(TrainConfig(lr=1.0)).lr == 0.01
    with pytest.raises(ValueError, match="prefix"):
        method.with_values({"optimizer.lr": 1.0})


def test_training_builds_through_the_recipe_and_applies_the_method_settings(digits):
    # lr = 1e-30 (0 is refused) leaves the network as recipe.build makes it for the seed: the
    # method's train_args reached the trainer, and the model is the recipe's (same seed, same
    # initial weights).
    frozen = Method("frozen", SPEC, {"lr": 1e-30})
    config = TrainConfig(epochs=1, batch_size=60, items_per_class=6, progress=False, seed=3)
    (embedded,) = train_and_embed(frozen, digits, [digits], config)
    model = build(SPEC, digits.input_shape, digits.num_classes, seed=3).model
    np.testing.assert_allclose(embedded, embed_dataset(model, digits)[0], rtol=1e-4, atol=1e-5)
    (trained,) = train_and_embed(Method("trained", SPEC), digits, [digits], config)
    assert not np.allclose(trained, embedded)


def test_a_held_out_grid_needs_choices():
    assert grid(parse_parameter("sigma=choice:0.5,2")) == [{"loss.sigma": 0.5}, {"loss.sigma": 2}]
    with pytest.raises(ValueError, match="choice"):
        grid(parse_parameter("sigma=log:0.1:10"))


def test_powers_of_two_span_the_range():
    parameter = parse_parameter(powers_of_two("sigma", -10, 10))
    assert parameter.choices == tuple(2.0**p for p in range(-10, 11))


def test_subclass_scores_find_separated_subclasses():
    rng = np.random.default_rng(0)
    subclasses = np.repeat(np.arange(4), 25)
    points = 10.0 * np.eye(4)[subclasses] + rng.normal(scale=0.1, size=(100, 4))
    assert subclass_scores(points, subclasses, 4, seed=0) == {"nmi": 1.0, "accuracy": 1.0}
    mixed = rng.normal(size=(100, 4))
    assert subclass_scores(mixed, subclasses, 4, seed=0)["nmi"] < 0.2


def test_the_budget_line_names_epochs_size_seeds_and_search():
    held_out = Scale(10, 5, 3, search=Search(2, 100, 50))
    line = held_out.budget_line("quick", 1234, [0, 1], 2)
    assert "quick budget: 3 epoch(s) on 1,234 training items, seeds [0, 1]" in line
    assert "one held-out split" in line
    searched = Scale(10, 5, 3, search=Search(2, 100, folds=5, trials=21))
    assert "21 trials, 5-fold stratified" in searched.budget_line("default", 10, [0], 2)
    assert "none" in Scale(10, 5, 3).budget_line("quick", 10, [0], 2)


def test_claims_are_judged_with_the_librarys_k_means_not_the_fast_evaluation_one(monkeypatch):
    from clusterable.cluster.kmeans import MAX_ITER, N_INIT
    from clusterable.evaluate import kmeans_rule
    from clusterable.reproduce import zero_shot_fashion

    assert _shared.CLAIM_KMEANS == {"init": "k-means++", "n_init": N_INIT, "max_iter": MAX_ITER}
    # The evaluation's rule at retrieval test sets' class counts: one restart.
    assert _shared.CLAIM_KMEANS["n_init"] > kmeans_rule(100)["n_init"]
    seen = []

    def spy(features, labels, **kwargs):
        seen.append(kwargs["options"].cluster_kwargs)
        return {m: 0.5 for m in zero_shot_fashion.METRICS}

    monkeypatch.setattr(zero_shot_fashion, "evaluate_embeddings", spy)
    points = np.random.default_rng(0).normal(size=(20, 4))
    zero_shot_fashion.zero_shot_scores(points, np.repeat([0, 1], 10), spectral=False, seed=0)
    assert seen == [_shared.CLAIM_KMEANS]
