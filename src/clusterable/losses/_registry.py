"""Name -> loss class registry behind :func:`build_loss` and :func:`available_losses`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from clusterable._register import (
    Registry,
    accepted_keywords,
    check_keywords,
    required_keywords,
)
from clusterable.losses._base import EmbeddingLoss

LossClass = TypeVar("LossClass", bound=type[EmbeddingLoss])

#: Every loss by name (its class), with what was said of it at registration.
LOSSES: Registry[type[EmbeddingLoss]] = Registry("loss")

#: What the keywords some losses require mean, for the message when one is missing.
_MEANING = {
    "num_classes": "the number of classes its class weights cover",
    "embedding_dim": "the size of the embeddings it receives",
}
_EXAMPLES = {"num_classes": "10", "embedding_dim": "128"}


def register_loss(name: str, **metadata: Any) -> Callable[[LossClass], LossClass]:
    """Class decorator: make a loss available as ``build_loss(name)``; ``metadata`` travels with
    it (``LOSSES.metadata(name)``)."""
    register = LOSSES.register(name, **metadata)

    def add(cls: LossClass) -> LossClass:
        register(cls)
        return cls

    return add


def loss_class(name: str) -> type[EmbeddingLoss]:
    """The class registered as ``name`` (its signature says what :func:`build_loss` takes)."""
    return LOSSES[name]


def available_losses() -> list[str]:
    """Names accepted by :func:`build_loss`, sorted."""
    return LOSSES.names()


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
    check_keywords(f"loss {name!r}", cls, kwargs)
    task = {"num_classes": num_classes, "embedding_dim": embedding_dim}
    takes = accepted_keywords(cls) or ()
    kwargs = {**{k: v for k, v in task.items() if k in takes and v is not None}, **kwargs}
    missing = [p for p in required_keywords(cls) if p not in kwargs]
    if missing:
        example = ", ".join(f"{p}={_EXAMPLES.get(p, '...')}" for p in missing)
        meaning = "; ".join(_MEANING.get(p, p) for p in missing)
        raise ValueError(
            f"loss {name!r} needs {', '.join(missing)} ({meaning}): build_loss({name!r}, {example})"
        )
    return cls(**kwargs)
