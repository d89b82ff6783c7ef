"""Name -> architecture registry behind :func:`build_model`, :func:`build_decoder` and
:func:`available_models`."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from torch import nn

from clusterable._ranges import Bounds, check_bounds
from clusterable._register import Entry, Registry, accepted_keywords, check_keywords
from clusterable.models.embedding_net import EmbeddingNet

if TYPE_CHECKING:
    from clusterable.data.transforms import Preprocessing

#: ``builder(input_shape, **kwargs) -> (backbone, feature_dim)``.
BackboneBuilder = Callable[..., tuple[nn.Module, int]]
#: ``decoder(input_shape, embedding_dim, **kwargs) -> nn.Module`` mapping embeddings to inputs.
DecoderBuilder = Callable[..., nn.Module]

#: Prefixes of pretrained backbones from the optional ``vision`` extra: ``timm:resnet18``.
PRETRAINED_PREFIXES: tuple[str, ...] = ("timm", "torchvision")


#: Every built-in architecture by name: its backbone builder, with its ``decoder`` (and any other
#: metadata) given at registration.
MODELS: Registry[BackboneBuilder] = Registry("model")

#: What :func:`build_model` and :func:`build_decoder` pass themselves: not model arguments.
_GIVEN = ("input_shape", "embedding_dim")


def register_model(
    name: str,
    *,
    decoder: DecoderBuilder,
    argument_bounds: Mapping[str, Bounds] | None = None,
    **metadata: Any,
) -> Callable[[BackboneBuilder], BackboneBuilder]:
    """Function decorator: make a backbone builder available as ``build_model(name)``.

    Parameters
    ----------
    name : str
        The registry name.
    decoder : callable
        Builds the mirrored decoder for an autoencoder term (MsDNN-AE); it takes the same
        architecture keywords as the backbone builder, plus ``sigmoid``.
    argument_bounds : mapping of str to Bounds, optional
        The range of each numeric architecture keyword (of each item, for a list of widths):
        :func:`build_model` and :func:`build_decoder` refuse a value outside it, and so does a
        run's spec for ``--model-arg NAME=VALUE``, before any data is read.
    **metadata
        Anything else to keep with the entry (``MODELS.metadata(name)``); ``batchnorm=False``
        says the backbone holds no BatchNorm layer, so that a run freezing BatchNorm is refused
        before its data is read (:func:`has_no_batchnorm`).
    """
    if argument_bounds:
        metadata["argument_bounds"] = dict(argument_bounds)
    return MODELS.register(name, decoder=decoder, **metadata)


def available_models() -> list[str]:
    """Built-in model names, sorted. ``timm:NAME`` and ``torchvision:NAME`` are accepted too."""
    return MODELS.names()


def model_builder(name: str) -> BackboneBuilder | None:
    """The backbone builder registered as ``name`` (its keywords are ``build_model``'s model
    arguments); None for a pretrained ``timm:`` / ``torchvision:`` backbone."""
    if _split_pretrained(name) is not None:
        return None
    return _entry(name).value


def model_arguments(name: str) -> list[str] | None:
    """The model arguments (``--model-arg``) the built-in model ``name`` takes; None for a
    pretrained backbone, whose library checks its own."""
    if _split_pretrained(name) is not None:
        return None
    return accepted_keywords(_entry(name).value, _GIVEN)


def model_argument_bounds(name: str) -> Mapping[str, Bounds]:
    """The range of each numeric model argument of the built-in model ``name`` (declared at its
    registration); empty for a pretrained backbone, whose library checks its own."""
    if _split_pretrained(name) is not None:
        return {}
    return _entry(name).metadata.get("argument_bounds", {})


def has_no_batchnorm(name: str) -> bool:
    """Whether model ``name`` was registered as holding no BatchNorm layer (``batchnorm=False``);
    False for a pretrained backbone or a model that did not say, whose built layers tell."""
    if _split_pretrained(name) is not None:
        return False
    return _entry(name).metadata.get("batchnorm") is False


def check_model_arguments(name: str, kwargs: Mapping[str, Any], field: str | None = None) -> None:
    """Refuse a model argument of ``kwargs`` outside the range model ``name`` declares for it.

    Raises
    ------
    SettingError
        A ``ValueError`` naming the model, the argument, its value and its range; ``field``
        (``"model_args"``) is the setting the arguments were given as.
    """
    check_bounds(kwargs, model_argument_bounds(name), f"model {name!r} argument", field)


def _entry(name: str) -> Entry[BackboneBuilder]:
    """The built-in architecture ``name``; unknown names get the list, pretrained forms too."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of: {_choices(name)}")
    return MODELS.entry(name)


def _choices(name: str = "") -> str:
    """The built-in names and the pretrained forms, and the name closest to ``name``."""
    listed = (
        ", ".join(available_models())
        + ", or "
        + " / ".join(f"{p}:NAME" for p in PRETRAINED_PREFIXES)
    )
    close = difflib.get_close_matches(name, available_models(), n=1) if name else []
    return f"{listed}; did you mean {close[0]}?" if close else listed


def _split_pretrained(name: str) -> tuple[str, str] | None:
    """``"timm:resnet18" -> ("timm", "resnet18")``; ``None`` for a built-in name."""
    source, sep, arch = name.partition(":")
    if not sep:
        return None
    if source not in PRETRAINED_PREFIXES or not arch:
        raise ValueError(f"unknown model {name!r}; choose one of: {_choices()}")
    return source, arch


def check_model_name(name: str) -> None:
    """Refuse a model :func:`build_model` cannot build, before any data is read: a built-in name,
    or ``timm:NAME`` / ``torchvision:NAME`` with a name that library lists (checked where the
    library is installed; where it is not, the build says how to install it).

    Raises
    ------
    ValueError
        Naming the choices and the closest name (the library's own names for ``timm:`` and
        ``torchvision:``).
    """
    pretrained = _split_pretrained(name)
    if pretrained is None:
        _entry(name)
        return
    from clusterable.models.pretrained import is_architecture, pretrained_architectures

    source, arch = pretrained
    names = pretrained_architectures(source)
    if names is None or is_architecture(source, arch, names):
        return
    close = (
        difflib.get_close_matches(arch, names, n=3) or [n for n in names if n.startswith(arch)][:3]
    )
    listing = "timm.list_models()" if source == "timm" else "torchvision.models.list_models()"
    hint = (
        f"did you mean {', '.join(f'{source}:{c}' for c in close)}?"
        if close
        else f"{listing} names the {len(names)} it has"
    )
    raise ValueError(f"unknown model {name!r}: {source} has no model {arch!r}; {hint}")


def build_model(
    name: str,
    input_shape: tuple[int, ...],
    embedding_dim: int,
    *,
    normalize: bool = False,
    preprocessing: Preprocessing | None = None,
    **kwargs: Any,
) -> EmbeddingNet:
    """Build an embedding network by name.

    Parameters
    ----------
    name : str
        One of :func:`available_models` (``"mlp"``, ``"corel-cnn"``, ``"lenet"``,
        ``"msdnn-cnn"``), or ``"timm:NAME"`` / ``"torchvision:NAME"`` for a pretrained image
        backbone (needs ``pip install 'clusterable[vision]'``; weights come from a local file given
        as ``weights=PATH``, never downloaded).
    input_shape : tuple of int
        Shape of one input item: ``(C, H, W)`` for images (``H, W >= 8`` for the built-in CNNs),
        any shape for ``mlp`` (it flattens).
    embedding_dim : int
        Width of the embedding.
    normalize : bool
        l2-normalise the embeddings.
    preprocessing : Preprocessing, optional
        A pretrained backbone's view, whose mean and std it normalises its inputs by (a trained
        run's stored view); None: its library's. Built-in models normalise nothing.
    **kwargs
        The architecture's keywords (``hidden_dims=(256,)``, ``channels=(16, 32)``, ...); an
        unknown keyword raises a ``ValueError`` listing the accepted ones.

    Returns
    -------
    EmbeddingNet
        Its ``head`` is the final ``nn.Linear``; ``model(x)`` has shape ``(n, embedding_dim)``.

    Examples
    --------
    >>> import torch
    >>> model = build_model("lenet", (1, 28, 28), 64, normalize=True)
    >>> model(torch.zeros(5, 1, 28, 28)).shape
    torch.Size([5, 64])
    """
    input_shape = tuple(int(s) for s in input_shape)
    pretrained = _split_pretrained(name)
    if pretrained is not None:
        # Imported here so that the optional extras are only looked for when asked for.
        from clusterable.models.pretrained import pretrained_backbone

        backbone, feature_dim = pretrained_backbone(
            *pretrained, input_shape, preprocessing=preprocessing, **kwargs
        )
    else:
        builder = _entry(name).value
        check_keywords(f"model {name!r}", builder, kwargs, skip=_GIVEN)
        check_model_arguments(name, kwargs)
        backbone, feature_dim = builder(input_shape, **kwargs)
    return EmbeddingNet(backbone, feature_dim, embedding_dim, normalize=normalize)


def build_decoder(
    name: str, input_shape: tuple[int, ...], embedding_dim: int, **kwargs: object
) -> nn.Module:
    """Build the decoder that mirrors model ``name``, for MsDNN-AE's reconstruction term.

    Chauhan, Davoudi, Komeili. Multi-scale Deep Nearest Neighbors, Sec. III-C and IV-D: the image
    decoder is one fully connected layer followed by six deconvolutions (``msdnn-cnn``); for
    feature vectors it mirrors the encoder's layers (``mlp``).

    Parameters
    ----------
    name : str
        A built-in model name (pretrained backbones have no decoder).
    input_shape : tuple of int
        The encoder's input shape; the decoder's output has this shape.
    embedding_dim : int
        The encoder's embedding width.
    **kwargs
        The same architecture keywords the encoder was built with, so that the layers mirror.

    Returns
    -------
    nn.Module
        Maps ``(n, embedding_dim)`` to ``(n, *input_shape)``, through a sigmoid by default
        (inputs scaled to [0, 1]); pass ``sigmoid=False`` for unbounded features.
    """
    input_shape = tuple(int(s) for s in input_shape)
    if _split_pretrained(name) is not None:
        raise ValueError(
            f"model {name!r} has no decoder; decoders exist for: {', '.join(available_models())}"
        )
    decoder: DecoderBuilder = _entry(name).metadata["decoder"]
    check_keywords(f"decoder {name!r}", decoder, kwargs, skip=_GIVEN)
    check_model_arguments(name, kwargs)
    return decoder(input_shape, embedding_dim, **kwargs)
