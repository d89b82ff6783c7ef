"""Name -> loss class registry behind :func:`get_loss` and :func:`available_losses`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

from torch import nn

LossClass = TypeVar("LossClass", bound=type[nn.Module])

_LOSSES: dict[str, type[nn.Module]] = {}

#: What the keywords some losses require mean, for the message when one is missing.
_MEANING = {
    "num_classes": "the number of classes its class weights cover",
    "embedding_dim": "the size of the embeddings it receives",
}
_EXAMPLES = {"num_classes": "10", "embedding_dim": "128"}


def register_loss(name: str) -> Callable[[LossClass], LossClass]:
    """Class decorator: make a loss available as ``get_loss(name)``."""

    def add(cls: LossClass) -> LossClass:
        if name in _LOSSES:
            raise RuntimeError(f"loss name {name!r} is registered twice")
        _LOSSES[name] = cls
        return cls

    return add


def loss_class(name: str) -> type[nn.Module]:
    """The class registered as ``name`` (its signature says what :func:`get_loss` takes)."""
    if name not in _LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of: {', '.join(available_losses())}")
    return _LOSSES[name]


def _required_parameters(cls: type[nn.Module]) -> list[str]:
    """Keywords a loss class cannot do without (no default)."""
    if cls.__init__ is nn.Module.__init__:
        return []
    parameters = inspect.signature(cls.__init__).parameters.values()
    return [
        p.name
        for p in parameters
        if p.name != "self"
        and p.default is p.empty
        and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]


def _constructor_parameters(cls: type[nn.Module]) -> list[str]:
    """Keyword names a loss class accepts (none when it keeps ``nn.Module.__init__``)."""
    if cls.__init__ is nn.Module.__init__:
        return []
    parameters = inspect.signature(cls.__init__).parameters.values()
    return [p.name for p in parameters if p.name != "self" and p.kind is not p.VAR_KEYWORD]


def available_losses() -> list[str]:
    """Names accepted by :func:`get_loss`, sorted."""
    return sorted(_LOSSES)


def get_loss(name: str, **kwargs: object) -> nn.Module:
    """Build a registered loss by name.

    Parameters
    ----------
    name : str
        One of :func:`available_losses` (``"lifted"``, ``"spectral"``, ...).
    **kwargs
        The loss's constructor keywords (``margin=0.5``, ``num_classes=10``, ...).

    Examples
    --------
    >>> import torch
    >>> loss = get_loss("lifted", margin=1.0)
    >>> value = loss(torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))
    """
    cls = loss_class(name)
    accepted = _constructor_parameters(cls)
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        allowed = list(accepted)
        raise ValueError(
            f"loss {name!r} takes no argument {', '.join(unknown)}; "
            f"its arguments are: {', '.join(allowed) or 'none'}"
        )
    missing = [p for p in _required_parameters(cls) if p not in kwargs]
    if missing:
        example = ", ".join(f"{p}={_EXAMPLES.get(p, '...')}" for p in missing)
        meaning = "; ".join(_MEANING.get(p, p) for p in missing)
        raise ValueError(
            f"loss {name!r} needs {', '.join(missing)} ({meaning}): get_loss({name!r}, {example})"
        )
    return cls(**kwargs)


def build_loss(name: str, *, num_classes: int, embedding_dim: int, **kwargs: object) -> nn.Module:
    """Build a loss for a task, passing ``num_classes`` and ``embedding_dim`` where it takes them.

    Trainers and the command line call this so that every loss is built the same way, whether or
    not it owns class weights (``cross-entropy``, ``center``, ``*-corel``) or a metric (``opml``).
    """
    accepted = _constructor_parameters(_LOSSES[name]) if name in _LOSSES else []
    task = {"num_classes": num_classes, "embedding_dim": embedding_dim}
    kwargs = {**{k: v for k, v in task.items() if k in accepted}, **kwargs}
    return get_loss(name, **kwargs)
