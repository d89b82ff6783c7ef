"""Fine-tuning an image backbone on a folder of photos with the standard recipe (issue 28): it
trains, resumes bit for bit, and retrieves better than its random start."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from PIL import Image
from test_trainer import assert_resume_is_exact  # tests/train: resume tests

from clusterable.evaluate import evaluate_embeddings
from clusterable.recipe import RunSpec, build_trainer
from clusterable.train import TrainConfig
from clusterable.train.embed import embed_dataset


def stripe_photos(root, classes=4, per_class=24, size=(96, 72), seed=0):
    """``classes`` sub-folders of JPEGs told apart only by the direction of their stripes (0, 90,
    45 and 135 degrees, ...): colours, period and phase are drawn per photo."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0 : size[1], 0 : size[0]]
    for c in range(classes):
        folder = root / f"class{c}"
        folder.mkdir(parents=True)
        angle = np.pi * c / classes
        along = xx * np.cos(angle) + yy * np.sin(angle)  # (h, w)
        for i in range(per_class):
            period, phase = rng.uniform(6, 14), rng.uniform(0, 2 * np.pi)
            stripes = np.sin(2 * np.pi * along / period + phase) > 0  # (h, w)
            low, high = rng.integers(0, 256, (2, 3))
            noise = rng.normal(0, 12, (*stripes.shape, 3))  # (h, w, 3)
            pixels = np.where(stripes[..., None], high, low) + noise
            Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(folder / f"{i}.jpg")
    return root


def _needs(module):
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"{module} is not installed here (make gpu-check runs this where it is)",
    )


@pytest.mark.parametrize(
    "model",
    [
        "corel-cnn",  # the same recipe on the bundled CNN, wherever the tests run
        pytest.param("torchvision:resnet18", marks=_needs("torchvision")),
        pytest.param("timm:resnet18", marks=_needs("timm")),
    ],
)
def test_a_backbone_fine_tunes_on_photos_resumes_bit_exactly_and_beats_its_start(tmp_path, model):
    photos = stripe_photos(tmp_path / "photos")
    # Random weights (no download), 64 px so that a CPU runs it in seconds; the recipe's
    # AdamW, cosine schedule with warm-up, and seeded augmentation.
    spec = RunSpec(
        data=f"folder:{photos}", model=model, embedding_dim=32, image_size=64, loss="lifted"
    )
    config = TrainConfig(
        epochs=6,
        batch_size=16,
        lr=3e-3,
        optimizer="adamw",
        schedule="cosine",
        warmup_epochs=1,
        device="cpu",
        workers=0,
        eval_every=0,
        progress=False,
    )
    train = spec.training_view(spec.load("train"), config.seed)
    test = spec.load("test")

    def recall_at_1(net):
        embeddings, labels = embed_dataset(net, test)
        return evaluate_embeddings(embeddings, labels, metrics=("recall@k",), ks=(1,))["recall@1"]

    def fit(out, resume=False, callbacks=()):
        trainer = build_trainer(spec, config, train, out=out)
        trainer.callbacks.extend(callbacks)
        return trainer.fit(resume=resume), trainer.model

    untrained = recall_at_1(build_trainer(spec, config, train).model)
    _, model_a = assert_resume_is_exact(fit, tmp_path, kill_at=3)
    trained = recall_at_1(model_a)
    assert trained > untrained, (untrained, trained)


@pytest.mark.parametrize(
    "model",
    [
        pytest.param("torchvision:resnet18", marks=_needs("torchvision")),
        pytest.param("timm:resnet18", marks=_needs("timm")),
    ],
)
def test_the_banner_says_a_pretrained_name_without_weights_starts_from_random_ones(tmp_path, model):
    """A pretrained backbone's name without ``--model-arg weights=PATH`` trains from random
    weights (nothing is downloaded): the banner says so, and names the file when one is given."""
    import torch

    from clusterable.recipe import describe_start

    photos = stripe_photos(tmp_path / "photos", classes=2, per_class=4)
    config = TrainConfig(epochs=1, batch_size=8, device="cpu", workers=0, progress=False)

    def model_line(**model_args):
        spec = RunSpec(data=f"folder:{photos}", model=model, image_size=32, model_args=model_args)
        train = spec.load("train")
        trainer = build_trainer(spec, config, train)
        banner = describe_start(
            spec, config, train, {"train": len(train)}, trainer.loss, trainer.sampler,
            trainer.env.device, None, False,
        )  # fmt: skip
        return next(line for line in banner.splitlines() if line.startswith("model"))

    line = model_line()
    assert "RANDOM initial weights (no --model-arg weights=PATH" in line, line
    weights = tmp_path / "weights.pth"
    source, _, arch = model.partition(":")
    library = importlib.import_module("torchvision.models" if source == "torchvision" else "timm")
    built = library.get_model(arch) if source == "torchvision" else library.create_model(arch)
    torch.save(built.state_dict(), weights)  # the library's own file: what a user downloads
    line = model_line(weights=str(weights))
    assert f"weights={weights}" in line and "RANDOM" not in line, line


@pytest.mark.parametrize(
    "model",
    [
        pytest.param("torchvision:resnet18", marks=_needs("torchvision")),
        pytest.param("timm:resnet18", marks=_needs("timm")),
    ],
)
def test_a_run_of_no_epochs_embeds_with_the_libraries_own_pretrained_features(tmp_path, model):
    """``train --epochs 0`` of a real backbone and its library's weights file: the run embeds
    with the backbone's features, l2-normalised (its head the identity at their width), and its
    test table is the one the run before training would have shown."""
    import json

    import torch

    from clusterable.before_training import BeforeTraining
    from clusterable.recipe import build, train_run
    from clusterable.trained_run import TrainedRun
    from clusterable.unsupervised import backbone_features

    photos = stripe_photos(tmp_path / "photos", classes=3, per_class=8)
    source, _, arch = model.partition(":")
    library = importlib.import_module("torchvision.models" if source == "torchvision" else "timm")
    built = library.get_model(arch) if source == "torchvision" else library.create_model(arch)
    weights = tmp_path / "weights.pth"
    torch.save(built.state_dict(), weights)
    spec = RunSpec(
        data=f"folder:{photos}", model=model, image_size=32, model_args={"weights": str(weights)}
    )

    def config(epochs):
        return TrainConfig(epochs=epochs, batch_size=12, device="cpu", workers=0, progress=False)

    train_run(spec, config(0), out=tmp_path / "untrained")
    run = TrainedRun.load(tmp_path / "untrained", device="cpu")
    test = run.split("test")
    features = backbone_features(build(spec, test.input_shape, 3).model.backbone, test, "cpu")
    assert run.spec.embedding_dim == features.shape[1] == 512
    np.testing.assert_allclose(run.embed(test).embeddings, features, atol=1e-5)
    train_run(spec, config(1), out=tmp_path / "trained")  # its table before training: the same
    untrained = json.loads((tmp_path / "untrained" / "test_metrics.json").read_text())
    before = BeforeTraining.load(tmp_path / "trained").metrics
    assert untrained.keys() == before.keys()
    for key, value in untrained.items():
        assert value == pytest.approx(before[key], abs=1e-6), key  # float32 rounding apart
