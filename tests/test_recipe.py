"""One way to build a run: a RunSpec, seeded pieces, model arguments, the spec in the checkpoint."""

from __future__ import annotations

import json
import sys
import types

import pytest
import torch

from clusterable.cli import main
from clusterable.data import load_dataset
from clusterable.losses import AutoencoderLoss, MsDNNLoss, build_loss
from clusterable.models import build_model
from clusterable.recipe import RunSpec, build, build_trainer, load_trained
from clusterable.train import TrainConfig, Trainer

SHAPE = (1, 28, 28)


def _weights(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in module.state_dict().items()}


def test_build_with_a_seed_gives_the_same_pieces_whatever_ran_before():
    spec = RunSpec(model="lenet", loss="gaussian-corel", embedding_dim=8)
    first = build(spec, SHAPE, num_classes=3, seed=5)
    torch.rand(100)  # draws between the two builds must not matter
    second = build(spec, SHAPE, num_classes=3, seed=5)
    other = build(spec, SHAPE, num_classes=3, seed=6)
    for a, b in ((first.model, second.model), (first.loss, second.loss)):
        wa, wb = _weights(a), _weights(b)
        assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not torch.equal(first.model.head.weight, other.model.head.weight)


def test_model_args_are_typed_against_the_model_and_reach_it():
    spec = RunSpec(model="msdnn-cnn", model_args={"channels": "8,8,16,16,24,24"})
    assert spec.model_args == {"channels": (8, 8, 16, 16, 24, 24)}
    pieces = build(spec, SHAPE, num_classes=10)
    assert pieces.model.feature_dim == 24 * 4 * 4  # the last convolution's width reached it


def test_model_args_reach_the_autoencoder_decoder():
    spec = RunSpec(model="mlp", loss="msdnn", autoencoder=True, model_args={"hidden_dims": [12, 6]})
    pieces = build(spec, (20,), num_classes=2)
    decoder_widths = [
        m.out_features for m in pieces.decoder.modules() if hasattr(m, "out_features")
    ]
    assert decoder_widths == [6, 12, 20]
    assert pieces.loss.decoder is pieces.decoder  # the loss wrapper holds and trains it


def test_the_autoencoder_weight_is_a_loss_argument():
    spec = RunSpec(loss="msdnn", autoencoder=True, loss_args={"reconstruction_weight": "0.25"})
    loss = build(spec, (20,), num_classes=2).loss
    assert isinstance(loss, AutoencoderLoss) and loss.weight == 0.25
    assert isinstance(loss.loss, MsDNNLoss)
    assert spec.loss_args == {"reconstruction_weight": 0.25}  # typed once, kept in the spec
    with pytest.raises(ValueError, match="autoencoder argument reconstruction_weight='heavy'"):
        RunSpec(loss="msdnn", autoencoder=True, loss_args={"reconstruction_weight": "heavy"})
    with pytest.raises(ValueError, match="add --autoencoder"):
        build(RunSpec(loss="msdnn", loss_args={"reconstruction_weight": 0.5}), (20,), 2)
    with pytest.raises(ValueError, match="--loss-arg reconstruction_weight="):
        TrainConfig.from_dict({"reconstruction_weight": 0.5})


def test_an_autoencoder_run_from_the_command_line_restores_its_decoder(tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--data", "digits", "--loss", "msdnn", "--autoencoder", "--epochs", "1"]
    argv += ["--loss-arg", "reconstruction_weight=0.5", "--embedding-dim", "8"]
    argv += ["--batch-size", "60", "--no-progress", "--no-report", "--out", str(out)]
    assert main(argv) == 0
    (_, loss, spec, *_), (_, again, *_) = load_trained(out), load_trained(out)
    assert isinstance(loss, AutoencoderLoss) and loss.weight == 0.5
    initial = _weights(build(spec, (1, 8, 8), num_classes=10, seed=0).loss.decoder)
    loaded, loaded_again = _weights(loss.decoder), _weights(again.decoder)
    assert all(torch.equal(loaded[k], loaded_again[k]) for k in loaded)  # from the checkpoint
    assert not all(torch.equal(loaded[k], initial[k]) for k in loaded)  # and trained


def test_a_model_arg_of_the_wrong_type_names_the_model_and_the_argument():
    with pytest.raises(
        ValueError, match=r"model 'mlp' argument hidden_dims='wide'.*Sequence\[int\]"
    ):
        RunSpec(model="mlp", model_args={"hidden_dims": "wide"})


def test_an_unknown_model_arg_lists_the_accepted_ones():
    with pytest.raises(ValueError, match="hidden_dims"):
        build(RunSpec(model="mlp", model_args={"depth": 3}), (20,), num_classes=2)


def test_train_takes_model_args_from_flags_and_yaml_and_the_checkpoint_rebuilds_them(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("model_args:\n  negative_slope: 0.2\n")
    out = tmp_path / "run"
    argv = ["train", "--config", str(config), "--data", "digits", "--embedding-dim", "8"]
    argv += ["--model-arg", "hidden_dims=24,12", "--epochs", "1", "--batch-size", "60"]
    assert main([*argv, "--no-progress", "--no-report", "--out", str(out)]) == 0
    stored = json.loads((out / "run.json").read_text())["spec"]["model_args"]
    assert stored == {"negative_slope": 0.2, "hidden_dims": [24, 12]}
    model, _, spec, checkpoint, *_ = load_trained(out)
    assert spec.model_args == {"negative_slope": 0.2, "hidden_dims": (24, 12)}
    assert model.feature_dim == 12
    meta = json.loads((checkpoint / "meta.json").read_text())
    assert meta["run"]["spec"]["model_args"]["hidden_dims"] == [24, 12]
    assert meta["run"]["input_shape"] == [1, 8, 8] and meta["run"]["num_classes"] == 10


def test_build_trainer_trains_what_build_makes():
    train = load_dataset("digits", split="train")
    spec = RunSpec(model="mlp", loss="contrastive", embedding_dim=8)
    config = TrainConfig(epochs=1, batch_size=60, eval_every=0, progress=False, seed=2)
    trainer = build_trainer(spec, config, train)
    fresh = build(spec, train.input_shape, train.num_classes, seed=2)
    assert torch.equal(trainer.model.head.weight.cpu(), fresh.model.head.weight)
    assert trainer.record["spec"]["loss"] == "contrastive"


def test_a_checkpoint_without_a_recipe_says_how_to_load_it(tmp_path):
    train = load_dataset("digits", split="train")
    model = build_model("mlp", train.input_shape, 8)
    config = TrainConfig(epochs=1, batch_size=60, eval_every=0, progress=False)
    Trainer(model, build_loss("contrastive"), train, config=config, out=tmp_path).fit()
    with pytest.raises(ValueError, match=r"load it with clusterable\.train\.load_weights"):
        load_trained(tmp_path)


class _TinyClassifier(torch.nn.Module):
    """Stands in for a torchvision classifier: features, then a final linear ``fc``."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()
        )
        self.fc = torch.nn.Linear(4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


def test_a_trained_run_loads_after_its_pretrained_weights_file_is_gone(tmp_path, monkeypatch):
    package = types.ModuleType("torchvision")  # a stand-in: torchvision is not needed here
    package.models = types.SimpleNamespace(get_model=lambda arch, weights=None: _TinyClassifier())
    monkeypatch.setitem(sys.modules, "torchvision", package)
    monkeypatch.setitem(sys.modules, "torchvision.models", package.models)
    weights = tmp_path / "tiny.pth"
    torch.save(_TinyClassifier().state_dict(), weights)
    spec = RunSpec(data="digits", model="torchvision:tiny", model_args={"weights": str(weights)})
    config = TrainConfig(epochs=1, batch_size=64, device="cpu", progress=False, eval_every=0)
    train = spec.load("train").subset(range(256))
    trainer = build_trainer(spec, config, train, out=tmp_path / "run")
    trainer.fit()
    weights.unlink()
    model, _, loaded_spec, *_ = load_trained(tmp_path / "run")
    assert loaded_spec.model_args == {"weights": str(weights)}  # the record is the run's own
    x = torch.rand(4, 1, 8, 8)
    torch.testing.assert_close(model(x), trainer.model.eval()(x), rtol=0, atol=0)


def test_the_banner_gives_the_batch_as_drawn(tmp_path, capsys):
    """Class-balanced batches of whole classes: digits' 10 classes at batch_size 128 and 4
    items per class draw 10 classes x 12 items, 120, and the banner says so, not 128."""
    argv = ["train", "--data", "digits", "--model", "mlp", "--epochs", "1", "--no-report"]
    assert main([*argv, "--no-progress", "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    expected = "batch 120 (class-balanced, 10 classes x 12 items: batch_size 128 rounded down"
    assert expected in out
    argv += ["--no-progress", "--batch-size", "40", "--out", str(tmp_path / "b")]
    assert main(argv) == 0
    assert "batch 40 (class-balanced, 10 classes x 4 items), " in capsys.readouterr().out
    assert "repeat" not in out
    # A class of fewer training items than a batch takes of it fills up with repeats.
    argv[argv.index("40")] = "1200"
    argv[-1] = str(tmp_path / "c")
    assert main(argv) == 0
    banner = capsys.readouterr().out
    assert "10 classes x 120 items; the smallest class has 1" in banner, banner
    assert "training items, so its items repeat within a batch" in banner
