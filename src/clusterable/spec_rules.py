"""What a :class:`~clusterable.recipe.RunSpec` may hold, checked once, when the spec is made.

Every run setting is refused here, before any data is read or any run folder is made, when it
cannot describe a run: a number outside its range, a dataset, model or loss no registry holds (with
the closest name), a ``timm:`` / ``torchvision:`` name the installed library does not list, a loss
or model keyword its constructor does not take, and a loss's or model's argument outside the range
it declares (``EmbeddingLoss.argument_bounds``, ``register_model(..., argument_bounds=...)``: the
declaration its constructor checks too), and settings that would be ignored or make the run
degenerate together (:func:`_check_combinations`). Each refusal is a
:class:`~clusterable.train.config_typing.SettingError` naming the field, so that the command line
names the flag the value came from (``--data``, ``--loss-arg margn=1``).

Whether the data's files are there is the loader's question, asked when the run starts: a spec
read back from a finished run still describes it after its folder has moved.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from clusterable._register import accepted_keywords
from clusterable.data.registry import check_dataset_name
from clusterable.losses import available_losses, loss_class
from clusterable.losses.autoencoder import RECONSTRUCTION_WEIGHT
from clusterable.models._registry import check_model_arguments, check_model_name, model_arguments
from clusterable.models.pretrained import NOT_ARGUMENTS
from clusterable.train.config_typing import (
    Bounds,
    SettingError,
    check_bounds,
    check_choice,
    did_you_mean,
)

if TYPE_CHECKING:
    from clusterable.recipe import RunSpec

WHAT = "run setting"

#: The range of each numeric run setting.
BOUNDS = {
    "image_size": Bounds(8, none="the backbone's input size, or the images' own"),
    "embedding_dim": Bounds(1),
    "val_fraction": Bounds(0, 1, high_open=True),
    "pseudo_label_every": Bounds(0),
    "memory_size": Bounds(0),
}

#: Run settings with a fixed set of values.
CHOICES: dict[str, tuple[Any, ...]] = {
    "labels": ("fine", "coarse"),
    "channels": (1, 3, None),
}

#: Loss keywords a run fills in itself (``build_loss``'s task).
_LOSS_GIVEN = ("num_classes", "embedding_dim")
#: The loss argument that weighs the autoencoder's term (``AutoencoderLoss``'s ``weight``).
AUTOENCODER_BOUNDS = {"reconstruction_weight": RECONSTRUCTION_WEIGHT}


def check_run_spec(spec: RunSpec, loss_constructor: Callable[..., Any] | None) -> None:
    """Refuse a spec no run can be built from (the module docstring says what is checked).

    ``loss_constructor``: what receives ``spec.loss_args`` (the registered loss class; OPML's
    Riemannian form for an unsupervised run); None for a loss name no registry holds.

    Raises
    ------
    SettingError
        Naming the field, its value, and what it takes.
    """
    values = vars(spec)
    check_bounds(values, BOUNDS, WHAT)
    for name, choices in CHOICES.items():
        check_choice(WHAT, name, values[name], choices, shown=[str(c) for c in choices if c])
    try:
        check_dataset_name(spec.data)
    except (ValueError, FileNotFoundError) as error:
        raise SettingError(WHAT, "data", spec.data, str(error), sentence=True) from None
    check_choice(WHAT, "loss", spec.loss, available_losses())
    try:
        check_model_name(spec.model)
    except ValueError as error:
        raise SettingError(WHAT, "model", spec.model, str(error), sentence=True) from None
    own = {k: v for k, v in spec.loss_args.items() if k not in AUTOENCODER_BOUNDS}
    if loss_constructor is not None:
        takes = accepted_keywords(loss_constructor, _LOSS_GIVEN)
        if takes is not None:
            _check_keywords(f"loss {spec.loss!r}", "loss_args", own, takes)
        bounds = getattr(loss_constructor, "argument_bounds", {})
        check_bounds(own, bounds, f"loss {spec.loss!r} argument", "loss_args")
    check_bounds(spec.loss_args, AUTOENCODER_BOUNDS, "autoencoder argument", "loss_args")
    _check_model_arguments(spec.model, spec.model_args)
    _check_combinations(spec, loss_constructor)


def _check_combinations(spec: RunSpec, loss_constructor: Callable[..., Any] | None) -> None:
    """Refuse a setting the rest of the spec would ignore, or with which the run is degenerate:
    pseudo-label refreshes of a supervised run, a cross-batch memory for a loss that takes no
    references (``accepts_references``), and l2-normalised embeddings of one dimension."""
    if spec.pseudo_label_every and not spec.unsupervised:
        reason = (
            "recomputes the pseudo-labels of an unsupervised run, and this run trains on its "
            "labels; add unsupervised (--unsupervised), or leave pseudo_label_every 0"
        )
        raise SettingError(WHAT, "pseudo_label_every", spec.pseudo_label_every, reason)
    if (
        spec.memory_size
        and loss_constructor is not None
        and not getattr(loss_constructor, "accepts_references", False)
    ):
        why = getattr(loss_constructor, "references_unsupported_because", "it takes none")
        reason = (
            f"adds past embeddings as partners of a pair loss, and {spec.loss!r} takes no "
            f"partners: {why}; leave memory_size 0, or choose a pair loss: "
            f"{', '.join(_losses_with_references())}"
        )
        raise SettingError(WHAT, "memory_size", spec.memory_size, reason)
    if spec.normalize and spec.embedding_dim == 1:
        reason = (
            "with normalize puts every item at -1 or +1 (a unit vector of one dimension), two "
            "points for all classes; give embedding_dim 2 or more, or leave normalize off"
        )
        raise SettingError(WHAT, "embedding_dim", spec.embedding_dim, reason)


def _losses_with_references() -> list[str]:
    """The registered losses a cross-batch memory can serve (``accepts_references``)."""
    return [
        name
        for name in available_losses()
        if getattr(loss_class(name), "accepts_references", False)
    ]


def _check_model_arguments(model: str, model_args: Mapping[str, Any]) -> None:
    takes = model_arguments(model)
    if takes is not None:
        _check_keywords(f"model {model!r}", "model_args", model_args, takes)
        check_model_arguments(model, model_args, "model_args")
        return
    for key, value in model_args.items():  # a pretrained backbone: its library checks the rest
        if key in NOT_ARGUMENTS:
            reason = f"is not an argument of a pretrained backbone: {NOT_ARGUMENTS[key]}"
            raise SettingError(f"model {model!r} argument", "model_args", value, reason, key)


def _check_keywords(what: str, field: str, given: Mapping[str, Any], takes: list[str]) -> None:
    """Refuse a keyword of ``given`` that is not among ``takes``, listing them."""
    for key, value in given.items():
        if key not in takes:
            message = (
                f"{what} takes no argument {key}; its arguments are: {', '.join(takes) or 'none'}"
                f"{did_you_mean(key, takes)}"
            )
            raise SettingError(f"{what} argument", field, value, message, key, sentence=True)
