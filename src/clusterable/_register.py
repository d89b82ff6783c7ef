"""The one rule every registry of the package keeps: a name is registered once."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def register_once(table: dict[str, T], name: str, entry: T, kind: str) -> None:
    """Put ``entry`` under ``name`` in ``table``; a second registration of a name is refused, so
    that one piece cannot silently replace another (a user's loss shadowing a built-in one)."""
    if name in table:
        raise RuntimeError(f"{kind} name {name!r} is registered twice")
    table[name] = entry
