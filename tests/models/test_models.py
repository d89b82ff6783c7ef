"""Every registered model: shapes on the papers' image sizes, the head, normalisation, gradients,
deterministic initialisation, the MsDNN-AE decoders, and the optional pretrained backbones.

Parametrised over ``available_models()``: a model is tested here the moment it is registered.
"""

from __future__ import annotations

import importlib.util
import sys
import types

import pytest
import torch
from torch import nn

from clusterable.models import (
    EmbeddingNet,
    available_models,
    build_decoder,
    build_model,
    model_builder,
    register_model,
)
from clusterable.models._registry import MODELS as MODEL_REGISTRY
from clusterable.models._registry import has_no_batchnorm

# digits (scikit-learn), USPS, MNIST / Fashion-MNIST, and an odd non-square colour image.
SHAPES = [(1, 8, 8), (1, 16, 16), (1, 28, 28), (3, 9, 13)]
DIM = 12
MODELS = available_models()


def test_the_papers_models_are_registered() -> None:
    assert {"mlp", "corel-cnn", "lenet", "msdnn-cnn"} <= set(MODELS)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", MODELS)
def test_output_and_decoder_shapes(name: str, shape: tuple[int, ...]) -> None:
    model = build_model(name, shape, DIM)
    x = torch.rand(5, *shape)
    embeddings = model(x)
    assert isinstance(model, EmbeddingNet)
    assert embeddings.shape == (5, DIM)
    assert isinstance(model.head, nn.Linear) and model.head.out_features == DIM
    reconstruction = build_decoder(name, shape, DIM)(embeddings)
    assert reconstruction.shape == x.shape
    assert reconstruction.min() >= 0 and reconstruction.max() <= 1  # sigmoid for [0, 1] images


@pytest.mark.parametrize("name", MODELS)
def test_normalize_gives_unit_rows(name: str) -> None:
    model = build_model(name, (1, 16, 16), DIM, normalize=True)
    norms = model(torch.randn(4, 1, 16, 16)).norm(dim=1)
    torch.testing.assert_close(norms, torch.ones(4))


@pytest.mark.parametrize("name", MODELS)
def test_backward_reaches_every_parameter(name: str) -> None:
    model = build_model(name, (1, 8, 8), DIM)
    decoder = build_decoder(name, (1, 8, 8), DIM)
    x = torch.rand(6, 1, 8, 8)
    embeddings = model(x)
    loss = embeddings.pow(2).mean() + (decoder(embeddings) - x).pow(2).mean()
    loss.backward()
    for module in (model, decoder):
        for key, parameter in module.named_parameters():
            assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), key
            assert parameter.grad.abs().sum() > 0, key


@pytest.mark.parametrize("name", MODELS)
def test_initialisation_is_seeded(name: str) -> None:
    torch.manual_seed(3)
    first = build_model(name, (1, 28, 28), DIM).state_dict()
    torch.manual_seed(3)
    second = build_model(name, (1, 28, 28), DIM).state_dict()
    torch.manual_seed(4)
    other = build_model(name, (1, 28, 28), DIM).state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert not all(torch.equal(first[k], other[k]) for k in first)


@pytest.mark.parametrize("name", MODELS)
def test_a_model_registered_without_batchnorm_builds_none(name: str) -> None:
    """``has_no_batchnorm`` answers from the registration, before any data is read (a run that
    freezes BatchNorm is refused on it): the built model must bear it out."""
    model = build_model(name, (1, 28, 28), DIM)
    assert has_no_batchnorm(name) is not any(
        isinstance(module, nn.modules.batchnorm._BatchNorm) for module in model.modules()
    )


@pytest.mark.parametrize("name", MODELS)
def test_model_builder_is_the_registered_backbone(name: str) -> None:
    backbone, feature_dim = model_builder(name)((1, 16, 16))
    model = build_model(name, (1, 16, 16), DIM)
    assert model.feature_dim == feature_dim
    assert type(model.backbone) is type(backbone)


def test_model_builder_names_pretrained_and_unknown_models() -> None:
    assert model_builder("timm:resnet18") is None
    with pytest.raises(ValueError, match="unknown model 'nope'; choose one of"):
        model_builder("nope")


def test_mlp_flattens_feature_vectors_and_takes_widths() -> None:
    model = build_model("mlp", (20,), 4, hidden_dims=(32, 16))
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(20, 32), (32, 16), (16, 4)]
    assert model(torch.randn(7, 20)).shape == (7, 4)
    assert build_decoder("mlp", (20,), 4, hidden_dims=(32, 16), sigmoid=False)(
        torch.randn(7, 4)
    ).shape == (7, 20)


def test_corel_cnn_has_the_papers_filters() -> None:
    model = build_model("corel-cnn", (1, 28, 28), DIM)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [15, 30, 60]
    assert any(isinstance(m, nn.LeakyReLU) for m in model.modules())
    # Two fully connected layers: one in the backbone, then the head.
    assert sum(isinstance(m, nn.Linear) for m in model.modules()) == 2


def test_msdnn_cnn_has_six_convolutions_and_its_decoder_six_deconvolutions() -> None:
    model = build_model("msdnn-cnn", (1, 28, 28), 128)
    decoder = build_decoder("msdnn-cnn", (1, 28, 28), 128)
    assert sum(isinstance(m, nn.Conv2d) for m in model.modules()) == 6
    assert sum(isinstance(m, nn.Linear) for m in model.modules()) == 1
    assert sum(isinstance(m, nn.ConvTranspose2d) for m in decoder.modules()) == 6
    assert sum(isinstance(m, nn.Linear) for m in decoder.modules()) == 1


def test_unknown_model_lists_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown model 'resnet'") as error:
        build_model("resnet", (1, 28, 28), DIM)
    for name in MODELS:
        assert name in str(error.value)
    assert "timm:NAME" in str(error.value)
    with pytest.raises(ValueError, match="choose one of"):
        build_model("keras:resnet", (3, 32, 32), DIM)
    with pytest.raises(ValueError, match="choose one of"):
        build_decoder("resnet", (1, 28, 28), DIM)


def test_unknown_keyword_lists_the_accepted_ones() -> None:
    with pytest.raises(
        ValueError, match="model 'mlp' takes no argument widths; its arguments are: hidden_dims"
    ):
        build_model("mlp", (20,), DIM, widths=(3,))
    with pytest.raises(ValueError, match=r"decoder 'mlp' takes no argument widths; .*sigmoid"):
        build_decoder("mlp", (20,), DIM, widths=(3,))


def linear_backbone(input_shape: tuple[int, ...], *, width: int = 6) -> tuple[nn.Module, int]:
    return nn.Sequential(nn.Flatten(), nn.LazyLinear(width)), width


def linear_decoder(
    input_shape: tuple[int, ...], embedding_dim: int, *, width: int = 6, sigmoid: bool = True
) -> nn.Module:
    return nn.Sequential(nn.Linear(embedding_dim, int(torch.tensor(input_shape).prod())))


def test_a_model_registered_by_a_user_is_listed_built_and_checked() -> None:
    with MODEL_REGISTRY.scratch():
        register_model("linear", decoder=linear_decoder, family="toy")(linear_backbone)
        assert "linear" in available_models() and model_builder("linear") is linear_backbone
        assert MODEL_REGISTRY.metadata("linear") == {"decoder": linear_decoder, "family": "toy"}
        model = build_model("linear", (5,), DIM, width=9)
        assert model.feature_dim == 9 and model(torch.randn(3, 5)).shape == (3, DIM)
        assert build_decoder("linear", (5,), DIM, width=9)(torch.randn(3, DIM)).shape == (3, 5)
        with pytest.raises(
            ValueError, match=r"model 'linear' takes no argument depth; its arguments are: width$"
        ):
            build_model("linear", (5,), DIM, depth=2)
    assert "linear" not in available_models()


@pytest.mark.parametrize("name", ["corel-cnn", "lenet", "msdnn-cnn"])
def test_cnns_reject_tiny_or_flat_inputs(name: str) -> None:
    for shape in [(1, 4, 4), (64,)]:
        with pytest.raises(ValueError, match="H, W >= 8"):
            build_model(name, shape, DIM)


@pytest.mark.parametrize("source", ["timm", "torchvision"])
def test_missing_vision_extra_says_how_to_install(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A None entry in sys.modules makes the import fail whether or not the package is installed.
    monkeypatch.setitem(sys.modules, source, None)
    monkeypatch.setitem(sys.modules, f"{source}.models", None)
    with pytest.raises(ImportError, match=r"pip install 'clusterable\[vision\]'"):
        build_model(f"{source}:resnet18", (3, 32, 32), DIM)


def test_pretrained_has_no_decoder() -> None:
    with pytest.raises(ValueError, match="has no decoder"):
        build_decoder("timm:resnet18", (3, 32, 32), DIM)


class _TinyClassifier(nn.Module):
    """Stands in for a torchvision classifier: features, then a final linear ``fc``."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


def test_torchvision_backbone_loads_local_weights_and_drops_the_classifier(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    calls = {}

    def get_model(arch: str, weights: object = None, **kwargs: object) -> nn.Module:
        calls.update(arch=arch, weights=weights, **kwargs)
        return _TinyClassifier()

    package = types.ModuleType("torchvision")
    package.models = types.SimpleNamespace(get_model=get_model)
    monkeypatch.setitem(sys.modules, "torchvision", package)
    monkeypatch.setitem(sys.modules, "torchvision.models", package.models)
    torch.manual_seed(0)
    source = _TinyClassifier()
    path = tmp_path / "weights.pth"
    torch.save(source.state_dict(), path)

    model = build_model("torchvision:tiny", (1, 16, 16), DIM, weights=path)
    assert calls["weights"] is None  # never asks torchvision to download
    assert model.feature_dim == 4 and model(torch.rand(2, 1, 16, 16)).shape == (2, DIM)
    loaded = model.backbone.model.features[0].weight
    torch.testing.assert_close(loaded, source.features[0].weight)
    with pytest.raises(FileNotFoundError, match=r"missing\.pth"):
        build_model("torchvision:tiny", (3, 16, 16), DIM, weights=tmp_path / "missing.pth")


def _stand_in_torchvision(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torchvision.models.get_model`` building a :class:`_TinyClassifier`, whatever its name."""
    package = types.ModuleType("torchvision")
    package.models = types.SimpleNamespace(get_model=lambda arch, **kwargs: _TinyClassifier())
    monkeypatch.setitem(sys.modules, "torchvision", package)
    monkeypatch.setitem(sys.modules, "torchvision.models", package.models)


def _weights_files_of_no_model(folder) -> dict[str, object]:
    """Files a user may give as weights that hold no state dict of the model, by what they are."""
    folder.mkdir()
    files = {
        "text": folder / "notes.pth",
        "empty": folder / "empty.pth",
        "module": folder / "module.pth",
        "tensor": folder / "tensor.pth",
        "other shapes": folder / "wider.pth",
        "safetensors cut short": folder / "cut.safetensors",
    }
    files["text"].write_text("not weights\n")
    files["empty"].write_bytes(b"")
    torch.save(_TinyClassifier(), files["module"])  # the module pickled, not its state dict
    torch.save(torch.zeros(3), files["tensor"])
    torch.save(_TinyClassifier(num_classes=7).state_dict(), files["other shapes"])
    files["safetensors cut short"].write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{")
    return files


def test_weights_that_are_no_state_dict_of_the_model_are_named_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    # A text file given as weights raised KeyError: 101 out of torch's unpickler, a traceback.
    _stand_in_torchvision(monkeypatch)
    for what, path in _weights_files_of_no_model(tmp_path / "weights").items():
        with pytest.raises(ValueError) as error:
            build_model("torchvision:tiny", (3, 16, 16), DIM, weights=path)
        message = str(error.value)
        assert str(path) in message and "state dict" in message and "\n" not in message, what


class _DeeperClassifier(_TinyClassifier):
    """`_TinyClassifier` with one more layer inside ``features`` (resnet34 beside resnet18)."""

    def __init__(self) -> None:
        super().__init__()
        self.features.append(nn.Identity())
        self.features.append(nn.Linear(4, 4))


def test_a_deeper_models_weights_are_refused_and_a_missing_heads_are_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    # resnet34's weights given to torchvision:resnet18 loaded into the keys both have, and the
    # run trained on them without a word; GoogLeNet's auxiliary heads, which a model built
    # without them has no module for, are still left out.
    _stand_in_torchvision(monkeypatch)
    deeper = tmp_path / "deeper.pth"
    torch.save(_DeeperClassifier().state_dict(), deeper)
    with pytest.raises(ValueError) as error:
        build_model("torchvision:tiny", (3, 16, 16), DIM, weights=deeper)
    message = str(error.value)
    assert "holds 2 tensors torchvision:tiny has no place for: ['features.4.weight'" in message
    assert str(deeper) in message and "\n" not in message
    with_heads = tmp_path / "heads.pth"
    state = _TinyClassifier().state_dict()
    torch.save({**state, "aux1.fc.weight": torch.zeros(2, 4)}, with_heads)
    model = build_model("torchvision:tiny", (3, 16, 16), DIM, weights=with_heads)
    torch.testing.assert_close(model.backbone.model.features[0].weight, state["features.0.weight"])


def test_timm_names_a_weights_file_it_cannot_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    def create_model(arch: str, **kwargs: object) -> nn.Module:
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        model.num_features = 4
        if kwargs.get("pretrained"):  # as timm's load_pretrained reads its config's file
            model.load_state_dict(torch.load(kwargs["pretrained_cfg_overlay"]["file"]))
        return model

    monkeypatch.setitem(sys.modules, "timm", types.SimpleNamespace(create_model=create_model))
    path = tmp_path / "notes.pth"
    path.write_text("not weights\n")
    with pytest.raises(ValueError, match=r"weights file .*notes\.pth cannot be read as weights"):
        build_model("timm:tiny", (3, 16, 16), DIM, weights=path)


def test_timm_backbone_passes_the_local_file_to_timm(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    calls = {}

    def create_model(arch: str, **kwargs: object) -> nn.Module:
        calls.update(arch=arch, **kwargs)
        backbone = nn.Sequential(nn.Conv2d(kwargs["in_chans"], 5, 3), nn.AdaptiveAvgPool2d(1))
        backbone.append(nn.Flatten())
        backbone.num_features = 5
        return backbone

    monkeypatch.setitem(sys.modules, "timm", types.SimpleNamespace(create_model=create_model))
    model = build_model("timm:tiny", (1, 16, 16), DIM)
    assert calls["pretrained"] is False and calls["num_classes"] == 0 and calls["in_chans"] == 1
    assert model(torch.rand(2, 1, 16, 16)).shape == (2, DIM)

    path = tmp_path / "tiny.safetensors"
    path.write_bytes(b"")
    build_model("timm:tiny", (3, 16, 16), DIM, weights=path)
    assert calls["pretrained"] is True
    assert calls["pretrained_cfg_overlay"] == {"file": str(path)}


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is not installed")
@pytest.mark.parametrize("arch", ["vit_tiny_patch16_224", "resnet18"])
def test_a_timm_backbone_takes_images_of_the_runs_size(arch: str) -> None:
    # A ViT is built for its config's 224 px; --image-size 48 must build it for 48 px (a
    # convolutional network, which takes no img_size, takes any size as it is).
    model = build_model(f"timm:{arch}", (3, 48, 40), DIM)
    assert model(torch.rand(2, 3, 48, 40)).shape == (2, DIM)


@pytest.mark.skipif(
    importlib.util.find_spec("torchvision") is None, reason="torchvision is not installed"
)
def test_a_torchvision_vision_transformer_takes_images_of_the_runs_size(tmp_path) -> None:
    from torchvision.models import vit_b_32

    # A 224 px weights file: its position embeddings are resampled to the run's 64 px.
    path = tmp_path / "vit_b_32.pth"
    torch.save(vit_b_32().state_dict(), path)
    model = build_model("torchvision:vit_b_32", (3, 64, 64), DIM, weights=path)
    assert model(torch.rand(2, 3, 64, 64)).shape == (2, DIM)
    with pytest.raises(ValueError, match=r"--image-size 48: .* multiple of 32"):
        build_model("torchvision:vit_b_32", (3, 48, 48), DIM)


@pytest.mark.skipif(
    importlib.util.find_spec("torchvision") is None, reason="torchvision is not installed"
)
def test_a_backbone_that_cannot_take_the_runs_size_is_refused_when_built() -> None:
    """MaxViT's attention windows do not fit 64 px images: one line naming the size when the
    model is built, not torchvision's reshape error at the first training batch; the built
    model stays in training mode."""
    with pytest.raises(ValueError, match=r"^--image-size 64: torchvision:maxvit_t cannot take"):
        build_model("torchvision:maxvit_t", (3, 64, 64), DIM)
    assert build_model("torchvision:resnet18", (3, 64, 64), DIM).training
