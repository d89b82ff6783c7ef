"""Pseudo-labels, noise exclusion, deep sOPML (Algorithm 1) in the trainer, and the CLI flag."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest
import torch

from clusterable._register import check_keywords
from clusterable.cli import main
from clusterable.data import load_dataset
from clusterable.device import module_device
from clusterable.losses import OPMLLoss
from clusterable.losses._pairs import squared_distances
from clusterable.mining import all_triplets, semi_hard_triplets
from clusterable.models import build_model
from clusterable.train import TrainConfig, Trainer
from clusterable.train.config_typing import parameter_types
from clusterable.unsupervised import (
    OPMLDiagnostics,
    PseudoLabelRefresh,
    RiemannianOPMLLoss,
    backbone_features,
    pseudo_label_triplets,
    pseudo_labels,
    with_pseudo_labels,
)


def blobs_with_uniform_noise(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three tight 2-D blobs of 150 points and 60 uniform noise points (label -1)."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [6.0, 0.0], [3.0, 5.0]])
    blobs = np.concatenate([c + 0.5 * rng.normal(size=(150, 2)) for c in centres])
    noise = rng.uniform(-4.0, 10.0, size=(60, 2))
    return np.concatenate([blobs, noise]), np.r_[np.repeat([0, 1, 2], 150), np.full(60, -1)]


@pytest.mark.parametrize("tsne", [False, True])
@pytest.mark.parametrize(
    ("seed", "problem"), [(None, "is not a number"), (-1, ""), (1.5, "is not an integer")]
)
def test_pseudo_labels_refuse_a_seed_they_cannot_repeat(tsne, seed, problem):
    """With t-SNE, -1 was scikit-learn's PCA error and None a fresh map every call; without it,
    AAS ignored any seed."""
    x, _ = blobs_with_uniform_noise()
    message = rf"^pseudo_labels seed={seed!r} {problem}.*must be an integer in \[0, "
    with pytest.raises(ValueError, match=message):
        pseudo_labels(x[:40], "aas", tsne=tsne, seed=seed)


@pytest.mark.parametrize(
    ("features", "message"),
    [
        (np.full((5, 2), np.nan), r"^features has 5 row\(s\) with NaN or infinite values"),
        (np.zeros(5), r"^features must be a 2-D array"),
    ],
)
def test_tsne_maps_of_features_it_cannot_place_are_refused(features, message):
    """NaN features reached openTSNE (its own error, or a map of NaN)."""
    from clusterable.tsne import tsne_map

    with pytest.raises(ValueError, match=message):
        tsne_map(features)


def test_k_means_pseudo_labels_refuse_a_fractional_count():
    """n_clusters=2.5 ran as 2."""
    x, _ = blobs_with_uniform_noise()
    with pytest.raises(ValueError, match=r"must be an integer or 'auto', got 2\.5"):
        pseudo_labels(x, "kmeans", tsne=False, n_clusters=2.5)


def test_aas_pseudo_labels_mark_noise_and_are_deterministic():
    x, truth = blobs_with_uniform_noise()
    settings = {"tsne": False, "k_graph": 30, "eps": 0.9, "theta_min": 5.0}  # paper's noise setup
    labels = pseudo_labels(x, "aas", **settings)
    assert (labels == -1).any()
    assert (labels[truth == -1] == -1).mean() > 0.5  # most uniform noise is flagged
    for cluster in np.unique(labels[labels >= 0]):  # a cluster never mixes two blobs
        members = truth[(labels == cluster) & (truth >= 0)]
        assert len(np.unique(members)) <= 1
    np.testing.assert_array_equal(labels, pseudo_labels(x, "aas", **settings))


def test_tsne_pseudo_labels_are_seeded():
    x, _ = blobs_with_uniform_noise()
    first = pseudo_labels(x, "kmeans", n_clusters=3, seed=3)
    np.testing.assert_array_equal(first, pseudo_labels(x, "kmeans", n_clusters=3, seed=3))
    assert set(first.tolist()) == {0, 1, 2}


def test_kmeans_needs_the_number_of_clusters():
    with pytest.raises(ValueError, match="n_clusters"):
        pseudo_labels(np.zeros((10, 2)), "kmeans")
    with pytest.raises(ValueError, match="'aas' or 'kmeans'"):
        pseudo_labels(np.zeros((10, 2)), "dbscan")  # type: ignore[arg-type]


def test_noise_items_never_appear_in_mined_triplets():
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(48, 4, generator=generator)
    labels = torch.arange(48) % 3
    labels[::4] = -1
    triplets = pseudo_label_triplets(squared_distances(embeddings), labels, margin=10.0)
    used = torch.cat(triplets)
    assert used.numel() > 0
    assert (labels[used] >= 0).all()
    # and the loss built on them neither reads the noise items nor sends them gradient
    loss = RiemannianOPMLLoss(4, metric_dim=2, maxiter=2)
    embeddings.requires_grad_()
    loss(embeddings, labels).backward()
    assert (embeddings.grad[labels < 0] == 0).all()
    assert embeddings.grad[labels >= 0].abs().sum() > 0


def test_pseudo_label_triplets_are_the_semi_hard_rule_on_the_labelled_items_in_index_order():
    generator = torch.Generator().manual_seed(1)
    embeddings = torch.randn(40, 3, generator=generator)
    labels = torch.arange(40) % 4
    labels[::6] = -1
    distances = squared_distances(embeddings)
    clean = (labels >= 0).nonzero(as_tuple=True)[0]
    expected = semi_hard_triplets(distances[clean][:, clean], labels[clean], 2.0)  # the mask rule
    got = pseudo_label_triplets(distances, labels, 2.0)
    assert got[0].numel() > 0
    for listed, masked in zip(got, expected, strict=True):
        assert torch.equal(listed, clean[masked])


def test_pseudo_label_mining_memory_is_quadratic_not_cubic():
    """The parent's lister, not the (|P|, n) mask: two classes of 96 would make that mask n^3 / 2
    distances (14 MB); no operation here allocates more than an (n, n) sort's values and
    indices."""
    from torch.profiler import ProfilerActivity, profile

    n = 192
    embeddings = torch.randn(n, 4, generator=torch.Generator().manual_seed(0))
    distances = squared_distances(embeddings)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        anchor, _, _ = pseudo_label_triplets(distances, torch.arange(n) % 2, margin=0.1)
    assert anchor.numel() > 0
    assert max(event.cpu_memory_usage for event in prof.events()) <= 12 * n * n


def test_the_seven_opml_arguments_are_declared_once():
    own = RiemannianOPMLLoss.__init__.__code__.co_varnames
    parent = [p for p in inspect.signature(OPMLLoss).parameters.values()]
    assert not {p.name for p in parent} & set(own)  # handed to OPMLLoss, not repeated
    signature = inspect.signature(RiemannianOPMLLoss).parameters
    assert list(signature.values())[: len(parent)] == parent
    assert signature["maxiter"].default == 10 and len(signature) == len(parent) + 1
    assert parameter_types(RiemannianOPMLLoss)["alpha_deg"] is float  # the run settings' types
    with pytest.raises(ValueError, match="its arguments are: embedding_dim, metric_dim"):
        check_keywords("loss 'opml'", RiemannianOPMLLoss, {"maxiterations": 3})
    loss = RiemannianOPMLLoss(6, 3, 30.0, margin=0.5, seed=2, maxiter=4)
    assert (loss.metric_dim, loss.alpha_deg, loss.margin, loss.maxiter) == (3, 30.0, 0.5, 4)
    torch.testing.assert_close(loss.L, OPMLLoss(6, 3, seed=2).L)


def test_riemannian_loss_moves_R_and_L_without_gradient_and_keeps_L_orthonormal():
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.nn.functional.normalize(torch.randn(32, 6, generator=generator), dim=1)
    labels = torch.arange(32) % 4
    loss = RiemannianOPMLLoss(6, metric_dim=3, maxiter=10)
    start_r, start_l = loss.R.clone(), loss.L.clone()
    value = loss(embeddings.requires_grad_(), labels)
    before, after = loss.last_rcgd_cost
    assert after < before
    assert value.item() == pytest.approx(after, rel=1e-4)  # line 11: the loss at the new (R, L)
    assert not torch.allclose(loss.R, start_r) and not torch.allclose(loss.L, start_l)
    assert torch.linalg.norm(loss.L.T @ loss.L - torch.eye(3)) < 1e-6
    value.backward()
    assert loss.R.grad is None and loss.L.grad is None
    assert set(OPMLLoss(6, metric_dim=3).state_dict()) == set(loss.state_dict())


def mean_margin_term_on_probe(loss: OPMLLoss, embeddings: torch.Tensor, labels) -> float:
    """Mean m_i over every triplet of a fixed probe set (not only the mined ones)."""
    triplets = all_triplets(torch.as_tensor(labels))
    with torch.no_grad():
        margin_term, _ = loss.triplet_terms(embeddings, triplets, loss.metric(), loss.R)
    return float(margin_term.mean())


def test_deep_sopml_on_digits_lowers_the_loss_and_the_margin_term(tmp_path):
    digits = load_dataset("digits", split="train")
    train = with_pseudo_labels(digits, seed=0)
    assert len(np.unique(train.labels[train.labels >= 0])) >= 5
    torch.manual_seed(0)
    model = build_model("corel-cnn", digits.input_shape, 32, normalize=True)
    loss = RiemannianOPMLLoss(32, metric_dim=16, maxiter=10, seed=0)
    probe = train.subset(np.flatnonzero(train.labels >= 0)[:120])
    probe_x = torch.from_numpy(np.asarray(probe.x))

    def probe_margin() -> float:
        model.eval()
        with torch.no_grad():
            # The model trains on the device the rule picks, the loss's metric beside it.
            embeddings = model(probe_x.to(module_device(model))).to(module_device(loss))
            value = mean_margin_term_on_probe(loss, embeddings, probe.labels)
        model.train()
        return value

    start_margin = probe_margin()
    config = TrainConfig(epochs=4, batch_size=64, lr=3e-3, eval_every=0, progress=False)
    trainer = Trainer(
        model, loss, train, None, config=config, out=tmp_path, callbacks=[OPMLDiagnostics(loss)]
    )
    result = trainer.fit()
    losses = [record["loss"] for record in result.history]
    assert losses[-1] < losses[0]
    assert probe_margin() < 0.8 * start_margin
    logged = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    opml = [r for r in logged if r["event"] == "opml"]
    assert opml and all({"mean_margin_term", "mean_weight"} <= set(r) for r in opml)
    assert np.mean([r["mean_weight"] for r in opml[-5:]]) > 0.2  # w did not collapse to 0


def test_pseudo_labels_are_recomputed_every_E_epochs(tmp_path):
    digits = load_dataset("digits", split="train").subset(np.arange(300))
    train = with_pseudo_labels(digits, method="kmeans", n_clusters=6, seed=0)
    model = build_model("mlp", digits.input_shape, 8, normalize=True)
    loss = RiemannianOPMLLoss(8, metric_dim=4, maxiter=2)
    config = TrainConfig(epochs=2, batch_size=60, eval_every=0, progress=False)
    trainer = Trainer(
        model,
        loss,
        train,
        config=config,
        out=tmp_path,
        callbacks=[PseudoLabelRefresh(every=1, method="kmeans")],
    )
    trainer.fit()
    events = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    refreshes = [r for r in events if r["event"] == "pseudo_labels"]
    assert [r["epoch"] for r in refreshes] == [1]
    assert refreshes[0]["clusters"] == 6
    np.testing.assert_array_equal(trainer.train_set.fine_labels, digits.labels)


def test_cli_train_unsupervised_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--data",
            "digits",
            "--loss",
            "opml",
            "--unsupervised",
            "--loss-arg",
            "metric_dim=16",
            "--embedding-dim",
            "32",
            "--normalize",
            "--epochs",
            "1",
            "--batch-size",
            "128",
            "--no-progress",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    metrics = json.loads((out / "test_metrics.json").read_text())
    assert 0.0 <= metrics["nmi"] <= 1.0 and metrics["recall@1"] > 0.5
    run = json.loads((out / "run.json").read_text())
    assert run["spec"]["unsupervised"] is True
    assert "recall@1" in capsys.readouterr().out


def test_backbone_features_are_its_outputs_in_unit_rows():
    train = load_dataset("digits", split="train").subset(np.arange(40))
    backbone = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 6))  # (n, 6)
    features = backbone_features(backbone, train, "cpu")
    with torch.no_grad():
        outputs = backbone(torch.as_tensor(train.features()[0])).numpy()  # (40, 6)
    expected = outputs / np.linalg.norm(outputs, axis=1, keepdims=True)
    np.testing.assert_allclose(features, expected, rtol=1e-6)


def test_an_image_backbone_run_clusters_the_backbones_features(monkeypatch, tmp_path, capsys):
    """OPML's deep experiments (Sec. V-D) cluster the starting backbone's features into the
    first pseudo-labels; a ``timm:`` or ``torchvision:`` run clustered the raw pixels (3 x 224 x
    224 numbers a photo). A built-in model stands in for the backbone here (CI has neither
    library; `make test-vision` runs a real one, tests/test_recipe_photo_folder.py)."""
    import clusterable.recipe as recipe

    monkeypatch.setattr(recipe, "model_builder", lambda name: None)  # "a pretrained backbone"
    clustered = []
    real = recipe.with_pseudo_labels

    def spy(ds, features=None, **options):
        clustered.append(features)
        return real(ds, features, **options)

    monkeypatch.setattr(recipe, "with_pseudo_labels", spy)
    out = tmp_path / "run"
    code = main(
        ["train", "--data", "digits", "--loss", "opml", "--unsupervised", "--model", "mlp",
         "--embedding-dim", "8", "--epochs", "1",
         "--batch-size", "128", "--no-progress", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    (features,) = clustered
    n, width = (
        len(load_dataset("digits", split="train")),
        build_model("mlp", (1, 8, 8), 8).feature_dim,
    )
    assert features is not None and features.shape == (n, width)  # the backbone's, not 64 pixels
    np.testing.assert_allclose(np.linalg.norm(features, axis=1), 1.0, rtol=1e-5)
    assert "pseudo-labels of t-SNE + AAS of the backbone's features" in capsys.readouterr().out
