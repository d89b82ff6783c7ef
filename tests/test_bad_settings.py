"""Settings that cannot go wrong silently (issue 37): every value is checked where it enters, in
one line naming the flag (or the ``--set``, or the ``--config`` file's line) and what it takes,
before any data is read or any run folder is made.

Every flag of ``train`` gets a value of the wrong type, a negative one, zero, NaN and an unknown
choice, where each is wrong for it; the numeric flags of the other verbs too. Nothing here trains:
``train_run`` is replaced by a tripwire for the refusals that come before the data.
"""

from __future__ import annotations

import json
import re
import sys
import types

import numpy as np
import pytest
import torch

from clusterable.cli import main
from clusterable.cli._settings import run_flags
from clusterable.data import load_dataset
from clusterable.data.registry import check_dataset_name
from clusterable.losses import EmbeddingLoss, build_loss
from clusterable.models import build_model
from clusterable.recipe import RunSpec, build_trainer
from clusterable.train import TrainConfig, Trainer
from clusterable.train.answerable import answerable_table
from clusterable.train.config import BOUNDS

TYPE, NEGATIVE, ZERO, NAN, CHOICE = "ten", "-1", "0", "nan", "nope"
NUMBER = (TYPE, NEGATIVE, NAN)  # wrong for every number; zero is wrong where the range says
POSITIVE = (TYPE, NEGATIVE, ZERO, NAN)
NAMES = (TYPE, NEGATIVE, ZERO, NAN, CHOICE)  # a registry or a fixed set: none of these is one

#: Each value-taking flag of ``train`` and the values it refuses (the others it takes).
REFUSED: dict[str, tuple[str, ...]] = {
    "--data": NAMES,
    "--label-view": NAMES,
    "--image-size": POSITIVE,
    "--augment": NAMES,
    "--channels": (*NAMES, "2"),
    "--loss": NAMES,
    "--model": (*NAMES, "resnet19", "timm:"),
    "--embedding-dim": POSITIVE,
    "--val-fraction": (*NUMBER, "1", "1.5"),
    "--pseudo-label-every": NUMBER,
    "--memory-size": NUMBER,
    "--epochs": NUMBER,  # 0: no training, for a pretrained backbone (tests/test_before_training.py)
    "--batch-size": POSITIVE,
    "--sampler": NAMES,
    "--items-per-class": POSITIVE,
    "--optimizer": NAMES,
    "--lr": (*POSITIVE, "-0.1", "inf"),
    "--head-lr-multiplier": POSITIVE,
    "--momentum": (*NUMBER, "1"),
    "--weight-decay": NUMBER,
    "--schedule": NAMES,
    "--warmup-epochs": NUMBER,
    "--grad-clip": POSITIVE,
    "--chunk-size": POSITIVE,
    "--eval-every": NUMBER,
    "--eval-metric": (*NAMES, "recall@l", "recall@0"),
    "--patience": NUMBER,
    "--checkpoint-every": NUMBER,
    "--keep-checkpoints": NUMBER,
    "--workers": NUMBER,
    "--num-workers": NUMBER,
    "--cache-images": NAMES,
    "--augment-on": NAMES,
    "--precision": NAMES,
    "--device": (*NAMES, "gpu"),
    "--seed": (*NUMBER, "4294967296"),
}

#: The keyword flags: the loss's, the model's and the sampler's own arguments.
KEYWORDS_REFUSED = {
    "--loss-arg": ("margin=wide", "margin=nan", "margin=inf", "margin=-1", "margn=1"),
    "--model-arg": (
        "hidden_dims=wide",
        "hidden_dims=nan",
        "hidden_dims=0",
        "hidden_dims=64,-1",
        "negative_slope=-1",
        "hiden_dims=8",
    ),
    "--sampler-arg": (
        "batches_per_epoch=ten",
        "batches_per_epoch=-1",
        "batches_per_epoch=0",
        "batches_per_epoch=nan",
        "pool_size=8",
    ),
}


@pytest.fixture
def no_training(monkeypatch):
    """A refusal must come before the run: a value let through fails here, quickly."""

    def tripwire(*args, **kwargs):
        raise AssertionError("a refused setting reached train_run")

    monkeypatch.setattr("clusterable.recipe.train_run", tripwire)
    monkeypatch.setattr("clusterable.tune.tune", tripwire)


#: Flags whose value is refused before the verb's settings are read, in the words of the module
#: that refuses it: ``--device`` by the device scope every verb enters first.
REFUSED_AS = {"--device": "device '"}


def names_flag(line: str, flag: str) -> bool:
    if flag in REFUSED_AS and REFUSED_AS[flag] in line:
        return True
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", line) is not None


def refusal(capsys, argv: list[str], flag: str) -> str:
    """The one error line of a refused command: exit 2, no traceback, the flag named. Besides it
    only argparse's usage lines may come (a type error found while parsing)."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1, err
    others = [line for line in err.splitlines() if ": error: " not in line]
    assert all(line.startswith(("usage:", " ")) for line in others), err
    assert names_flag(errors[0], flag), errors[0]
    return errors[0]


def test_every_value_flag_of_train_is_in_the_table():
    generated = {
        flag.flag
        for flag in run_flags()
        if flag.annotation is not bool and not flag.is_keywords and flag.name != "root"
    }
    assert generated == set(REFUSED)  # a new setting gets its row here
    keywords = {flag.flag for flag in run_flags() if flag.is_keywords}
    assert keywords == set(KEYWORDS_REFUSED)


@pytest.mark.parametrize(
    ("flag", "value"), [(flag, value) for flag, values in REFUSED.items() for value in values]
)
def test_a_wrong_value_of_a_train_flag_is_one_line_naming_it(
    flag, value, tmp_path, capsys, no_training
):
    out = tmp_path / "run"
    refusal(capsys, ["train", f"{flag}={value}", "--out", str(out)], flag)
    assert not out.exists()


@pytest.mark.parametrize(
    ("flag", "value"),
    [(flag, value) for flag, values in KEYWORDS_REFUSED.items() for value in values],
)
def test_a_wrong_keyword_of_a_train_flag_is_one_line_naming_it(
    flag, value, tmp_path, capsys, no_training
):
    out = tmp_path / "run"
    line = refusal(capsys, ["train", flag, value, "--out", str(out)], flag)
    assert value.partition("=")[0] in line
    assert not out.exists()


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_a_negative_training_setting_in_set_names_the_set(name, tmp_path, capsys, no_training):
    out = tmp_path / "run"
    line = refusal(capsys, ["train", "--set", f"{name}=-1", "--out", str(out)], "--set")
    assert f"--set {name}=-1 must be" in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("verb", "flag", "values"),
    [
        ("tune", "--trials", POSITIVE),
        ("tune", "--folds", (*POSITIVE, "1")),
        ("tune", "--lr", POSITIVE),
        ("tune", "--eval-metric", ("recall@l",)),
        ("evaluate", "--n-clusters", POSITIVE),
        ("evaluate", "--ks", (*POSITIVE, "1,,2", "1,x")),
        ("cluster", "--n-clusters", POSITIVE),
        ("cluster", "--k", POSITIVE),
        ("index", "--target-recall", (*POSITIVE, "1.5")),
        ("search", "-k", POSITIVE),
        ("reproduce", "--seeds", POSITIVE),
        *[
            (verb, "--seed", (*NUMBER, "4294967296"))
            for verb in ("demo", "evaluate", "embed", "cluster", "plot", "index", "search")
            + ("assign", "report", "export", "reproduce")
        ],
    ],
)
def test_a_wrong_number_for_another_verb_is_one_line_naming_its_flag(
    verb, flag, values, tmp_path, capsys, no_training
):
    for value in values:
        refusal(capsys, [verb, flag, value], flag)


def test_the_messages_the_audit_found_unclear_say_what_to_give(tmp_path, capsys, no_training):
    out = ["--out", str(tmp_path / "run")]
    val = refusal(capsys, ["train", "--val-fraction", "1.5", *out], "--val-fraction")
    assert "must be in [0, 1)" in val and "train_fraction" not in val
    warmup = refusal(capsys, ["train", "--warmup-epochs", "nan", *out], "--warmup-epochs")
    assert "not a finite number" in warmup and "integer" not in warmup
    margin = refusal(capsys, ["train", "--loss-arg", "margin=nan", *out], "--loss-arg")
    assert "margin=nan is not a finite number" in margin and "embeddings" not in margin
    assert "--lr -0.1 must be above 0" in refusal(capsys, ["train", "--lr", "-0.1", *out], "--lr")
    ks = refusal(capsys, ["evaluate", "--ks", "1,,2"], "--ks")
    assert "whole numbers of 1 or more" in ks and "invalid literal" not in ks
    clusters = refusal(capsys, ["cluster", "--n-clusters", "ten"], "--n-clusters")
    assert "or auto" in clusters and "n_clusters_flag" not in clusters
    grad = refusal(capsys, ["train", "--grad-clip", "-1", *out], "--grad-clip")
    assert "must be above 0, or none (no clipping)" in grad
    head = refusal(capsys, ["train", "--head-lr-multiplier", "-1", *out], "--head-lr-multiplier")
    assert "must be above 0" in head
    metric = refusal(capsys, ["train", "--eval-metric", "recall@l", *out], "--eval-metric")
    assert "did you mean recall@1?" in metric


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["--loss", "lifted", "--loss-arg", "margin=-1"],
            "--loss-arg margin=-1 must be at least 0",
        ),
        (["--loss", "msdnn", "--loss-arg", "sigma=0"], "--loss-arg sigma=0 must be above 0"),
        (["--loss", "center", "--loss-arg", "alpha=2"], "--loss-arg alpha=2 must be in (0, 1]"),
        (["--model", "mlp", "--model-arg", "hidden_dims=0"], "--model-arg hidden_dims=0 holds 0"),
    ],
    ids=["lifted-margin", "msdnn-sigma", "center-alpha", "mlp-width"],
)
def test_a_loss_or_model_argument_outside_its_range_is_refused_before_the_run(
    argv, words, tmp_path, capsys, no_training
):
    out = tmp_path / "run"
    line = refusal(capsys, ["train", *argv, "--out", str(out)], argv[-2])
    assert words in line, line
    assert not out.exists()


def test_a_path_that_is_not_there_is_not_called_an_unknown_dataset(tmp_path):
    missing = f"{tmp_path}/nope/"
    with pytest.raises(FileNotFoundError, match=r"no folder or file .* exists"):
        check_dataset_name(missing)
    with pytest.raises(FileNotFoundError, match="no folder or file"):
        load_dataset("../no-such-folder-here/")
    with pytest.raises(ValueError, match="did you mean digits"):
        check_dataset_name("digts")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--data", "no-such-set"], ["--data no-such-set", "unknown dataset"]),
        (["--loss-arg", "margn=1"], ["--loss-arg margn=1", "did you mean margin"]),
        (["--loss-arg", "margin=-1"], ["--loss-arg margin=-1", "must be at least 0"]),
        (["--data", "folder:/no/such/folder"], ["/no/such/folder", "does not exist"]),
    ],
    ids=["unknown-dataset", "unknown-loss-argument", "negative-margin", "missing-folder"],
)
def test_a_refused_run_leaves_no_run_folder(argv, words, tmp_path, capsys):
    out = tmp_path / "deeper" / "run"
    with pytest.raises(SystemExit) as stop:
        main(["train", *argv, "--out", str(out)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(word in err for word in words), err
    assert not (tmp_path / "deeper").exists()


# ---------------------------------------------------------------------------------------------
# Batches that cannot hold a pair, and a run that trains nothing


@pytest.mark.parametrize(
    ("argv", "flag", "words"),
    [
        (["--batch-size", "1"], "--batch-size", ["one item in each batch", "give 4 or more"]),
        (["--batch-size", "3"], "--batch-size", ["too few for two classes", "give 4 or more"]),
        (
            ["--batch-size", "1", "--sampler", "random"],
            "--batch-size",
            ["one item in each batch", "give 2 or more"],
        ),
        (["--items-per-class", "500"], "--items-per-class", ["one class", "at most 64"]),
        (
            ["--batch-size", "8", "--items-per-class", "1"],
            "--items-per-class",
            ["no positive pair", "2 or more"],
        ),
    ],
    ids=["batch-of-one", "batch-of-three", "random-batch-of-one", "one-class", "one-item-each"],
)
def test_batches_without_a_pair_are_refused_before_training(argv, flag, words, tmp_path, capsys):
    out = tmp_path / "run"
    line = refusal(capsys, ["train", "--loss", "lifted", *argv, "--out", str(out)], flag)
    assert all(word in line for word in words), line
    assert not out.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["--batch-size", "64"],  # the default 128 dimensions
        ["--batch-size", "16", "--embedding-dim", "16"],  # as many items as dimensions
        ["--batch-size", "16", "--embedding-dim", "16", "--autoencoder"],  # wrapped, the same
    ],
    ids=["fewer-items", "as-many", "autoencoder"],
)
def test_spectral_batches_of_no_more_items_than_dimensions_are_refused(argv, tmp_path, capsys):
    """DSCL's loss is 0 with a zero gradient where ``n <= d`` (``F F^+`` is the identity): the
    audit's run at the defaults (batch 128, 128 dimensions) logged a loss of -0.0000 and kept its
    untrained weights."""
    out = tmp_path / "run"
    line = refusal(
        capsys, ["train", "--loss", "spectral", *argv, "--out", str(out)], "--batch-size"
    )
    assert "embedding dimensions" in line and "no step would train" in line, line
    assert not out.exists()


def test_spectral_is_constant_on_a_batch_of_no_more_items_than_dimensions():
    """Why the refusal holds: at ``n <= d`` the loss and its gradient are 0 for any embeddings;
    one item more than dimensions and it trains."""
    labels = torch.arange(4).repeat(4)  # (16,)
    loss = build_loss("spectral")
    for n_dims, trains in ((16, False), (32, False), (8, True)):
        embeddings = torch.randn(16, n_dims, dtype=torch.float64, requires_grad=True)
        value = loss(embeddings, labels)
        value.backward()
        assert (abs(float(value.detach())) > 1e-6) is trains
        assert (float(embeddings.grad.abs().max()) > 1e-6) is trains


def test_a_spectral_batch_above_the_dimensions_is_taken():
    train = load_dataset("digits", split="train").subset(np.arange(200))
    spec = RunSpec(data="digits", model="mlp", loss="spectral", embedding_dim=16)
    build_trainer(spec, TrainConfig(batch_size=17, sampler="random", progress=False), train)
    with pytest.raises(ValueError, match="batch_size=16 is not above the 16 embedding dimensions"):
        build_trainer(spec, TrainConfig(batch_size=16, progress=False), train)


def test_a_loss_without_pairs_needs_none():
    train = load_dataset("digits", split="train").subset(np.arange(100))
    model = build_model("mlp", train.input_shape, 4)
    config = TrainConfig(batch_size=1, epochs=1, progress=False)
    loss = build_loss("cross-entropy", num_classes=10, embedding_dim=4)
    Trainer(model, loss, train, config=config)  # a classifier trains on a batch of one


class NothingToLearn(EmbeddingLoss):
    def compute(self, embeddings, labels):
        return embeddings.sum() * 0.0


def test_a_run_whose_every_step_is_zero_is_reported_not_scored(tmp_path):
    train = load_dataset("digits", split="train").subset(np.arange(96))
    model = build_model("mlp", train.input_shape, 4)
    config = TrainConfig(epochs=2, batch_size=32, progress=False, eval_every=0)
    trainer = Trainer(model, NothingToLearn(), train, config=config, out=tmp_path)
    with pytest.raises(ValueError, match=r"every one of the 6 training steps had loss 0"):
        trainer.fit()
    assert not (tmp_path / "result.json").exists()


# ---------------------------------------------------------------------------------------------
# Small folders and a validation that cannot be computed


def write_photos(root, per_class: int, classes: int = 3) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in range(classes):
        (root / f"class{c}").mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.integers(0, 255, (12, 12, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / f"class{c}" / f"{i}.png")


@pytest.mark.parametrize(
    ("per_class", "words"),
    [
        (1, ["1 train, 0 validation, 0 test", "no class of the training split"]),
        (2, ["1 train, 0 validation, 1 test", "no class of the test split"]),
        (5, ["3 train, 1 validation, 1 test", "single items score 100 %"]),
    ],
)
def test_a_folder_of_a_few_photos_per_class_is_one_message(per_class, words, tmp_path, capsys):
    write_photos(tmp_path / "photos", per_class)
    out = tmp_path / "run"
    argv = ["train", "--data", f"folder:{tmp_path / 'photos'}", "--model", "corel-cnn"]
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--batch-size", "6", "--out", str(out)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "smallest class 'class0'" in err and "at least 6 per class" in err
    assert all(word in err for word in words), err
    assert not out.exists()


def test_a_silhouette_no_partition_can_have_is_left_out_with_a_note():
    singletons = answerable_table(np.arange(4))
    assert "silhouette" not in singletons.metrics
    assert any("silhouette left out: 4 cluster(s) of 4 item(s)" in n for n in singletons.notes)
    pairs = answerable_table(np.array([0, 0, 1, 1]))  # k = 2 of 4 items: it has one
    assert pairs.metrics is None and not any("silhouette" in n for n in pairs.notes)


def test_a_validation_of_single_items_logs_no_nan_and_says_there_is_no_best_epoch(tmp_path):
    data = load_dataset("digits", split="train")
    train = data.subset(np.arange(200))
    val = data.subset([int(np.flatnonzero(data.labels == c)[-1]) for c in range(10)])
    model = build_model("mlp", train.input_shape, 4)
    config = TrainConfig(epochs=1, batch_size=40, progress=False)
    Trainer(model, build_loss("contrastive"), train, val, config=config, out=tmp_path).fit()

    def strict(constant):
        raise ValueError(f"{constant} is not JSON")

    records = [json.loads(line, parse_constant=strict) for line in open(tmp_path / "log.jsonl")]
    notes = " ".join(r["note"] for r in records if r["event"] == "note")
    assert "silhouette left out" in notes and "retrieval metrics left out" in notes
    assert "recall@1 (the eval_metric) is not in the validation table" in notes
    epoch = next(r for r in records if r["event"] == "epoch")
    assert "silhouette" not in epoch and "recall@1" not in epoch


def test_a_validation_without_its_metric_says_why_on_the_console(tmp_path, capsys):
    """The audit's photo folder held 3 validation items, one a class: its epoch lines had no
    validation figure and nothing on the console said why (the notes went to log.jsonl only)."""
    data = load_dataset("digits", split="train")
    train = data.subset(np.arange(200))
    val = data.subset([int(np.flatnonzero(data.labels == c)[-1]) for c in range(3)])
    model = build_model("mlp", train.input_shape, 4)
    config = TrainConfig(epochs=2, batch_size=40, progress=False, verbose=True)
    Trainer(model, build_loss("contrastive"), train, val, config=config, out=tmp_path).fit()
    printed = capsys.readouterr().out.splitlines()
    notes = [line for line in printed if line.startswith("validation: ")]
    assert any("retrieval metrics left out" in line for line in notes), printed
    assert any("no epoch is the best" in line for line in notes), printed
    assert len(notes) == len(set(notes))  # each once, not once an epoch
    first_epoch = next(i for i, line in enumerate(printed) if line.startswith("epoch 1/2"))
    assert printed.index(notes[-1]) < first_epoch


# ---------------------------------------------------------------------------------------------
# Backbone names and arguments: timm's and torchvision's own, with a "did you mean"


@pytest.fixture
def fake_timm(monkeypatch):
    timm = types.ModuleType("timm")
    timm.list_models = lambda: ["resnet18", "resnet50", "vit_base_patch16_224"]
    monkeypatch.setitem(sys.modules, "timm", timm)
    return timm


def test_a_timm_name_timm_does_not_list_gets_the_closest(fake_timm, tmp_path, capsys, no_training):
    with pytest.raises(
        ValueError, match=r"timm has no model 'resnet19'; did you mean timm:resnet18"
    ):
        RunSpec(model="timm:resnet19")
    assert RunSpec(model="timm:resnet50.a1_in1k").model == "timm:resnet50.a1_in1k"  # NAME.TAG
    line = refusal(capsys, ["train", "--model", "timm:vit_base"], "--model")
    assert "did you mean timm:vit_base_patch16_224?" in line


def test_a_torchvision_name_torchvision_does_not_list_gets_the_closest(monkeypatch):
    package = types.ModuleType("torchvision")
    package.models = types.SimpleNamespace(list_models=lambda: ["resnet18", "googlenet"])
    monkeypatch.setitem(sys.modules, "torchvision", package)
    monkeypatch.setitem(sys.modules, "torchvision.models", package.models)
    with pytest.raises(ValueError, match="torchvision has no model 'resnet19'; did you mean"):
        RunSpec(model="torchvision:resnet19")


def test_pretrained_is_no_backbone_argument_and_a_refused_argument_names_the_model(
    fake_timm, monkeypatch, tmp_path, capsys, no_training
):
    line = refusal(capsys, ["train", "--model", "timm:resnet18", "--model-arg", "pretrained=true"],
                   "--model-arg")  # fmt: skip
    assert "weights=PATH" in line
    package = types.ModuleType("torchvision")

    def get_model(arch, weights=None, **kwargs):
        raise TypeError(
            f"ResNet.__init__() got an unexpected keyword argument {next(iter(kwargs))!r}"
        )

    package.models = types.SimpleNamespace(get_model=get_model)
    monkeypatch.setitem(sys.modules, "torchvision", package)
    monkeypatch.setitem(sys.modules, "torchvision.models", package.models)
    with pytest.raises(ValueError, match=r"model 'torchvision:resnet18' refused its arguments"):
        build_model("torchvision:resnet18", (3, 32, 32), 8, zero_init=True)


def test_a_builtin_model_name_and_argument_get_the_closest(capsys, no_training):
    assert "did you mean lenet?" in refusal(capsys, ["train", "--model", "lenett"], "--model")
    line = refusal(capsys, ["train", "--model-arg", "hiden_dims=8"], "--model-arg")
    assert "did you mean hidden_dims?" in line


# ---------------------------------------------------------------------------------------------
# YAML: one line naming the file and the line


@pytest.mark.parametrize("verb", ["train", "tune"])
def test_a_yaml_syntax_error_is_one_line_naming_file_and_line(verb, tmp_path, capsys, no_training):
    config = tmp_path / "run.yaml"
    config.write_text("loss: lifted\ntrain:\n  lr: [1e-3\n  epochs: 2\n")
    with pytest.raises(SystemExit) as stop:
        main([verb, "--config", str(config), "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{config}, line 4" in err
    with pytest.raises(ValueError, match=rf"{re.escape(str(config))}, line 4"):
        TrainConfig.from_yaml(config)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("loss: lifted\ntrain:\n  epochs: 2\n  grad_clip: -1\n", 4, ["grad_clip=-1", "above 0"]),
        ("val_fraction: 1.5\n", 1, ["val_fraction=1.5", "[0, 1)"]),
        ("loss_args:\n  margin: .nan\n", 2, ["margin=nan", "finite"]),
        ("train:\n  eval_metric: recall@l\n", 2, ["eval_metric='recall@l'", "recall@1?"]),
        ("- a list\n", 1, ["not a mapping"]),
    ],
)
def test_a_refused_value_in_a_config_file_names_its_line(
    text, line, words, tmp_path, capsys, no_training
):
    config = tmp_path / "run.yaml"
    config.write_text(text)
    error = refusal(capsys, ["train", "--config", str(config)], str(config))
    assert f"{config}, line {line}" in error and all(w in error for w in words), error


@pytest.mark.parametrize(
    ("verb", "text", "line", "key"),
    [
        ("train", "loss: lifted\ntrain:\n  lr: 0.1\n  epochs: 2\n  lr: 0.001\n", 5, "lr"),
        ("train", "loss: lifted\nloss: contrastive\n", 2, "loss"),
        ("tune", "loss: lifted\ntrain:\n  lr: 0.1\n  epochs: 2\n  lr: 0.001\n", 5, "lr"),
        (
            "tune",
            "loss: contrastive\nsearch:\n  margin: {log: [0.1, 2]}\n  margin: {float: [0.1, 2]}\n",
            4,
            "margin",
        ),
    ],
    ids=["train-setting", "train-run-key", "tune-setting", "tune-search"],
)
def test_a_setting_given_twice_in_a_config_file_is_one_line_naming_it(
    verb, text, line, key, tmp_path, capsys, no_training
):
    """YAML kept the last of the two without a word: the `lr: 0.1` a reader sees trained at
    0.001."""
    config = tmp_path / "run.yaml"
    config.write_text(text)
    with pytest.raises(SystemExit) as stop:
        main([verb, "--config", str(config), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{config}, line {line}: {key} is set twice (also on line" in err, err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match=rf"{re.escape(str(config))}, line {line}: {key} is set"):
        TrainConfig.from_yaml(config)


@pytest.mark.parametrize(
    ("argv", "flag", "words"),
    [
        (["train", "--set", "lr=[1"], "--set", "the value is not YAML"),
        (["train", "--loss-arg", "margin=[1"], "--loss-arg", "the value is not YAML"),
        (["train", "--set", "lr={a: 1, a: 2}"], "--set", "a is set twice"),
    ],
    ids=["set", "loss-arg", "a-key-twice"],
)
def test_a_flag_value_that_is_not_yaml_is_one_line_naming_the_flag(
    argv, flag, words, capsys, no_training
):
    """`--set lr=[1` ended in a YAML traceback."""
    error = refusal(capsys, argv, flag)
    assert words in error, error


def test_train_config_from_yaml_names_the_line_of_a_refused_value(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("epochs: 3\nlr: -1e-3\n")
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}, line 2: .*lr=-0.001"):
        TrainConfig.from_yaml(path)


# ---------------------------------------------------------------------------------------------
# Upstream: HDBSCAN's cluster_selection_epsilon under NumPy 2.4 (scikit-learn #33219)


def test_hdbscan_epsilon_failing_in_scikit_learn_says_what_to_do(monkeypatch):
    from sklearn.cluster import HDBSCAN

    from clusterable.cluster.hdbscan import hdbscan

    def broken(self, x, y=None):
        raise TypeError("only 0-dimensional arrays can be converted to Python scalars")

    monkeypatch.setattr(HDBSCAN, "fit", broken)
    points = np.random.default_rng(0).normal(size=(40, 2))
    with pytest.raises(ValueError, match=r"#33219.*cluster_selection_epsilon=0"):
        hdbscan(points, cluster_selection_epsilon=0.5)
    with pytest.raises(TypeError):  # without epsilon the library's own error is not masked
        hdbscan(points)


def test_samplers_say_why_their_batches_hold_no_pair():
    from clusterable.mining.samplers import (
        ClassBalancedBatchSampler,
        RandomBatchSampler,
        pairs_shortfall_of_labels,
    )

    labels = np.repeat(np.arange(5), 6)
    assert ClassBalancedBatchSampler(labels, 2, 2).pair_shortfall() is None
    setting, why, remedy = ClassBalancedBatchSampler(labels, 1, 8).pair_shortfall()
    assert setting == "items_per_class" and "no negative" in why and "at most 4" in remedy
    setting, why, _ = ClassBalancedBatchSampler(labels, 5, 1).pair_shortfall()
    assert setting == "items_per_class" and "no positive pair" in why
    assert RandomBatchSampler(30, batch_size=1).pair_shortfall()[0] == "batch_size"
    assert "1 class(es)" in pairs_shortfall_of_labels(np.zeros(6, dtype=int))
    assert "holds one item" in pairs_shortfall_of_labels(np.arange(6))
    assert pairs_shortfall_of_labels(np.array([0, 0, 1, -1])) is None


def test_valid_edges_of_the_ranges_are_taken():
    assert TrainConfig(eval_metric="recall@16").eval_metric == "recall@16"
    assert TrainConfig(eval_metric="classification_accuracy", momentum=0, weight_decay=0)
    assert TrainConfig(grad_clip="none", patience=0, seed=2**32 - 1).seed
    assert TrainConfig(eval_every=0).eval_every == 0  # with patience, refused: never evaluated
    assert RunSpec(val_fraction=0, memory_size=0, channels=None).val_fraction == 0


# ---------------------------------------------------------------------------------------------
# Settings that the rest of the run would ignore, or with which it trains another way (audit 2)


@pytest.mark.parametrize(
    ("argv", "flag", "words"),
    [
        (["--pseudo-label-every", "1"], "--pseudo-label-every", ["add unsupervised"]),
        (
            ["--loss", "center", "--memory-size", "256"],
            "--memory-size",
            ["'center' takes no partners", "leave memory_size 0", "contrastive"],
        ),
        (["--embedding-dim", "1", "--normalize"], "--embedding-dim", ["-1 or +1"]),
        (["--patience", "2", "--eval-every", "0"], "--patience", ["eval_every 1 or more"]),
        (["--no-amp", "--precision", "bf16"], "--amp", ["give precision alone"]),
        (["--epochs", "1", "--warmup-epochs", "5"], "--warmup-epochs", ["at most 1"]),
        (["--no-eval-embeddings"], "eval_metric", ["turn eval_embeddings on"]),
    ],
    ids=[
        "pseudo-labels-supervised",
        "memory-for-center",
        "one-normalised-dimension",
        "patience-never-evaluated",
        "no-amp-bf16",
        "warm-up-beyond-the-run",
        "metric-never-computed",
    ],
)
def test_a_setting_the_run_would_ignore_is_refused_before_the_data(
    argv, flag, words, tmp_path, capsys, no_training
):
    """The audit's runs trained, each ignoring one setting: pseudo-labels never recomputed,
    patience never stopping, bf16 despite ``--no-amp``, a warm-up squeezed into the run, no
    epoch the best; a memory for the centre loss failed after the data, 1-d unit embeddings
    trained to two points."""
    out = tmp_path / "run"
    line = refusal(capsys, ["train", *argv, "--out", str(out)], flag)
    assert all(word in line for word in words), line
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "flag", "words"),
    [
        (
            ["--eval-metric", "classification_accuracy"],
            "--eval-metric",
            ["LiftedStructureLoss has none", "cross-entropy"],
        ),
        (["--val-fraction", "0", "--patience", "2"], "--patience", ["no validation split"]),
        (["--unsupervised", "--patience", "1"], "--patience", ["leave patience out"]),
    ],
    ids=[
        "accuracy-without-classifier",
        "patience-no-validation",
        "patience-unsupervised",
    ],
)
def test_a_setting_the_data_or_loss_cannot_honour_is_refused_before_training(
    argv, flag, words, tmp_path, capsys
):
    """The audit: a lifted run validated by classification accuracy had no best epoch; a run
    without a validation split ignored its patience."""
    out = tmp_path / "run"
    line = refusal(capsys, ["train", "--epochs", "1", *argv, "--out", str(out)], flag)
    assert all(word in line for word in words), line
    assert not (out / "log.jsonl").exists()


@pytest.mark.parametrize(
    ("argv", "flag", "words"),
    [
        (["--precision", "fp16", "--device", "cpu"], "--precision", ["needs a CUDA device"]),
        (["--model", "mlp", "--freeze-batchnorm"], "--freeze-batchnorm", ["has no BatchNorm"]),
    ],
    ids=["fp16-on-the-cpu", "frozen-batchnorm-of-mlp"],
)
def test_a_setting_this_machine_or_model_cannot_run_is_refused_before_the_data(
    argv, flag, words, tmp_path, capsys, monkeypatch
):
    """The audit: fp16 on the CPU and frozen BatchNorm of a model without any were refused only
    once the data had loaded and the model was built."""

    def tripwire(*args, **kwargs):
        raise AssertionError("the data was read before the refusal")

    monkeypatch.setattr(RunSpec, "load", tripwire)
    out = tmp_path / "run"
    line = refusal(capsys, ["train", "--epochs", "1", *argv, "--out", str(out)], flag)
    assert all(word in line for word in words), line
    assert not out.exists()


def test_a_default_the_run_cannot_train_with_is_named_by_its_flag(tmp_path, capsys):
    """DSCL's spectral loss at the defaults: batch 128, 128 dimensions. The refusal named the
    field (``training setting batch_size=128``), which no command line user typed."""
    out = tmp_path / "run"
    line = refusal(capsys, ["train", "--loss", "spectral", "--out", str(out)], "--batch-size")
    assert "--batch-size 128 (its default) is not above the 128 embedding dimensions" in line
    assert not (out / "log.jsonl").exists()


def test_settings_next_to_those_refused_still_train():
    TrainConfig(patience=2, eval_every=1, warmup_epochs=3, epochs=3, amp=False, precision="32")
    TrainConfig(eval_embeddings=False, eval_metric="classification_accuracy")
    RunSpec(loss="lifted", memory_size=64, embedding_dim=1)
    RunSpec(unsupervised=True, loss="opml", pseudo_label_every=2)
    train = load_dataset("digits", split="train").subset(np.arange(100))
    spec = RunSpec(loss="cross-entropy", embedding_dim=8)
    config = TrainConfig(batch_size=100, eval_metric="classification_accuracy", progress=False)
    build_trainer(spec, config, train, train)


def test_a_diverging_run_names_lr_in_one_line(tmp_path, capsys):
    argv = ["train", "--data", "digits", "--model", "mlp", "--epochs", "1", "--no-report"]
    argv += ["--lr", "1e30", "--optimizer", "sgd", "--out", str(tmp_path / "run")]
    line = refusal(capsys, argv, "--lr")
    assert "made the training diverge at epoch 1, step" in line and "lower it" in line


def _out_of_memory(*args, **kwargs):
    raise torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB"
    )


def test_a_batch_the_gpu_cannot_hold_names_batch_size_in_one_line(tmp_path, capsys, monkeypatch):
    """A step out of GPU memory ended in a traceback of torch's allocator; it names the flag,
    the step, the allocator's words and what else lowers a step's memory."""
    monkeypatch.setattr("clusterable.train.trainer.whole_batch_backward", _out_of_memory)
    argv = ["train", "--data", "digits", "--model", "mlp", "--epochs", "1", "--no-report"]
    line = refusal(capsys, [*argv, "--out", str(tmp_path / "run")], "--batch-size")
    said = "does not fit in the memory of cpu at epoch 1, step 1 (CUDA out of memory"
    assert f"--batch-size 128 (its default) {said}" in line, line
    assert "--chunk-size N (the same gradient" in line and "--precision bf16" in line


def test_other_work_out_of_gpu_memory_is_one_line(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    argv = ["train", "--data", "digits", "--model", "mlp", "--epochs", "1", "--no-report"]
    assert main([*argv, "--no-progress", "--out", str(run)]) == 0
    capsys.readouterr()
    monkeypatch.setattr("clusterable.trained_run.TrainedRun.embed", _out_of_memory)
    line = refusal(capsys, ["embed", str(run), "--out", str(tmp_path / "emb")], "--device")
    assert "CUDA out of memory: free the GPU of other work, or run this on the CPU" in line
