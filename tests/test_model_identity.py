"""ModelIdentity: which model made saved embeddings, written beside them and read back."""

from __future__ import annotations

import json

import pytest

from clusterable.trained_run import MODEL_IDENTITY, ModelIdentity


def test_an_identity_is_read_back_from_beside_the_embeddings(tmp_path):
    checkpoint = "/runs/fm/checkpoints/epoch-0002"
    identity = ModelIdentity("ab" * 32, "/runs/fm", "digits", split="test", checkpoint=checkpoint)
    assert identity.save(tmp_path) == tmp_path / MODEL_IDENTITY
    assert ModelIdentity.beside(tmp_path / "embeddings.npy") == identity
    saved = json.loads((tmp_path / MODEL_IDENTITY).read_text())
    assert saved == {
        "model": "ab" * 32,
        "run": "/runs/fm",
        "data": "digits",
        "root": None,
        "split": "test",
        "checkpoint": checkpoint,
    }
    del saved["checkpoint"]  # a file written before the checkpoint was recorded
    (tmp_path / MODEL_IDENTITY).write_text(json.dumps(saved))
    read = ModelIdentity.beside(tmp_path / "embeddings.npy")
    assert read is not None and (read.run, read.checkpoint) == ("/runs/fm", None)
    # Several items are one entry each; files written before joined them by spaces.
    several = ModelIdentity("ab" * 32, "/runs/fm", ("/my photos/a.png", "/b.png"))
    several.save(tmp_path)
    assert json.loads((tmp_path / MODEL_IDENTITY).read_text())["data"] == list(several.data)
    assert ModelIdentity.beside(tmp_path / "embeddings.npy") == several
    (tmp_path / MODEL_IDENTITY).write_text(json.dumps({**saved, "data": "/a.png /b.png"}))
    assert ModelIdentity.beside(tmp_path / "embeddings.npy").data == "/a.png /b.png"


def test_no_identity_is_none_and_a_damaged_one_says_what_to_do(tmp_path):
    assert ModelIdentity.beside(tmp_path / "embeddings.npy") is None
    (tmp_path / MODEL_IDENTITY).write_text(json.dumps({"run": "/runs/fm"}))
    with pytest.raises(ValueError, match="clusterable embed"):
        ModelIdentity.beside(tmp_path / "embeddings.npy")
