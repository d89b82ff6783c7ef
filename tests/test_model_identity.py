"""ModelIdentity: which model made saved embeddings, written beside them and read back."""

from __future__ import annotations

import json

import pytest

from clusterable.trained_run import MODEL_IDENTITY, ModelIdentity


def test_an_identity_is_read_back_from_beside_the_embeddings(tmp_path):
    identity = ModelIdentity("ab" * 32, "/runs/fm", data="digits", split="test")
    assert identity.save(tmp_path) == tmp_path / MODEL_IDENTITY
    assert ModelIdentity.beside(tmp_path / "embeddings.npy") == identity
    assert json.loads((tmp_path / MODEL_IDENTITY).read_text()) == {
        "model": "ab" * 32,
        "run": "/runs/fm",
        "data": "digits",
        "root": None,
        "split": "test",
    }


def test_no_identity_is_none_and_a_damaged_one_says_what_to_do(tmp_path):
    assert ModelIdentity.beside(tmp_path / "embeddings.npy") is None
    (tmp_path / MODEL_IDENTITY).write_text(json.dumps({"run": "/runs/fm"}))
    with pytest.raises(ValueError, match="clusterable embed"):
        ModelIdentity.beside(tmp_path / "embeddings.npy")
