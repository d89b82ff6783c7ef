"""``clusterable cache list`` and ``cache clear``: the disk caches of decoded training images
(issue 40), shown and deleted; wrong requests are one line, exit 2."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from clusterable.cli import main
from clusterable.data import ImageFiles
from clusterable.data.image_cache import CACHE_DIR_VARIABLE, disk_cached, list_caches
from clusterable.data.transforms import Preprocessing


def one_line_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("clusterable cache: error:") and "\n" not in err
    assert "Traceback" not in err
    return err


@pytest.fixture
def caches(tmp_path, monkeypatch) -> tuple:
    """Two caches of four small photos (at 16 and 24 px) in ``$CLUSTERABLE_CACHE_DIR``."""
    folder = tmp_path / "photos"
    folder.mkdir()
    paths = []
    for i in range(4):
        pixels = np.random.default_rng(i).integers(0, 256, (30, 40, 3), dtype=np.uint8)
        paths.append(folder / f"{i}.jpg")
        Image.fromarray(pixels).save(paths[-1], quality=90)
    root = tmp_path / "caches"
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(root))
    keys = []
    for size in (16, 24):
        files = ImageFiles(paths, size, preprocessing=Preprocessing(size=size), augment_seed=0)
        cached, _ = disk_cached(files, threads=1, progress=False)
        keys.append(cached.decoded.file.parent.name)
    return root, keys, folder


def test_list_shows_each_cache_and_its_source(caches, capsys):
    root, keys, folder = caches
    assert main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"image caches in {root}:"
    assert lines[1].split() == ["key", "images", "MiB", "created", "source"]
    rows = [line.split() for line in lines[2:4]]
    assert sorted(row[0] for row in rows) == sorted(keys)
    assert all(row[1] == "4" and row[4] == str(folder) for row in rows)
    assert lines[4].startswith("2 cache(s), ")


def test_clear_deletes_the_keys_named_then_all(caches, capsys):
    root, keys, _ = caches
    assert main(["cache", "clear", keys[0]]) == 0
    assert capsys.readouterr().out == f"cleared 1 image cache(s) from {root}\n"
    assert [entry.key for entry in list_caches(root)] == [keys[1]]
    (root / f".{keys[0]}.77.tmp").mkdir()  # what a killed build left
    assert main(["cache", "clear", "--all", "--dir", str(root)]) == 0
    assert capsys.readouterr().out == f"cleared 2 image cache(s) from {root}\n"
    assert list(root.iterdir()) == []
    main(["cache", "list"])
    assert capsys.readouterr().out == f"no image caches in {root}\n"


def test_wrong_requests_are_one_line(caches, capsys, tmp_path):
    root, keys, folder = caches
    err = one_line_error(capsys, ["cache", "clear"])
    assert "neither KEY nor --all given; name the caches to delete (KEY ..., from" in err
    err = one_line_error(capsys, ["cache", "clear", keys[0], "--all"])
    assert "both KEY and --all given" in err
    err = one_line_error(capsys, ["cache", "clear", "0123abc"])
    assert f"no image cache '0123abc' in {root}" in err
    err = one_line_error(capsys, ["cache", "list", "--dir", str(folder / "0.jpg")])
    assert err.endswith("it is a file, not a folder of image caches")
    with pytest.raises(SystemExit) as stop:
        main(["cache", "empty"])
    assert stop.value.code == 2 and "invalid choice: 'empty'" in capsys.readouterr().err
    assert len(list_caches(root)) == 2  # nothing was deleted


def test_train_names_an_unusable_cache_folder_before_any_run_folder(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(blocker / "caches"))
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as stop:
        main(["train", "--cache-images", "disk", "--epochs", "1", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and "\n" not in err and not out.exists()
    assert err == (
        f"clusterable train: error: image cache folder {blocker / 'caches'}: {blocker} is a file, "
        f"not a folder; set {CACHE_DIR_VARIABLE} to a writable folder"
    )
