"""embed_dataset: image files decoded by worker processes as uint8 pixels give the embeddings of
the dataset's float items bit for bit; a broken file is named in one line; a test table's
k-NN reference embeds the training images' evaluation view, not their augmented crops."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from clusterable.data import ImageFiles, LabelledDataset
from clusterable.data.transforms import Preprocessing
from clusterable.evaluate import knn_accuracy
from clusterable.losses import build_loss
from clusterable.models import build_model
from clusterable.recipe import evaluate_on_test
from clusterable.train import TrainConfig, Trainer, embed_dataset


def write_photos(folder, count=10, seed=0) -> list:
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        pixels = rng.integers(0, 256, (30, 40, 3)).astype(np.uint8)
        paths.append(folder / f"{i:02d}.jpg")
        Image.fromarray(pixels).save(paths[-1], quality=90)
    return paths


def photo_set(folder, **files_args) -> LabelledDataset:
    paths = write_photos(folder)
    return LabelledDataset("photos", ImageFiles(paths, 16, **files_args), np.arange(10) // 2)


def model_for(dataset):
    torch.manual_seed(0)
    return build_model("corel-cnn", dataset.input_shape, 8)


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_embeddings_from_worker_pixels_are_those_of_the_float_items(tmp_path, workers):
    data = photo_set(tmp_path)
    model = model_for(data)
    emb, labels = embed_dataset(model, data, batch_size=4, workers=workers)
    with torch.no_grad():
        model.eval()
        items = torch.stack([data[i][0] for i in range(len(data))])  # the float items
        want = torch.cat([model(items[i : i + 4]) for i in range(0, len(data), 4)]).numpy()
    np.testing.assert_array_equal(emb, want)
    np.testing.assert_array_equal(labels, data.labels)


def test_a_broken_file_in_a_worker_is_named_in_one_line(tmp_path):
    data = photo_set(tmp_path)
    data.x.paths[7].write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match=r"cannot decode image file .*07\.jpg") as error:
        embed_dataset(model_for(data), data, workers=1)
    assert "\n" not in str(error.value) and "Traceback" not in str(error.value)


def test_training_names_a_broken_file_in_one_line(tmp_path):
    data = photo_set(tmp_path)
    data.x.paths[3].write_bytes(b"not a jpeg")
    config = TrainConfig(
        epochs=1,
        batch_size=10,  # every photo in the one batch: the broken one is read
        items_per_class=2,
        workers=1,
        cache_images="none",
        device="cpu",
        progress=False,
    )
    trainer = Trainer(model_for(data), build_loss("contrastive"), data, config=config)
    with pytest.raises(ValueError, match=r"cannot decode image file .*03\.jpg") as error:
        trainer.fit()
    assert "\n" not in str(error.value)


def test_the_knn_reference_is_the_training_images_evaluation_view(tmp_path):
    train = photo_set(tmp_path, preprocessing=Preprocessing(size=16), augment_seed=3)
    test = LabelledDataset(
        "test", ImageFiles(write_photos(tmp_path, seed=1)[:6], 16), np.arange(6) // 2
    )
    model = model_for(train)
    metrics = evaluate_on_test(model, train, test, seed=0)
    plain = train.replace(x=train.x.replace(augment_seed=None))
    train_emb, train_y = embed_dataset(model, plain)
    test_emb, test_y = embed_dataset(model, test)
    assert metrics["knn@1"] == knn_accuracy(train_emb, train_y, test_emb, test_y, k=1)
    np.testing.assert_array_equal(embed_dataset(model, train)[0], train_emb)
    with torch.no_grad():  # the augmented crops, which embedding must not use
        model.eval()
        crops = model(torch.stack([train[(i, 0)][0] for i in range(len(train))])).numpy()
    assert np.abs(crops - train_emb).max() > 1e-3
