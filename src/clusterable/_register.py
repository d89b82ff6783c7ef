"""One registry contract for every kind of piece: losses, models, datasets, samplers, clusterers,
metrics and experiments.

A :class:`Registry` maps names to entries (a class or a function) with the metadata given at
registration (a display label, whether a clusterer takes ``n_clusters``, ...), as timm's
``register_model`` carries a model's metadata with it. Each kind keeps one module-level registry
and exposes ``register_<kind>`` (its decorator), ``available_<kind>s()`` (its names) and one
builder; the command line's choices and tune's metric list are read from the same registry, so a
piece registered by a user is everywhere at once. Each builder calls its entry its own way (a loss
gets the task's keywords it takes, a model its input shape, a sampler the run's settings), after
the one keyword check, :func:`check_keywords`.

Example
-------
>>> things = Registry("thing")
>>> @things.register("double", label="2x")
... def double(x: int, *, factor: int = 2) -> int:
...     return factor * x
>>> check_keywords("thing 'double'", things["double"], {"factor": 3})
>>> things.names(), things.metadata("double")["label"], things["double"](3, factor=3)
(['double'], '2x', 9)
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def register_once(table: dict[str, T], name: str, entry: T, kind: str) -> None:
    """Put ``entry`` under ``name`` in ``table``; a second registration of a name is refused, so
    that one piece cannot silently replace another (a user's loss shadowing a built-in one)."""
    if name in table:
        raise RuntimeError(f"{kind} name {name!r} is registered twice")
    table[name] = entry


def did_you_mean(value: Any, names: Sequence[str]) -> str:
    """``"; did you mean NAME?"`` for the name closest to ``value`` (the first of equals, so the
    order of ``names`` breaks ties: ``recall@l`` is ``recall@1``); empty where none is close."""
    best, best_score = None, 0.6  # difflib.get_close_matches' cut-off
    for name in names:
        score = difflib.SequenceMatcher(None, str(value), str(name)).ratio()
        if score > best_score:
            best, best_score = name, score
    return f"; did you mean {best}?" if best is not None else ""


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered piece: the object and what was said of it at registration."""

    name: str
    value: T
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _parameters(target: Callable[..., Any]) -> list[inspect.Parameter] | None:
    """The parameters of ``target`` (a class: its ``__init__``, ``self`` left out); None when it
    has no signature (a builtin: let it check for itself)."""
    # mypy calls reading __init__ unsound (a subclass may change it): this is the class's own.
    function = target.__init__ if isinstance(target, type) else target  # type: ignore[misc]
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    found = [p for p in parameters if p.name != "self"]
    passes_along = all(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in found)
    if isinstance(target, type) and "__init__" not in vars(target) and passes_along:
        # An inherited ``(*args, **kwargs)`` (object's, nn.Module's) hands arguments along a
        # chain of bases; the class itself declares none, and passing one is an error.
        return []
    return found


def accepted_keywords(target: Callable[..., Any], skip: tuple[str, ...] = ()) -> list[str] | None:
    """The keyword names ``target`` takes (a class: its ``__init__``), ``skip`` left out; None
    when it takes any keyword (``**kwargs``) or has no signature."""
    parameters = _parameters(target)
    if parameters is None or any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return [p.name for p in parameters if p.kind is not p.VAR_POSITIONAL and p.name not in skip]


def required_keywords(target: Callable[..., Any], skip: tuple[str, ...] = ()) -> list[str]:
    """The keyword names ``target`` cannot do without (no default), ``skip`` left out."""
    return [
        p.name
        for p in _parameters(target) or []
        if p.name not in skip
        and p.default is p.empty
        and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]


def check_keywords(
    what: str,
    target: Callable[..., Any],
    given: Mapping[str, Any],
    skip: tuple[str, ...] = (),
) -> None:
    """Refuse keywords ``target`` does not take, naming the ones it does: the one argument check
    of every registry (``what``: e.g. ``"loss 'lifted'"``)."""
    accepted = accepted_keywords(target, skip)
    if accepted is None:
        return
    unknown = sorted(set(given) - set(accepted) - set(skip))
    if unknown:
        raise ValueError(
            f"{what} takes no argument {', '.join(unknown)}; its arguments are: "
            f"{', '.join(accepted) or 'none'}"
        )


class Registry(Generic[T]):
    """Names -> entries of one kind, each registered once, with metadata.

    Parameters
    ----------
    kind : str
        What an entry is, in words (``"loss"``, ``"clustering"``), for messages.
    aliases : mapping of str to str, optional
        Short names accepted besides the registered ones (``{"ap": "affinity_propagation"}``).
    sort : bool
        :meth:`names` sorted; False: in the order of registration (where the order means
        something: the columns of the metric table, the samplers from plain to mining).
    """

    def __init__(
        self, kind: str, aliases: Mapping[str, str] | None = None, sort: bool = True
    ) -> None:
        self.kind = kind
        self.aliases = dict(aliases or {})
        self.sort = sort
        self._entries: dict[str, Entry[T]] = {}

    def register(self, name: str, **metadata: Any) -> Callable[[T], T]:
        """Decorator: register the class or function it decorates as ``name``."""

        def add(value: T) -> T:
            self.add(name, value, **metadata)
            return value

        return add

    def add(self, name: str, value: T, **metadata: Any) -> None:
        """Register ``value`` as ``name``; a name already taken is refused."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} name is a non-empty string, got {name!r}")
        register_once(self._entries, name, Entry(name, value, dict(metadata)), self.kind)

    def canonical(self, name: str) -> str:
        """The registered name ``name`` stands for; a ValueError listing the names otherwise."""
        name = self.aliases.get(name, name)
        if name not in self._entries:
            names = self.names(aliases=True)
            raise ValueError(
                f"unknown {self.kind} {name!r}; choose one of: {', '.join(names)}"
                f"{did_you_mean(name, names)}"
            )
        return name

    def entry(self, name: str) -> Entry[T]:
        """The entry registered as ``name`` (or an alias of it)."""
        return self._entries[self.canonical(name)]

    def __getitem__(self, name: str) -> T:
        return self.entry(name).value

    def metadata(self, name: str) -> Mapping[str, Any]:
        """What was said of ``name`` at registration."""
        return self.entry(name).metadata

    def label(self, name: str) -> str:
        """The display label given at registration, the name itself otherwise."""
        return str(self.metadata(name).get("label", self.canonical(name)))

    def names(self, aliases: bool = False) -> list[str]:
        """Registered names, sorted or in registration order (then the aliases, when asked)."""
        names = sorted(self._entries) if self.sort else list(self._entries)
        return names + (sorted(self.aliases) if aliases else [])

    @contextmanager
    def scratch(self) -> Iterator[Registry[T]]:
        """A block whose registrations are undone when it ends (a test's own pieces).

        >>> things = Registry("thing")
        >>> with things.scratch():
        ...     things.add("temporary", 1)
        >>> "temporary" in things
        False
        """
        kept = dict(self._entries)
        try:
            yield self
        finally:
            self._entries.clear()
            self._entries.update(kept)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.aliases.get(name, name) in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)
