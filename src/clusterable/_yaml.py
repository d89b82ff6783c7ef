"""YAML as the package reads it: PyYAML's safe loader, refusing a mapping that holds a key twice.

PyYAML keeps the last value of a key written twice without a word (``lr: 0.1`` on line 3 and
``lr: 0.001`` on line 9 train with 0.001), so a settings file edited by hand could run other
settings than its reader sees. Every YAML the package reads (``--config`` run files, their
``search:`` mapping, the values of ``--set``, ``--loss-arg`` and ``--param``) goes through
:func:`load_yaml`.
"""

from __future__ import annotations

from typing import Any

import yaml


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping holds ``key`` twice: on ``line`` (1-based, marked as ``problem_mark``) and,
    first, on ``first_line``."""

    def __init__(self, key: Any, node: yaml.Node, first: yaml.Node) -> None:
        self.key = key
        self.line = node.start_mark.line + 1
        self.first_line = first.start_mark.line + 1
        super().__init__(
            problem=(
                f"{key} is set twice (also on line {self.first_line}); keep one of the two, as "
                "YAML would silently take the last"
            ),
            problem_mark=node.start_mark,
        )


class UniqueKeyLoader(yaml.SafeLoader):
    """:class:`yaml.SafeLoader` whose mappings refuse a key written twice
    (:class:`DuplicateKeyError`); keys merged in by ``<<`` may be overridden, as YAML means."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The mapping of ``node``, refused if two of its own keys are equal."""
        first: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = first.get(key)
            except TypeError:  # a key that is no hashable value: PyYAML's own error says so
                continue
            if seen is not None:
                raise DuplicateKeyError(key, key_node, seen)
            first[key] = key_node
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """The value YAML ``text`` holds, as :func:`yaml.safe_load` reads it but for a mapping that
    sets a key twice.

    Raises
    ------
    DuplicateKeyError
        A mapping sets a key twice (a :class:`yaml.MarkedYAMLError`, marked at the second).
    yaml.YAMLError
        ``text`` is not YAML.
    """
    return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader: no Python objects
