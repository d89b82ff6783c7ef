"""ONNX and TorchScript export: parity with PyTorch for every built-in model, dynamic batch."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from clusterable.export import PARITY_TOLERANCE, export_model, export_run
from clusterable.models import available_models, build_model
from clusterable.recipe import RunSpec, load_trained, train_run
from clusterable.train.config import TrainConfig

SHAPES = {"mlp": (20,), "corel-cnn": (1, 28, 28), "lenet": (1, 28, 28), "msdnn-cnn": (1, 28, 28)}


def run_exported(path, fmt, batch: np.ndarray) -> np.ndarray:
    """The exported file's output, run by its own runtime, not by clusterable."""
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return session.run(None, {"input": batch})[0]
    with torch.no_grad():
        return torch.jit.load(str(path))(torch.from_numpy(batch)).numpy()


def test_every_built_in_model_has_a_shape_here():
    assert set(available_models()) == set(SHAPES)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_export_matches_pytorch_at_a_new_batch_size(tmp_path, name, fmt):
    torch.manual_seed(0)
    model = build_model(name, SHAPES[name], 16, normalize=name == "lenet").eval()
    path = export_model(model, SHAPES[name], tmp_path / name, fmt)
    batch = torch.rand(7, *SHAPES[name])
    with torch.no_grad():
        expected = model(batch).numpy()
    np.testing.assert_allclose(run_exported(path, fmt, batch.numpy()), expected, atol=1e-5)
    sidecar = json.loads(path.with_name(path.name + ".json").read_text())
    assert sidecar["input"]["shape"] == ["batch", *SHAPES[name]]
    assert sidecar["output"]["shape"] == ["batch", 16]
    assert sidecar["parity_max_abs_difference"] <= PARITY_TOLERANCE


class FrozenBatch(nn.Module):
    """Reads the batch size as a Python int, which tracing freezes into the graph."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1) * int(x.shape[0])


def test_a_run_is_exported_from_the_cpu_whatever_device_it_trained_on(
    digits_run, tmp_path, monkeypatch, capsys
):
    """The trained model is loaded on the CPU (the file names no device, and the parity check
    compares IEEE float32 on both sides), and the verb takes no --device it would ignore."""
    from clusterable import trained_run
    from clusterable.cli import main

    devices, load = [], trained_run.TrainedRun.load.__func__

    def recording_load(cls, run, **kwargs):
        devices.append(kwargs.get("device"))
        return load(cls, run, **kwargs)

    monkeypatch.setattr(trained_run.TrainedRun, "load", classmethod(recording_load))
    export_run(digits_run, tmp_path / "m", "torchscript")
    assert [torch.device(d) for d in devices] == [torch.device("cpu")]
    with pytest.raises(SystemExit):
        main(["export", str(digits_run), "--out", str(tmp_path / "n.pt"), "--device", "cuda"])
    assert "--device" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_model_on_a_gpu_with_tf32_convolutions_exports_from_a_cpu_copy(tmp_path):
    """TF32 convolutions (PyTorch's default on CUDA) differ from the CPU's float32 by about
    1e-3: the parity check runs on a CPU copy, and the caller's model stays on its device."""
    model = build_model("corel-cnn", SHAPES["corel-cnn"], 16).cuda()
    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        path = export_model(model, SHAPES["corel-cnn"], tmp_path / "cnn", "onnx")
    finally:
        torch.backends.cudnn.allow_tf32 = tf32
    assert next(model.parameters()).is_cuda
    sidecar = json.loads(path.with_name(path.name + ".json").read_text())
    assert sidecar["parity_max_abs_difference"] <= PARITY_TOLERANCE


def test_a_missing_onnxruntime_is_named_before_the_run_is_loaded(digits_run, tmp_path, monkeypatch):
    """The parity check needs onnxruntime: said before any model is loaded or file written."""
    import sys

    from clusterable import trained_run

    def no_loading(*args, **kwargs):
        raise AssertionError("the run was loaded before the packages were checked")

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime: ImportError
    monkeypatch.setattr(trained_run.TrainedRun, "load", no_loading)
    with pytest.raises(ImportError, match="onnxruntime"):
        export_run(digits_run, tmp_path / "m", "onnx")
    with pytest.raises(ImportError, match="onnxruntime"):
        export_model(nn.Linear(4, 2), (4,), tmp_path / "n", "onnx")
    assert list(tmp_path.iterdir()) == []


def test_an_export_that_differs_from_pytorch_is_refused_and_not_written(tmp_path):
    with pytest.warns(torch.jit.TracerWarning), pytest.raises(RuntimeError, match="differs from"):
        export_model(FrozenBatch(), (4,), tmp_path / "frozen", "torchscript")
    assert list(tmp_path.iterdir()) == []


def test_unknown_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="'onnx' or 'torchscript'"):
        export_model(nn.Linear(2, 2), (2,), tmp_path / "m", "tflite")


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    """A digits run of the mlp, one epoch."""
    run = tmp_path_factory.mktemp("export") / "run"
    spec = RunSpec(data="digits", model="mlp", loss="contrastive", embedding_dim=8)
    config = TrainConfig(epochs=1, batch_size=64, progress=False, eval_every=0)
    train_run(spec, config, out=run)
    return run


def test_export_run_describes_the_runs_input(digits_run, tmp_path):
    path = export_run(digits_run, tmp_path / "digits-mlp", "onnx")
    sidecar = json.loads(path.with_name(path.name + ".json").read_text())
    assert sidecar["input"]["shape"] == ["batch", 1, 8, 8]
    assert (sidecar["data"], sidecar["model"], sidecar["embedding_dim"]) == ("digits", "mlp", 8)
    view = sidecar["preprocessing"]
    assert (view["channels"], view["size"], view["normalisation"]) == ("grayscale", [8, 8], "none")
    assert "[0, 1]" in view["layout"] and "aspect ratio not kept" in view["resize"]
    assert "load_digits().images (pixel values 0..16) / 16" in view["data_items"]
    batch = np.random.default_rng(0).random((5, 1, 8, 8), dtype=np.float32)
    model = load_trained(digits_run)[0]
    with torch.no_grad():
        expected = model(torch.from_numpy(batch)).numpy()
    np.testing.assert_allclose(run_exported(path, "onnx", batch), expected, atol=1e-5)


def test_an_exported_run_names_its_run_and_the_checksum_model_json_gives(digits_run, tmp_path):
    """The description tells which run and which weights made the file: the run folder and the
    checkpoint, each as itself, whether the run folder or its checkpoint is exported (a
    checkpoint copied out of its run has no run folder: null); the checksum is the one `embed`
    writes in model.json."""
    from clusterable.trained_run import TrainedRun

    trained = TrainedRun.load(digits_run, device="cpu")
    identity = trained.identity()
    checkpoint = Path(trained.checkpoint).resolve()
    lone = tmp_path / "lone-checkpoint"
    shutil.copytree(checkpoint, lone)
    for given, run, weights in (
        (digits_run, identity.run, checkpoint),
        (trained.checkpoint, str(digits_run.resolve()), checkpoint),
        (lone, None, lone),
    ):
        path = export_run(given, tmp_path / "m", "torchscript")
        sidecar = json.loads(path.with_name(path.name + ".json").read_text())
        assert (sidecar["run"], sidecar["checkpoint"]) == (run, str(weights)), given
        assert sidecar["model_checksum"] == identity.model


def test_export_seeds_its_parity_batch_with_seed(digits_run, tmp_path, monkeypatch):
    from clusterable import export
    from clusterable.cli import main

    seeds = []
    monkeypatch.setattr(export, "export_model", lambda *a, seed, **k: seeds.append(seed) or a[2])
    assert main(["export", str(digits_run), "--out", str(tmp_path / "m.onnx"), "--seed", "7"]) == 0
    assert seeds == [7]


def test_a_grayscale_runs_description_is_the_view_its_images_get(tmp_path):
    """The conversion to grayscale is PIL's luma, before the resize: what export tells a
    deployer is, pixel for pixel, what the run's own image files give its model."""
    from PIL import Image

    from clusterable.data import ImageFiles
    from clusterable.trained_run import TrainedRun

    flat = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(20 * 30, 4))
    spec = RunSpec(data="folder:photos", model="mlp", channels=1, image_size=20)
    view = TrainedRun(flat, (1, 20, 30), spec=spec, device="cpu").view_description()
    assert view["decode"].startswith("Image.open(file).convert('L'), before resizing")
    assert "image.resize((30, 20), Image.Resampling.BILINEAR)" in view["resize"]
    assert "(np.asarray(image, np.float32) / 255)[None]" in view["layout"]
    assert "data_items" not in view  # a folder's items are its files, described above
    path = tmp_path / "photo.jpg"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (70, 45, 3), np.uint8)).save(path)
    image = Image.open(path).convert("L").resize((30, 20), Image.Resampling.BILINEAR)
    by_hand = (np.asarray(image, np.float32) / 255)[None]
    np.testing.assert_array_equal(ImageFiles([path], (20, 30), 1)[0], by_hand)


def test_a_backbone_runs_description_is_the_view_its_images_get(tmp_path):
    """What export tells a deployer (resize the shorter side, crop the centre) is, pixel for
    pixel, what the run's own image files give its model."""
    from PIL import Image

    from clusterable.data import ImageFiles
    from clusterable.data.transforms import backbone_preprocessing
    from clusterable.trained_run import TrainedRun

    spec = RunSpec(model="timm:resnet18", image_size=48)
    flat = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 48 * 48, 4))
    view = TrainedRun(flat, (3, 48, 48), spec=spec, device="cpu").view_description()
    assert view["size"] == [48, 48] and view["channels"] == "RGB"
    # "shorter side resized (bicubic) to 50 px, ...": timm's resnet18 config is bicubic, crop 0.95
    interpolation, _, rest = view["resize"].split("resized (")[1].partition(") to ")
    resize = int(rest.split(" px")[0])
    resampling = {"bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC}
    assert "centre 48x48 cropped" in view["resize"] and "mean" in view["normalisation"]
    rng = np.random.default_rng(0)
    path = tmp_path / "wide.png"
    Image.fromarray(rng.integers(0, 255, (70, 120, 3), dtype=np.uint8)).save(path)
    image = Image.open(path).convert("RGB")
    width, height = image.size
    scaled = image.resize((int(resize * width / height), resize), resampling[interpolation])
    left, top = round((scaled.width - 48) / 2), round((scaled.height - 48) / 2)
    by_hand = np.asarray(scaled.crop((left, top, left + 48, top + 48)), np.float32) / 255
    files = ImageFiles([path], 48, 3, preprocessing=backbone_preprocessing(spec.model))
    np.testing.assert_allclose(files[0], by_hand.transpose(2, 0, 1), atol=1e-6)


def test_an_onnx_export_prints_none_of_the_exporters_own_lines(tmp_path, capfd):
    """The audit saw four "torchvision is not installed. Skipping torchvision::..." log lines and
    torch's deprecation of its own ``LeafSpec`` test around a successful export; none concerns
    the user's model."""
    import importlib.util
    import warnings

    torch.manual_seed(0)
    model = build_model("mlp", (1, 8, 8), 8).eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        export_model(model, (1, 8, 8), tmp_path / "mlp", "onnx")
    assert not [w for w in caught if "LeafSpec" in str(w.message)]
    said = capfd.readouterr()
    assert "Skipping torchvision" not in said.err and "LeafSpec" not in said.err, said.err
    if importlib.util.find_spec("torchvision") is None:  # the lines are torch's, on this setup
        logger = logging.getLogger("torch.onnx._internal.exporter._registration")
        assert logger.level == logging.NOTSET  # put back as it was


def damaged(run: Path, how: str) -> Path:
    """What is given for ``run`` damaged ``how``: one of its files, or the run itself."""
    checkpoint = run / "checkpoints" / "epoch-0001"
    if how == "weights-file":
        return checkpoint / "weights.safetensors"
    if how == "run-json":
        return run / "run.json"
    if how == "pointer-to-a-deleted-checkpoint":
        shutil.rmtree(checkpoint)
    else:  # damaged-weights
        (checkpoint / "weights.safetensors").write_bytes(b"cut")
    return run


@pytest.mark.parametrize(
    "how, says",
    [
        ("weights-file", "is a file: a checkpoint is a folder"),
        ("run-json", "give its folder, "),
        ("pointer-to-a-deleted-checkpoint", "names checkpoint epoch-0001, but"),
        ("damaged-weights", "is damaged or cut short"),
    ],
)
def test_a_run_without_a_readable_model_is_refused_in_one_line(
    digits_run, tmp_path, capsys, how, says
):
    """A file of a run instead of its folder, or a run whose checkpoint is gone or damaged:
    one line that says what to give (no traceback, nothing written)."""
    from clusterable.cli import main

    run = tmp_path / "run"
    shutil.copytree(digits_run, run)
    with pytest.raises(SystemExit) as stop:
        main(["export", str(damaged(run, how)), "--out", str(tmp_path / "m.onnx")])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and "\n" not in err, err
    assert err.startswith("clusterable export: error:") and says in err, err
    assert not (tmp_path / "m.onnx").exists()
