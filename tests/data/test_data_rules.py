"""The data rules the README states: explicit roots, image size and channels, table errors that
name row and column, NaN and corrupt files refused at load time."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from clusterable.cli import main
from clusterable.data import load_dataset
from clusterable.data.generic import _jpeg_is_cut_short


def one_line_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_an_explicit_root_without_the_files_never_falls_back(
    tmp_path, write_mnist_dir, monkeypatch, capsys
):
    system = tmp_path / "system"
    write_mnist_dir(system / "fashion-mnist")
    monkeypatch.setattr("clusterable.data.locate.SYSTEM_DATA_DIR", system)
    assert len(load_dataset("fashion-mnist", split="test")) == 20  # the standard place works
    nowhere = tmp_path / "nowhere"
    err = one_line_error(
        capsys,
        ["train", "--data", "fashion-mnist", "--root", str(nowhere), "--out", str(tmp_path / "r")],
    )
    assert str(nowhere) in err and "does not exist" in err
    assert "train-images-idx3-ubyte" in err, "says what the folder should contain"


def test_the_banner_names_the_files_loaded(tmp_path, write_mnist_dir, capsys):
    write_mnist_dir(tmp_path / "fm", n_train=60, n_test=40)
    argv = ["train", "--data", "fashion-mnist", "--root", str(tmp_path / "fm"), "--epochs", "1"]
    argv += ["--embedding-dim", "4", "--batch-size", "20", "--out", str(tmp_path / "run")]
    argv += ["--val-fraction", "0"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "fm" / "train-images-idx3-ubyte.gz") in out
    assert "training  1 epoch, batch 20" in out


def write_pngs(folder, n_per_class=6, size=(28, 28), mode="L", classes=("a", "b")):
    rng = np.random.default_rng(0)
    for name in classes:
        (folder / name).mkdir(parents=True, exist_ok=True)
        for i in range(n_per_class):
            shape = (size[1], size[0]) if mode == "L" else (size[1], size[0], 3)
            pixels = rng.integers(0, 256, shape, dtype=np.uint8)
            Image.fromarray(pixels, mode).save(folder / name / f"{i}.png")


def test_folder_images_keep_their_own_size_and_channels(tmp_path):
    write_pngs(tmp_path / "gray")
    assert load_dataset(f"folder:{tmp_path / 'gray'}", split="all").input_shape == (1, 28, 28)
    write_pngs(tmp_path / "rgb", size=(20, 12), mode="RGB")
    ds = load_dataset(f"folder:{tmp_path / 'rgb'}", split="all")
    assert ds.input_shape == (3, 12, 20) and ds[0][0].shape == (3, 12, 20)


def test_folder_image_size_and_channels_are_settings(tmp_path):
    write_pngs(tmp_path / "gray")
    ds = load_dataset(f"folder:{tmp_path / 'gray'}", split="all", image_size=16, channels=3)
    assert ds.input_shape == (3, 16, 16) and ds[0][0].shape == (3, 16, 16)


def test_folder_images_of_several_sizes_get_the_default_size(tmp_path):
    write_pngs(tmp_path / "mixed", classes=("a",))
    write_pngs(tmp_path / "mixed", size=(32, 32), classes=("b",))
    assert load_dataset(f"folder:{tmp_path / 'mixed'}").input_shape == (1, 64, 64)
    assert load_dataset(f"folder:{tmp_path / 'mixed'}", image_size=28).input_shape == (1, 28, 28)


def test_a_folders_own_splits_share_one_size_and_channels(tmp_path):
    # Small grayscale training images, larger colour test images: one view for both splits,
    # else a model trained on one split cannot embed the other.
    write_pngs(tmp_path / "own" / "train", classes=("a", "b"))
    write_pngs(tmp_path / "own" / "test", size=(100, 100), mode="RGB", classes=("c",))
    train = load_dataset(f"folder:{tmp_path / 'own'}", split="train")
    test = load_dataset(f"folder:{tmp_path / 'own'}", split="test")
    assert train.input_shape == test.input_shape == (3, 64, 64)
    assert train[0][0].shape == test[0][0].shape == (3, 64, 64)
    assert train.source == test.source == f"18 images in {tmp_path / 'own'}"


def test_a_corrupt_test_image_of_a_folders_own_split_fails_the_training_splits_load(tmp_path):
    write_pngs(tmp_path / "own" / "train")
    write_pngs(tmp_path / "own" / "test")
    damaged = tmp_path / "own" / "test" / "b" / "3.png"
    damaged.write_bytes(damaged.read_bytes()[:60] + b"\0" * 40)
    with pytest.raises(ValueError, match=r"test/b/3\.png"):
        load_dataset(f"folder:{tmp_path / 'own'}", split="train")


def test_image_size_is_refused_for_sets_held_in_memory():
    with pytest.raises(ValueError, match="image files only"):
        load_dataset("digits", image_size=32)


def test_a_corrupt_image_fails_the_load_not_the_end_of_training(tmp_path, capsys):
    write_pngs(tmp_path / "imgs")
    damaged = tmp_path / "imgs" / "b" / "3.png"
    damaged.write_bytes(damaged.read_bytes()[:60] + b"\0" * 40)
    err = one_line_error(
        capsys,
        ["train", "--data", f"folder:{tmp_path / 'imgs'}", "--out", str(tmp_path / "run")],
    )
    assert str(damaged) in err
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_npz_arrays_may_be_named_in_capitals(tmp_path):
    np.savez(tmp_path / "t.npz", X=np.ones((10, 3)), Y=np.arange(10) % 2)
    assert load_dataset(f"table:{tmp_path / 't.npz'}", split="all").input_shape == (3,)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a,b,Label\n1,2,0\n3,4,1\n", None),
        ("a,b,label\n1,2,0\n3,4\n", ["line 3", "2 values", "3 columns"]),
        ("a,b,label\n1,2,0\n3,,1\n", ["line 3", "column 'b'", "empty"]),
        ("a,b,label\n1,2,0\nnan,4,1\n", ["line 3", "column 'a'", "NaN"]),
        ("a,b,label\n1,2,0\n1,x,1\n", ["line 3", "column 'b'", "not a number"]),
    ],
    ids=["label-capitalised", "short-row", "empty-cell", "nan-cell", "text-cell"],
)
def test_table_errors_name_line_and_column(tmp_path, text, words):
    path = tmp_path / "t.csv"
    path.write_text(text)
    if words is None:
        assert load_dataset(f"table:{path}", split="all").labels.tolist() == [0, 1]
        return
    with pytest.raises(ValueError) as info:
        load_dataset(f"table:{path}", split="all")
    assert all(word in str(info.value) for word in words), str(info.value)


def test_a_table_without_a_label_column_says_so_briefly(tmp_path):
    header = ",".join(f"pixel{i}" for i in range(785))
    (tmp_path / "wide.csv").write_text(header + "\n" + ",".join(["0"] * 785) + "\n")
    with pytest.raises(ValueError, match="'label' column") as info:
        load_dataset(f"table:{tmp_path / 'wide.csv'}")
    assert len(str(info.value)) < 400


@pytest.mark.parametrize("suffix", [".npz", ".npy"])
def test_nan_features_are_refused_at_load_naming_the_row(tmp_path, suffix):
    x = np.ones((10, 3))
    x[7, 2] = np.nan
    y = np.arange(10) % 2
    if suffix == ".npz":
        np.savez(tmp_path / "t.npz", x=x, y=y)
    else:
        np.save(tmp_path / "t.npy", x)
        np.save(tmp_path / "t_labels.npy", y)
    with pytest.raises(ValueError, match="row 7, column 2"):
        load_dataset(f"table:{tmp_path / ('t' + suffix)}", split="all")


def write_jpegs(folder, n_per_class=6, classes=("a", "b")):
    rng = np.random.default_rng(0)
    for name in classes:
        (folder / name).mkdir(parents=True, exist_ok=True)
        for i in range(n_per_class):
            pixels = rng.integers(0, 256, (40, 30, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / name / f"{i}.jpg")


def test_a_jpeg_cut_short_fails_the_load_naming_it(tmp_path, capsys):
    # PIL's verify() checks nothing of a JPEG: a copy cut short trained, then stopped the test
    # table at the end of `train`, leaving a run folder without its results.
    write_jpegs(tmp_path / "imgs")
    cut = tmp_path / "imgs" / "b" / "3.jpg"
    cut.write_bytes(cut.read_bytes()[:-200])
    err = one_line_error(
        capsys,
        ["train", "--data", f"folder:{tmp_path / 'imgs'}", "--out", str(tmp_path / "run")],
    )
    assert str(cut) in err and "truncated" in err
    assert not (tmp_path / "run").exists()


def test_every_undecodable_file_is_named_by_one_load(tmp_path):
    # The load stopped at the first bad file: a user replaced it, ran again, and met the next.
    write_jpegs(tmp_path / "imgs", n_per_class=8)
    broken = [tmp_path / "imgs" / name / f"{i}.jpg" for name in "ab" for i in (1, 4, 6)]
    for path in broken:
        path.write_bytes(b"not a jpeg")
    with pytest.raises(ValueError) as error:
        load_dataset(f"folder:{tmp_path / 'imgs'}", split="all")
    message = str(error.value)
    assert message.startswith("cannot decode 6 image files: ") and "\n" not in message
    assert all(str(path) in message for path in broken[:5]) and str(broken[5]) not in message
    assert message.endswith("; and 1 more; replace or delete them")


def test_bytes_after_a_jpegs_end_marker_are_read_as_pil_reads_them(tmp_path):
    write_jpegs(tmp_path / "imgs")
    padded = tmp_path / "imgs" / "a" / "0.jpg"
    padded.write_bytes(padded.read_bytes() + b"\0" * 64)  # as some cameras leave
    data = load_dataset(f"folder:{tmp_path / 'imgs'}", split="all")
    assert data[0][0].shape == (3, 40, 30)


def test_a_video_after_a_jpegs_end_marker_is_not_read_as_its_image(tmp_path):
    # A phone's motion photo appends a video after the end marker: its bytes hold scan markers
    # (FF DA) with no end marker after the last one, which a search of the bytes took for a
    # photo cut short. A progressive JPEG (several scans) cut short is still refused.
    write_jpegs(tmp_path / "imgs")
    motion = tmp_path / "imgs" / "a" / "0.jpg"
    motion.write_bytes(motion.read_bytes() + b"ftypmp42" + b"\xff\xd9\x00\xff\xda\x00\x08" * 3)
    assert _jpeg_is_cut_short(motion) is False
    data = load_dataset(f"folder:{tmp_path / 'imgs'}", split="all")
    assert data[0][0].shape == (3, 40, 30)
    progressive = tmp_path / "p.jpg"
    pixels = np.random.default_rng(2).integers(0, 256, (64, 48, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(progressive, progressive=True)
    whole = progressive.read_bytes()
    assert whole.count(b"\xff\xda") > 1 and not _jpeg_is_cut_short(progressive)
    progressive.write_bytes(whole[: len(whole) // 2])
    assert _jpeg_is_cut_short(progressive)


@pytest.mark.parametrize("channels", [1, 3])
def test_a_16_bit_image_keeps_its_shades(tmp_path, channels):
    # PIL's convert() clips a 16-bit grayscale PNG (mode I;16) to white above 255: every pixel
    # of such a photo was 1.0.
    write_pngs(tmp_path / "imgs", n_per_class=3)
    pixels = np.random.default_rng(1).integers(0, 65536, (28, 28), dtype=np.uint16)
    deep = tmp_path / "imgs" / "a" / "0.png"
    Image.fromarray(pixels).save(deep)
    assert Image.open(deep).mode == "I;16"
    data = load_dataset(f"folder:{tmp_path / 'imgs'}", split="all", channels=channels)
    item = data[0][0].numpy()  # the 16-bit image, first of class a
    assert item.shape == (channels, 28, 28)
    for channel in item:
        np.testing.assert_array_equal(channel, (pixels >> 8).astype(np.float32) / 255)


def test_a_class_folder_without_images_is_refused_naming_it(tmp_path, capsys):
    # An empty class folder (or one of notes and .DS_Store) was a class of no items: its
    # number skipped in the labels, cross-entropy refused them ("labels must lie in [0, 2)")
    # after the banner, and every other loss trained with a class that holds nothing.
    write_pngs(tmp_path / "imgs", classes=("a", "c"))
    (tmp_path / "imgs" / "b").mkdir()
    (tmp_path / "imgs" / "b" / "notes.txt").write_text("to sort")
    (tmp_path / "imgs" / "b" / ".DS_Store").write_bytes(b"\0")
    argv = ["train", "--data", f"folder:{tmp_path / 'imgs'}", "--loss", "cross-entropy"]
    err = one_line_error(capsys, [*argv, "--out", str(tmp_path / "run")])
    assert str(tmp_path / "imgs" / "b") in err and "holds no images" in err
    assert not (tmp_path / "run").exists()


def test_the_images_of_a_hidden_folder_are_left_out_as_hidden_files_are(tmp_path):
    # A class folder's .thumbnails/ (or a Mac's .AppleDouble/) added its copies of the photos
    # to the data set, where hidden files and hidden class folders are left out.
    write_pngs(tmp_path / "imgs")
    hidden = tmp_path / "imgs" / "a" / ".thumbnails"
    hidden.mkdir()
    (hidden / "0.png").write_bytes((tmp_path / "imgs" / "a" / "0.png").read_bytes())
    (tmp_path / "imgs" / "b" / ".1.png").write_bytes(
        (tmp_path / "imgs" / "b" / "1.png").read_bytes()
    )
    data = load_dataset(f"folder:{tmp_path / 'imgs'}", split="all")
    assert data.source == f"12 images in {tmp_path / 'imgs'}"
    assert hidden / "0.png" not in data.x.paths
