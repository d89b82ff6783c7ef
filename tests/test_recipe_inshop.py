"""An In-Shop run: trained on the train items, its test table scored as the protocol says, each
query ranking the gallery, at the protocol's Recall@K where the gallery can answer them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from clusterable.cli import main
from clusterable.evaluate import evaluate_embeddings
from clusterable.recipe import RunSpec, load_trained, train_run
from clusterable.train import TrainConfig
from clusterable.train.embed import embed_dataset


def write_inshop(root, train_items=6, test_items=5, per_item=4, seed=0):
    """An In-Shop folder in the official layout: ``per_item`` JPEGs of each item, the test items'
    photos half queries, half gallery; each item its own colour."""
    rng = np.random.default_rng(seed)
    lines = []
    for item in range(train_items + test_items):
        colour = rng.integers(100, 140, 3)  # close colours: retrieval is imperfect
        for photo in range(per_item):
            name = f"img/MEN/Tees/id_{item:08d}/{photo:02d}_1_front.jpg"
            pixels = np.clip(colour + rng.integers(-60, 60, (48, 32, 3)), 0, 255)
            (root / "Img" / name).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(pixels.astype(np.uint8)).save(root / "Img" / name, quality=90)
            status = "train" if item < train_items else ("query", "gallery")[photo % 2]
            lines.append(f"{name} id_{item:08d} {status}")
    (root / "Eval").mkdir(parents=True)
    header = [str(len(lines)), "image_name item_id evaluation_status"]
    (root / "Eval" / "list_eval_partition.txt").write_text("\n".join(header + lines) + "\n")
    return root


def test_an_inshop_run_scores_queries_against_the_gallery(tmp_path, capsys):
    root = write_inshop(tmp_path / "inshop")
    spec = RunSpec(data="inshop", root=str(root), model="corel-cnn", image_size=32, val_fraction=0)
    config = TrainConfig(epochs=1, batch_size=8, device="cpu", progress=False, verbose=True)
    _, metrics = train_run(spec, config, out=tmp_path / "run")
    # 10 gallery photos: Recall@1 and @10 of the protocol's 1, 10, 20, ...; the rest left out.
    assert {"recall@1", "recall@10"} <= metrics.keys() and "recall@20" not in metrics
    model = load_trained(tmp_path / "run").model
    test = spec.load("test")
    emb, labels = embed_dataset(model, test)
    want = evaluate_embeddings(emb, labels, ks=(1, 10), queries=test.is_query, seed=config.seed)
    for key in ("recall@1", "recall@10", "map@r", "nmi"):
        assert metrics[key] == pytest.approx(want[key], abs=1e-12), key
    leave_one_out = evaluate_embeddings(emb, labels, ks=(1,), seed=config.seed)
    assert metrics["map@r"] != pytest.approx(leave_one_out["map@r"], abs=1e-6)
    # Test items are not training items (zero-shot): no k-NN accuracy from training items.
    assert not any(key.startswith("knn@") for key in metrics)
    # The command line scores the split by its roles too, and embed saves them for later.
    args = [str(tmp_path / "run"), "--ks", "1,10", "--json", str(tmp_path / "cli.json")]
    assert main(["evaluate", *args]) == 0
    assert json.loads((tmp_path / "cli.json").read_text())["map@r"] == pytest.approx(
        metrics["map@r"], abs=1e-12
    )
    assert main(["embed", str(tmp_path / "run"), "--out", str(tmp_path / "emb")]) == 0
    assert np.load(tmp_path / "emb" / "is_query.npy").tolist() == test.is_query.tolist()
    assert "is_query.npy" in capsys.readouterr().out
