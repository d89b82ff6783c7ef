"""The package's YAML loader: safe, and a key set twice in one mapping refused where it stands."""

from __future__ import annotations

import pytest
import yaml

from clusterable._yaml import DuplicateKeyError, load_yaml


@pytest.mark.parametrize(
    ("text", "key", "line", "first"),
    [
        ("lr: 0.1\nepochs: 2\nlr: 0.001\n", "lr", 3, 1),
        ("train:\n  lr: 0.1\n  epochs: 2\n  lr: 0.001\n", "lr", 4, 2),
        ("search:\n  margin: {log: [0.1, 2]}\n  margin: {float: [0.1, 2]}\n", "margin", 3, 2),
        ("m: {a: 1, a: 2}\n", "a", 1, 1),
        ("1: one\n1: uno\n", 1, 2, 1),
    ],
    ids=["top-level", "nested", "search", "flow", "number-key"],
)
def test_a_key_set_twice_is_refused_at_its_second_line(text, key, line, first):
    """PyYAML kept the last value of a key set twice without a word."""
    assert yaml.safe_load(text) is not None  # what PyYAML alone takes
    with pytest.raises(DuplicateKeyError) as refused:
        load_yaml(text)
    error = refused.value
    assert (error.key, error.line, error.first_line) == (key, line, first)
    assert error.problem_mark.line + 1 == line and isinstance(error, yaml.MarkedYAMLError)
    assert f"{key} is set twice (also on line {first})" in error.problem


def test_what_safe_load_reads_is_read_the_same():
    text = (
        "base: &base {lr: 0.1, epochs: 2}\n"
        "run:\n  <<: *base\n  lr: 0.01\n"  # a merged key may be overridden: YAML means it
        "a: {lr: 1}\nb: {lr: 2}\n"  # the same key in two mappings
        "x: [1, 1e-3, text, null]\n"
    )
    assert load_yaml(text) == yaml.safe_load(text)
    assert load_yaml(text)["run"] == {"lr": 0.01, "epochs": 2}
    assert load_yaml("") is None and load_yaml("0.5") == 0.5


def test_it_stays_safe_and_leaves_other_errors_to_pyyaml():
    with pytest.raises(yaml.constructor.ConstructorError, match="python/object"):
        load_yaml("!!python/object/apply:os.getcwd []\n")
    with pytest.raises(yaml.constructor.ConstructorError, match="unhashable"):
        load_yaml("? [1, 2]\n: x\n")
