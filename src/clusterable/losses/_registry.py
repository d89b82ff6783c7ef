"""Name -> loss class registry behind :func:`build_loss` and :func:`available_losses`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

from torch import nn

from clusterable._register import register_once
from clusterable.losses._base import EmbeddingLoss

LossClass = TypeVar("LossClass", bound=type[EmbeddingLoss])

_LOSSES: dict[str, type[EmbeddingLoss]] = {}

#: What the keywords some losses require mean, for the message when one is missing.
_MEANING = {
    "num_classes": "the number of classes its class weights cover",
    "embedding_dim": "the size of the embeddings it receives",
}
_EXAMPLES = {"num_classes": "10", "embedding_dim": "128"}


def register_loss(name: str) -> Callable[[LossClass], LossClass]:
    """Class decorator: make a loss available as ``build_loss(name)``."""

    def add(cls: LossClass) -> LossClass:
        register_once(_LOSSES, name, cls, "loss")
        return cls

    return add


def loss_class(name: str) -> type[EmbeddingLoss]:
    """The class registered as ``name`` (its signature says what :func:`build_loss` takes)."""
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
    """Names accepted by :func:`build_loss`, sorted."""
    return sorted(_LOSSES)


def build_loss(
    name: str,
    *,
    num_classes: int | None = None,
    embedding_dim: int | None = None,
    **kwargs: object,
) -> EmbeddingLoss:
    """Build a registered loss by name.

    ``num_classes`` and ``embedding_dim`` describe the task: they reach the losses whose
    constructor takes them (class weights of ``cross-entropy``, ``center``, ``*-corel``; the
    metric of ``opml``) and are left out for the others, so trainers build every loss the same
    way. Any other keyword the loss does not take is refused.

    Parameters
    ----------
    name : str
        One of :func:`available_losses` (``"lifted"``, ``"spectral"``, ...).
    num_classes, embedding_dim : int, optional
        The task's class count and embedding width.
    **kwargs
        The loss's own constructor keywords (``margin=0.5``, ``sigma=1.0``, ...).

    Examples
    --------
    >>> import torch
    >>> loss = build_loss("lifted", margin=1.0)
    >>> value = loss(torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))
    """
    cls = loss_class(name)
    accepted = _constructor_parameters(cls)
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ValueError(
            f"loss {name!r} takes no argument {', '.join(unknown)}; "
            f"its arguments are: {', '.join(accepted) or 'none'}"
        )
    task = {"num_classes": num_classes, "embedding_dim": embedding_dim}
    kwargs = {**{k: v for k, v in task.items() if k in accepted and v is not None}, **kwargs}
    missing = [p for p in _required_parameters(cls) if p not in kwargs]
    if missing:
        example = ", ".join(f"{p}={_EXAMPLES.get(p, '...')}" for p in missing)
        meaning = "; ".join(_MEANING.get(p, p) for p in missing)
        raise ValueError(
            f"loss {name!r} needs {', '.join(missing)} ({meaning}): build_loss({name!r}, {example})"
        )
    return cls(**kwargs)
